//! Threads a test can wait for with a deadline, so that a lock call that never
//! returns fails the test instead of hanging it.
//!
//! Every test binary that spawns threads pulls this in with `mod bounded;` and
//! uses a subset of it, hence the `dead_code` allowance.
#![allow(dead_code)]

use std::panic::{self, AssertUnwindSafe};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::thread;
use std::time::{Duration, Instant};

/// A thread spawned by [`spawn`], whose result arrives over a channel.
///
/// A thread still running when the test ends is left behind (it cannot be
/// killed); the test has failed by then anyway.
#[derive(Debug)]
pub(crate) struct Bounded<T> {
    name: String,
    done: Receiver<thread::Result<T>>,
}

/// Runs `f` on a new thread called `name`.
pub(crate) fn spawn<T, F>(name: &str, f: F) -> Bounded<T>
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    let (tx, done) = mpsc::channel();
    thread::Builder::new()
        .name(name.to_owned())
        .spawn(move || {
            let _ = tx.send(panic::catch_unwind(AssertUnwindSafe(f)));
        })
        .unwrap_or_else(|e| panic!("cannot spawn thread {name}: {e}"));
    Bounded {
        name: name.to_owned(),
        done,
    }
}

impl<T> Bounded<T> {
    /// The thread's result, waiting at most `limit` for it.
    ///
    /// # Panics
    ///
    /// If the thread is still running after `limit`, or panicked (its panic
    /// is passed on).
    #[track_caller]
    pub(crate) fn join_within(self, limit: Duration) -> T {
        match self.done.recv_timeout(limit) {
            Ok(Ok(value)) => value,
            Ok(Err(payload)) => panic::resume_unwind(payload),
            Err(RecvTimeoutError::Timeout) => {
                panic!("thread {} still running after {limit:?}", self.name)
            }
            Err(RecvTimeoutError::Disconnected) => {
                panic!("thread {} vanished without a result", self.name)
            }
        }
    }

    /// Checks that the thread keeps running (is blocked) for `duration`.
    ///
    /// # Panics
    ///
    /// If the thread finishes meanwhile.
    #[track_caller]
    pub(crate) fn assert_running_for(&self, duration: Duration) {
        match self.done.recv_timeout(duration) {
            Err(RecvTimeoutError::Timeout) => {}
            Ok(Ok(_)) => panic!(
                "thread {} finished within {duration:?}, expected it to block",
                self.name
            ),
            Ok(Err(payload)) => panic::resume_unwind(payload),
            Err(RecvTimeoutError::Disconnected) => {
                panic!("thread {} vanished without a result", self.name)
            }
        }
    }
}

impl<T: std::fmt::Debug> Bounded<T> {
    /// Like [`assert_running_for`](Self::assert_running_for), with the
    /// thread's result in the message when it finished meanwhile (a waiter
    /// that gave up says why).
    ///
    /// # Panics
    ///
    /// If the thread finishes meanwhile.
    #[track_caller]
    pub(crate) fn assert_parked_for(&self, duration: Duration) {
        match self.done.recv_timeout(duration) {
            Err(RecvTimeoutError::Timeout) => {}
            Ok(Ok(value)) => panic!(
                "thread {} finished within {duration:?} with {value:?}, expected it to block",
                self.name
            ),
            Ok(Err(payload)) => panic::resume_unwind(payload),
            Err(RecvTimeoutError::Disconnected) => {
                panic!("thread {} vanished without a result", self.name)
            }
        }
    }
}

/// Polls `condition` every 20 ms until it holds or `limit` passes; returns
/// how long that took, or `None` on timeout.
pub(crate) fn wait_until(limit: Duration, mut condition: impl FnMut() -> bool) -> Option<Duration> {
    let started = Instant::now();
    loop {
        if condition() {
            return Some(started.elapsed());
        }
        if started.elapsed() >= limit {
            return None;
        }
        thread::sleep(Duration::from_millis(20));
    }
}
