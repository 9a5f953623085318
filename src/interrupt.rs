//! A handle that cuts short a thread's wait for a lock.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::{self, Thread, ThreadId};

use parking_lot::Mutex;

/// Cuts short [`Lock::lock_interruptibly`](crate::Lock::lock_interruptibly)
/// from another thread, like Java's `Thread.interrupt()` for lock waits.
///
/// Clone it and hand a clone to the thread that should be able to stop the
/// wait. Once [`trigger`](Self::trigger) is called, every wait that uses this
/// interrupt (now or later) returns [`Error::Interrupted`](crate::Error::Interrupted)
/// promptly, without waiting for Redis.
///
/// ```no_run
/// # fn main() -> redhold::Result<()> {
/// let client = redhold::Client::open("redis://127.0.0.1:6379/")?;
/// let stop = redhold::Interrupt::new();
/// let stopper = stop.clone();
/// std::thread::spawn(move || {
///     std::thread::sleep(std::time::Duration::from_secs(1));
///     stopper.trigger();
/// });
/// match client.lock("jobs").lock_interruptibly(&stop) {
///     Ok(_guard) => println!("got the lock"),
///     Err(redhold::Error::Interrupted { .. }) => println!("gave up"),
///     Err(e) => return Err(e),
/// }
/// # Ok(()) }
/// ```
#[derive(Clone, Default)]
pub struct Interrupt {
    inner: Arc<Inner>,
}

#[derive(Default)]
struct Inner {
    triggered: AtomicBool,
    /// Threads parked in a wait that uses this interrupt.
    parked: Mutex<Vec<Thread>>,
}

impl Interrupt {
    /// A new interrupt that has not been triggered.
    pub fn new() -> Self {
        Self::default()
    }

    /// Stops every wait that uses this interrupt, now and later.
    pub fn trigger(&self) {
        self.inner.triggered.store(true, Ordering::SeqCst);
        for thread in self.inner.parked.lock().iter() {
            thread.unpark();
        }
    }

    /// Whether [`trigger`](Self::trigger) was called.
    pub fn is_triggered(&self) -> bool {
        self.inner.triggered.load(Ordering::SeqCst)
    }

    /// Registers the calling thread to be unparked by `trigger` until the
    /// returned registration is dropped.
    pub(crate) fn register(&self) -> Registration<'_> {
        self.inner.parked.lock().push(thread::current());
        Registration {
            interrupt: self,
            thread: thread::current().id(),
        }
    }
}

impl fmt::Debug for Interrupt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Interrupt")
            .field("triggered", &self.is_triggered())
            .finish()
    }
}

/// Keeps the current thread registered with an [`Interrupt`] while it parks.
pub(crate) struct Registration<'a> {
    interrupt: &'a Interrupt,
    thread: ThreadId,
}

impl Drop for Registration<'_> {
    fn drop(&mut self) {
        let mut parked = self.interrupt.inner.parked.lock();
        if let Some(pos) = parked.iter().position(|t| t.id() == self.thread) {
            parked.swap_remove(pos);
        }
    }
}

/// Sleeps for `duration` unless `interrupt` is triggered first; returns
/// whether it was.
pub(crate) fn sleep(duration: std::time::Duration, interrupt: Option<&Interrupt>) -> bool {
    // A sleep too long to represent has no end but the interrupt.
    let deadline = std::time::Instant::now().checked_add(duration);
    let _registered = interrupt.map(Interrupt::register);
    loop {
        if interrupt.is_some_and(Interrupt::is_triggered) {
            return true;
        }
        match deadline {
            Some(deadline) => {
                let now = std::time::Instant::now();
                if now >= deadline {
                    return false;
                }
                thread::park_timeout(deadline - now);
            }
            None => thread::park(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_endless_sleep_ends_when_interrupted() {
        let interrupt = Interrupt::new();
        let trigger = interrupt.clone();
        let waker = thread::spawn(move || {
            thread::sleep(std::time::Duration::from_millis(20));
            trigger.trigger();
        });
        assert!(sleep(std::time::Duration::MAX, Some(&interrupt)));
        waker.join().unwrap();
    }

    #[test]
    fn trigger_is_seen_by_clones() {
        let a = Interrupt::new();
        let b = a.clone();
        assert!(!b.is_triggered());
        a.trigger();
        assert!(b.is_triggered());
    }

    #[test]
    fn trigger_unparks_a_registered_thread() {
        let stop = Interrupt::new();
        let waiter = {
            let stop = stop.clone();
            thread::spawn(move || {
                let _registered = stop.register();
                while !stop.is_triggered() {
                    thread::park();
                }
            })
        };
        thread::sleep(std::time::Duration::from_millis(20));
        stop.trigger();
        waiter.join().unwrap();
        assert!(stop.inner.parked.lock().is_empty());
    }
}
