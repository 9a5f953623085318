//! A pause for an async call that is not a wait for Redis (a RedLock's
//! random pause between rounds): the client's timer ends it, so that no
//! executor's timer is needed.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use super::completion::Completion;
use super::Tasks;

/// Resolves once `pause` has passed.
#[derive(Debug)]
pub(crate) struct Sleep {
    done: Arc<Completion<()>>,
}

impl Sleep {
    /// A pause of `pause` on `tasks`' timer (over at once when the timer is
    /// shut down: the call then fails on its next request anyway).
    pub(crate) fn new(tasks: &Tasks, pause: Duration) -> Sleep {
        let done = Arc::new(Completion::default());
        let slot = Arc::clone(&done);
        let until = crate::config::deadline_after(Instant::now(), pause);
        if tasks
            .timers()
            .at(
                until,
                Box::new(move || {
                    let _ = slot.complete(());
                }),
            )
            .is_err()
        {
            let _ = done.complete(());
        }
        Sleep { done }
    }
}

impl Future for Sleep {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        self.done.poll(cx)
    }
}
