//! A blocking call run on the client's I/O pool for an async caller (an
//! `unlock`, a release): its future only polls the outcome.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use super::completion::Completion;
use super::Tasks;
use crate::error::Result;

/// The outcome of a call that runs on the client's threads.
#[derive(Debug)]
pub(crate) struct Offloaded<T> {
    done: Arc<Completion<Result<T>>>,
}

impl<T: Send + 'static> Offloaded<T> {
    /// Runs `call` on `tasks`' pool; a pool that is shut down makes the
    /// outcome [`Error::Shutdown`].
    pub(crate) fn spawn(tasks: &Tasks, call: impl FnOnce() -> Result<T> + Send + 'static) -> Self {
        let done = Arc::new(Completion::default());
        let slot = Arc::clone(&done);
        let queued = tasks.spawn(Box::new(move || {
            // Dropped by the caller meanwhile: the call still ran (an
            // unlock is not undone by losing interest in its outcome).
            let _ = slot.complete(call());
        }));
        if let Err(e) = queued {
            let _ = done.complete(Err(e));
        }
        Offloaded { done }
    }
}

impl<T: Send + 'static> Offloaded<T> {
    /// Runs `call` on a thread of its own, named `name` (a call that ends
    /// the I/O pool itself: the client's shutdown).
    pub(crate) fn on_thread(name: &str, call: impl FnOnce() -> Result<T> + Send + 'static) -> Self {
        let done = Arc::new(Completion::default());
        let slot = Arc::clone(&done);
        let spawned = std::thread::Builder::new()
            .name(name.to_owned())
            .spawn(move || {
                let _ = slot.complete(call());
            });
        if let Err(source) = spawned {
            let _ = done.complete(Err(crate::error::Error::Spawn {
                thread: "redhold-shutdown",
                source,
            }));
        }
        Offloaded { done }
    }
}

impl<T> Offloaded<T> {
    /// An outcome known at once.
    pub(crate) fn done(outcome: Result<T>) -> Self {
        let done = Arc::new(Completion::default());
        let _ = done.complete(outcome);
        Offloaded { done }
    }
}

impl<T> Future for Offloaded<T> {
    type Output = Result<T>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<T>> {
        self.done.poll(cx)
    }
}

impl<T> Drop for Offloaded<T> {
    fn drop(&mut self) {
        self.done.abandon();
    }
}
