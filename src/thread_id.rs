//! Process-unique thread numbers, the `<thread-id>` half of a holder field.

use std::sync::atomic::{AtomicU64, Ordering};

/// The next number to hand out; 0 is never used so that it can never be
/// mistaken for "no thread".
static NEXT_THREAD_ID: AtomicU64 = AtomicU64::new(1);

thread_local! {
    static THREAD_ID: u64 = NEXT_THREAD_ID.fetch_add(1, Ordering::Relaxed);
}

/// The calling thread's number: unique in this process and never reused, even
/// after the thread ends (unlike OS thread ids).
pub(crate) fn current() -> u64 {
    THREAD_ID.with(|id| *id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stable_within_a_thread_and_unique_across_threads() {
        let here = current();
        assert_eq!(here, current());
        let others: Vec<u64> = (0..4)
            .map(|_| std::thread::spawn(current).join().unwrap())
            .collect();
        let mut all = others.clone();
        all.push(here);
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), 5);
    }
}
