//! The client's timer for async callers: one thread (`redhold-timer`) that
//! runs a callback at a chosen moment (the end of a park on a lock's TTL,
//! a wait's deadline, an outage's backoff), so that no executor's timer is
//! needed and a waiting task costs an entry here, not a thread.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::Instant;

use parking_lot::{Condvar, Mutex};

use crate::error::{Error, Result};

/// What runs when a timer is due; it should be quick (it runs on the
/// timer's one thread): hand the real work to the I/O pool.
pub(crate) type Callback = Box<dyn FnOnce() + Send>;

/// Names a timer, to cancel it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct TimerId(u64);

/// The timer thread and its pending timers.
#[derive(Debug)]
pub(crate) struct Timers {
    shared: Arc<Shared>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

#[derive(Debug, Default)]
struct Shared {
    state: Mutex<State>,
    changed: Condvar,
}

#[derive(Default)]
struct State {
    /// When each pending timer is due, earliest first.
    due: BinaryHeap<Reverse<(Instant, u64)>>,
    /// The callbacks of the timers not cancelled.
    callbacks: HashMap<u64, Callback>,
    next: u64,
    stopped: bool,
}

impl std::fmt::Debug for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("State")
            .field("pending", &self.callbacks.len())
            .field("stopped", &self.stopped)
            .finish()
    }
}

impl Timers {
    /// No timers and no thread yet: it starts with the first timer.
    pub(crate) fn new() -> Timers {
        Timers {
            shared: Arc::default(),
            thread: Mutex::new(None),
        }
    }

    /// Runs `callback` at `at` (at once if it has passed), unless
    /// [`cancel`](Self::cancel)led before.
    ///
    /// # Errors
    ///
    /// [`Error::Shutdown`] once the timers were shut down, [`Error::Spawn`]
    /// when the system refuses the thread.
    pub(crate) fn at(&self, at: Instant, callback: Callback) -> Result<TimerId> {
        self.start()?;
        let mut state = self.shared.state.lock();
        if state.stopped {
            return Err(Error::Shutdown);
        }
        state.next += 1;
        let id = state.next;
        state.due.push(Reverse((at, id)));
        state.callbacks.insert(id, callback);
        drop(state);
        self.shared.changed.notify_one();
        Ok(TimerId(id))
    }

    /// Forgets the timer `id`, if it has not run yet.
    pub(crate) fn cancel(&self, id: TimerId) {
        // Its place in the heap is skipped once due.
        self.shared.state.lock().callbacks.remove(&id.0);
    }

    /// Whether the timer thread runs.
    pub(crate) fn is_started(&self) -> bool {
        self.thread.lock().is_some()
    }

    fn start(&self) -> Result<()> {
        let mut thread = self.thread.lock();
        if thread.is_some() {
            return Ok(());
        }
        let shared = Arc::clone(&self.shared);
        let handle = thread::Builder::new()
            .name("redhold-timer".into())
            .spawn(move || shared.run())
            .map_err(|source| Error::Spawn {
                thread: "redhold-timer",
                source,
            })?;
        *thread = Some(handle);
        Ok(())
    }

    /// Ends the thread, dropping the timers not due yet (their calls are
    /// being shut down too), and waits for it.
    pub(crate) fn shutdown(&self) {
        {
            let mut state = self.shared.state.lock();
            state.stopped = true;
            state.callbacks.clear();
            state.due.clear();
        }
        self.shared.changed.notify_all();
        let thread = self.thread.lock().take();
        if let Some(thread) = thread {
            if thread.thread().id() != thread::current().id() {
                let _ = thread.join();
            }
        }
    }
}

impl Drop for Timers {
    fn drop(&mut self) {
        let mut state = self.shared.state.lock();
        state.stopped = true;
        drop(state);
        self.shared.changed.notify_all();
    }
}

impl Shared {
    /// The thread: runs each callback once due, outside the lock.
    fn run(&self) {
        let mut state = self.state.lock();
        loop {
            if state.stopped {
                return;
            }
            let now = Instant::now();
            let mut due = Vec::new();
            while let Some(Reverse((at, id))) = state.due.peek().copied() {
                if at > now {
                    break;
                }
                state.due.pop();
                if let Some(callback) = state.callbacks.remove(&id) {
                    due.push(callback);
                }
            }
            if !due.is_empty() {
                drop(state);
                for callback in due {
                    if catch_unwind(AssertUnwindSafe(callback)).is_err() {
                        log::error!("redhold: an async call's timer panicked");
                    }
                }
                state = self.state.lock();
                continue;
            }
            match state.due.peek().copied() {
                Some(Reverse((at, _))) => {
                    self.changed.wait_until(&mut state, at);
                }
                None => self.changed.wait(&mut state),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use std::time::Duration;

    #[test]
    fn timers_run_in_order_and_a_cancelled_one_never() {
        let timers = Timers::new();
        let (send, receive) = mpsc::channel();
        let now = Instant::now();
        for (n, ms) in [(3, 30), (1, 10), (2, 20)] {
            let send = send.clone();
            timers
                .at(
                    now + Duration::from_millis(ms),
                    Box::new(move || send.send(n).unwrap()),
                )
                .unwrap();
        }
        let send2 = send.clone();
        let cancelled = timers
            .at(
                now + Duration::from_millis(15),
                Box::new(move || send2.send(9).unwrap()),
            )
            .unwrap();
        timers.cancel(cancelled);
        let got: Vec<i32> = (0..3)
            .map(|_| receive.recv_timeout(Duration::from_secs(5)).unwrap())
            .collect();
        assert_eq!(got, [1, 2, 3]);
        assert!(receive.recv_timeout(Duration::from_millis(50)).is_err());
        timers.shutdown();
        assert!(timers.at(now, Box::new(|| {})).is_err());
    }
}
