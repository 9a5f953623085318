//! The pub/sub layer's background threads (one subscriber per connection,
//! and in sharded mode the retry thread): started only while the client
//! runs, woken from their pauses when it stops, and joined at shutdown.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// The threads started so far and whether the client stops.
#[derive(Debug, Default)]
pub(super) struct Threads {
    stopping: AtomicBool,
    running: Mutex<Vec<JoinHandle<()>>>,
}

impl Threads {
    /// Starts a thread called `name`; refused once the client stops, so
    /// that none is left behind.
    pub(super) fn spawn(
        &self,
        name: String,
        run: impl FnOnce() + Send + 'static,
    ) -> io::Result<()> {
        // Checked under the lock that `join_all` takes the threads with.
        let mut running = self.running.lock();
        if self.is_stopping() {
            return Err(io::Error::other("the client is shutting down"));
        }
        let thread = thread::Builder::new().name(name).spawn(run)?;
        running.retain(|t| !t.is_finished());
        running.push(thread);
        Ok(())
    }

    /// Whether the client stops.
    pub(super) fn is_stopping(&self) -> bool {
        self.stopping.load(Ordering::SeqCst)
    }

    /// Sleeps for `duration`, or less if the client stops meanwhile.
    pub(super) fn pause(&self, duration: Duration) {
        let deadline = Instant::now().checked_add(duration);
        while !self.is_stopping() {
            match deadline {
                Some(deadline) => {
                    let now = Instant::now();
                    if now >= deadline {
                        return;
                    }
                    thread::park_timeout(deadline - now);
                }
                None => thread::park(),
            }
        }
    }

    /// Marks the client as stopping (no thread starts from now on).
    pub(super) fn stop(&self) {
        self.stopping.store(true, Ordering::SeqCst);
    }

    /// Cuts every thread's pause short.
    pub(super) fn unpark_all(&self) {
        for thread in self.running.lock().iter() {
            thread.thread().unpark();
        }
    }

    /// Waits for every thread to end.
    pub(super) fn join_all(&self) {
        let running = std::mem::take(&mut *self.running.lock());
        for thread in running {
            if thread.join().is_err() {
                log::error!("a redhold pub/sub thread panicked");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stopping_cuts_pauses_short_and_refuses_new_threads() {
        let threads = std::sync::Arc::new(Threads::default());
        let paused = std::sync::Arc::clone(&threads);
        let started = Instant::now();
        threads
            .spawn("pause".into(), move || {
                paused.pause(Duration::from_secs(30))
            })
            .unwrap();
        threads.stop();
        threads.unpark_all();
        threads.join_all();
        assert!(started.elapsed() < Duration::from_secs(10));
        assert!(threads.spawn("late".into(), || {}).is_err());
    }
}
