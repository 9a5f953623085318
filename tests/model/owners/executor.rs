//! The smallest executor that will do: futures polled by hand on the
//! thread that owns them, woken by a waker that unparks that thread. The
//! checker needs no runtime (and the library has none): what it needs is
//! to choose, poll by poll, when a future is polled and when it is dropped.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::thread::{self, Thread};
use std::time::{Duration, Instant};

/// Unparks the executor's thread and says that something was woken.
#[derive(Debug)]
struct Unpark {
    thread: Thread,
    woken: AtomicBool,
}

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.store(true, Ordering::SeqCst);
        self.thread.unpark();
    }
}

/// Polls futures on the calling thread; one waker serves them all (the
/// thread polls every pending future when woken).
#[derive(Debug)]
pub(crate) struct Executor {
    unpark: Arc<Unpark>,
    waker: Waker,
}

impl Executor {
    /// An executor for the calling thread.
    pub(crate) fn new() -> Executor {
        let unpark = Arc::new(Unpark {
            thread: thread::current(),
            woken: AtomicBool::new(false),
        });
        Executor {
            waker: Waker::from(Arc::clone(&unpark)),
            unpark,
        }
    }

    /// Polls `future` once.
    pub(crate) fn poll<F: Future + ?Sized>(&self, future: Pin<&mut F>) -> Poll<F::Output> {
        let mut cx = Context::from_waker(&self.waker);
        future.poll(&mut cx)
    }

    /// Parks until a future is woken or `until` comes; whether one was
    /// woken.
    pub(crate) fn park_until(&self, until: Instant) -> bool {
        loop {
            if self.unpark.woken.swap(false, Ordering::SeqCst) {
                return true;
            }
            let now = Instant::now();
            if now >= until {
                return false;
            }
            thread::park_timeout(until - now);
        }
    }

    /// Polls `future` until it is ready, at most `limit`; `None` (and the
    /// future dropped) when it was not ready by then.
    pub(crate) fn block_on<F: Future>(&self, future: F, limit: Duration) -> Option<F::Output> {
        let deadline = Instant::now() + limit;
        let mut future = std::pin::pin!(future);
        loop {
            if let Poll::Ready(output) = self.poll(future.as_mut()) {
                return Some(output);
            }
            if !self.park_until(deadline) && Instant::now() >= deadline {
                return None;
            }
        }
    }
}
