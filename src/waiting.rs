//! Counts the acquire calls of a client under way, so that shutdown can let
//! them leave the queues they joined, and give back holds they took as it
//! began, before it returns.

use std::time::Instant;

use parking_lot::{Condvar, Mutex};

/// How many acquire calls are under way.
#[derive(Debug, Default)]
pub(crate) struct Waiting {
    count: Mutex<usize>,
    none_left: Condvar,
}

/// One acquire call, counted until dropped.
#[derive(Debug)]
pub(crate) struct WaitingCall<'a> {
    waiting: &'a Waiting,
}

impl Waiting {
    /// Counts one more call until the returned value drops.
    pub(crate) fn enter(&self) -> WaitingCall<'_> {
        *self.count.lock() += 1;
        WaitingCall { waiting: self }
    }

    /// Counts one more call until [`count_out`](Self::count_out): an async
    /// call, which outlives any one borrow of the client.
    pub(crate) fn count_in(&self) {
        *self.count.lock() += 1;
    }

    /// An async call counted with [`count_in`](Self::count_in) ended.
    pub(crate) fn count_out(&self) {
        let mut count = self.count.lock();
        *count = count.saturating_sub(1);
        if *count == 0 {
            self.none_left.notify_all();
        }
    }

    /// Waits until no call is under way, or until `deadline`. Returns
    /// whether none is left.
    pub(crate) fn wait_until_none(&self, deadline: Instant) -> bool {
        let mut count = self.count.lock();
        while *count > 0 {
            if self.none_left.wait_until(&mut count, deadline).timed_out() {
                return *count == 0;
            }
        }
        true
    }
}

impl Drop for WaitingCall<'_> {
    fn drop(&mut self) {
        let mut count = self.waiting.count.lock();
        *count -= 1;
        if *count == 0 {
            self.waiting.none_left.notify_all();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn waits_for_the_last_call_to_leave() {
        let waiting = std::sync::Arc::new(Waiting::default());
        let soon = || Instant::now() + Duration::from_millis(20);
        assert!(waiting.wait_until_none(soon()));
        let call = waiting.enter();
        assert!(!waiting.wait_until_none(soon()));
        let other = std::sync::Arc::clone(&waiting);
        let leaver = std::thread::spawn(move || {
            let _late = other.enter();
            std::thread::sleep(Duration::from_millis(30));
        });
        drop(call);
        std::thread::sleep(Duration::from_millis(5));
        assert!(waiting.wait_until_none(Instant::now() + Duration::from_secs(10)));
        leaver.join().unwrap();
    }
}
