//! The `on_lock_lost` callbacks run on a thread of their own
//! (`redhold-callbacks`), fed by the watchdog through a channel, so that a
//! callback that blocks cannot delay renewals, and one that calls
//! `Client::shutdown` does not make a thread wait for itself.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::Duration;

use crossbeam_channel::{bounded, select, unbounded, Receiver, RecvTimeoutError, Sender};
use parking_lot::Mutex;

use crate::error::{Error, Result};
use crate::owner::{owner_in_field, Owner};

/// A hold this client found lost while it was held (it expired or was
/// deleted under its holder): what an
/// [`on_hold_lost`](crate::ClientBuilder::on_hold_lost) callback is told.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LostHold {
    /// The lock's name.
    pub lock: String,
    /// The holder's id, its field in the lock's hash:
    /// `<client-uuid>:<thread-id>` or `<client-uuid>:<owner-id>` (a write
    /// lock's ends in `:write`).
    pub holder_id: String,
    /// The owner that held it; `None` when a thread did.
    pub owner: Option<Owner>,
}

impl LostHold {
    /// The loss of `field`'s holds on `lock`.
    pub(crate) fn new(lock: &str, field: &str) -> LostHold {
        LostHold {
            lock: lock.to_owned(),
            holder_id: field.to_owned(),
            owner: owner_in_field(field),
        }
    }
}

/// Called for each hold the client finds lost.
pub(crate) type LostCallback = Arc<dyn Fn(&LostHold) + Send + Sync>;

/// How long `shutdown` waits for callbacks still queued or running before
/// it leaves them to finish on their own thread.
pub(crate) const SHUTDOWN_GRACE: Duration = Duration::from_secs(1);

/// Where the watchdog reports lost locks. Sending never blocks; without a
/// callback it does nothing.
#[derive(Debug, Clone, Default)]
pub(crate) struct LostNotifier {
    queue: Option<Sender<LostHold>>,
}

impl LostNotifier {
    /// Queues the callback for `lost`.
    pub(crate) fn notify(&self, lost: LostHold) {
        if let Some(queue) = &self.queue {
            // Fails only once the callback thread has ended (after shutdown):
            // nobody is left to tell.
            let _ = queue.send(lost);
        }
    }
}

/// Handle on the callback thread, which runs only when a callback is set.
/// Dropping it stops the thread without waiting for it.
///
/// | state | next |
/// |---|---|
/// | running: takes names off the queue, one callback at a time | stopping, when the handle drops or shuts down |
/// | stopping: runs the callbacks already queued | ended |
pub(crate) struct LostCallbacks {
    running: Mutex<Option<Running>>,
}

struct Running {
    thread: JoinHandle<()>,
    /// Dropping it stops the thread (after the callbacks already queued).
    stop: Sender<()>,
    /// Disconnected once the thread has ended.
    ended: Receiver<()>,
}

impl std::fmt::Debug for LostCallbacks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LostCallbacks")
            .field("running", &self.running.lock().is_some())
            .finish()
    }
}

impl LostCallbacks {
    /// Starts the callback thread when there is a callback, and returns its
    /// handle and the notifier for the watchdog.
    pub(crate) fn start(callback: Option<LostCallback>) -> Result<(LostCallbacks, LostNotifier)> {
        let Some(callback) = callback else {
            let idle = LostCallbacks {
                running: Mutex::new(None),
            };
            return Ok((idle, LostNotifier::default()));
        };
        let (queue, names) = unbounded::<LostHold>();
        let (stop, stopped) = bounded::<()>(0);
        let (ended_tx, ended) = bounded::<()>(0);
        let thread = thread::Builder::new()
            .name("redhold-callbacks".into())
            .spawn(move || {
                let _ended = ended_tx;
                run(&*callback, &names, &stopped);
            })
            .map_err(|source| Error::Spawn {
                thread: "redhold-callbacks",
                source,
            })?;
        let running = Running {
            thread,
            stop,
            ended,
        };
        let handle = LostCallbacks {
            running: Mutex::new(Some(running)),
        };
        Ok((handle, LostNotifier { queue: Some(queue) }))
    }

    /// Stops the thread once the callbacks already queued have run, and
    /// waits for that at most [`SHUTDOWN_GRACE`]: a callback still blocked
    /// then is left to finish on its own. Called from inside a callback, it
    /// does not wait at all (the thread ends after that callback returns).
    pub(crate) fn shutdown(&self) {
        let Some(running) = self.running.lock().take() else {
            return;
        };
        drop(running.stop);
        if running.thread.thread().id() == thread::current().id() {
            return;
        }
        match running.ended.recv_timeout(SHUTDOWN_GRACE) {
            Err(RecvTimeoutError::Timeout) => log::warn!(
                "redhold: an on_lock_lost callback still runs {SHUTDOWN_GRACE:?} after \
                 shutdown; it is left to finish on its own thread"
            ),
            // Ended (nothing is ever sent): the join returns at once.
            _ => {
                if running.thread.join().is_err() {
                    log::error!("the redhold callback thread panicked");
                }
            }
        }
    }
}

/// The thread's loop: one callback per lost lock, a panic caught and
/// logged, until the handle stops it or every notifier is gone.
fn run(
    callback: &(dyn Fn(&LostHold) + Send + Sync),
    names: &Receiver<LostHold>,
    stopped: &Receiver<()>,
) {
    let call = |lost: LostHold| {
        if catch_unwind(AssertUnwindSafe(|| callback(&lost))).is_err() {
            log::error!("redhold: the on_lock_lost callback panicked");
        }
    };
    loop {
        select! {
            recv(names) -> name => match name {
                Ok(name) => call(name),
                Err(_) => return,
            },
            recv(stopped) -> _ => {
                // Losses reported before the stop are still told.
                names.try_iter().for_each(call);
                return;
            }
        }
    }
}
