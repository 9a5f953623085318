//! Joining threads with a deadline: a call that never returns must fail
//! the schedule, not hang the test.

use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// Joins the threads that finish within `limit` and returns the others
/// (still running; they are left behind).
pub(crate) fn wait_for<T>(mut threads: Vec<JoinHandle<T>>, limit: Duration) -> Vec<JoinHandle<T>> {
    let deadline = Instant::now() + limit;
    loop {
        let (done, running): (Vec<_>, Vec<_>) = threads.into_iter().partition(|t| t.is_finished());
        for thread in done {
            let _ = thread.join();
        }
        threads = running;
        if threads.is_empty() || Instant::now() >= deadline {
            return threads;
        }
        thread::sleep(Duration::from_millis(10));
    }
}

/// The thread's result if it finishes within `limit` (`Err` when it
/// panicked); `None` when it is still running.
pub(crate) fn join_within<T>(thread: JoinHandle<T>, limit: Duration) -> Option<thread::Result<T>> {
    let deadline = Instant::now() + limit;
    while !thread.is_finished() {
        if Instant::now() >= deadline {
            return None;
        }
        thread::sleep(Duration::from_millis(10));
    }
    Some(thread.join())
}
