//! Where an async call's outcome meets its future: the client's threads
//! complete it, the future polls it. A future dropped before it took the
//! outcome leaves it to whoever completes (or has completed) it, who then
//! undoes what it stands for (a hold is released, nothing stays taken).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::task::{Context, Poll, Waker};

use parking_lot::Mutex;

/// One outcome of type `T`, handed from the client's threads to a future.
#[derive(Debug)]
pub(crate) struct Completion<T> {
    slot: Mutex<Slot<T>>,
}

#[derive(Debug)]
enum Slot<T> {
    /// Not complete; the waker of the last poll, if any.
    Waiting(Option<Waker>),
    Ready(T),
    /// The future took the outcome.
    Taken,
    /// The future is gone.
    Abandoned,
}

impl<T> Default for Completion<T> {
    fn default() -> Self {
        Completion {
            slot: Mutex::new(Slot::Waiting(None)),
        }
    }
}

impl<T> Completion<T> {
    /// Completes with `value` and wakes the future; gives `value` back when
    /// the future is gone (the caller undoes it).
    pub(crate) fn complete(&self, value: T) -> Result<(), T> {
        let waker = {
            let mut slot = self.slot.lock();
            match std::mem::replace(&mut *slot, Slot::Taken) {
                Slot::Waiting(waker) => {
                    *slot = Slot::Ready(value);
                    waker
                }
                other => {
                    *slot = other;
                    return Err(value);
                }
            }
        };
        if let Some(waker) = waker {
            wake(waker);
        }
        Ok(())
    }

    /// Whether the future is gone (nobody will take an outcome).
    pub(crate) fn is_abandoned(&self) -> bool {
        matches!(*self.slot.lock(), Slot::Abandoned)
    }

    /// The outcome once complete; otherwise keeps the context's waker.
    pub(crate) fn poll(&self, cx: &mut Context<'_>) -> Poll<T> {
        let mut slot = self.slot.lock();
        match std::mem::replace(&mut *slot, Slot::Taken) {
            Slot::Ready(value) => Poll::Ready(value),
            Slot::Waiting(waker) => {
                let waker = match waker {
                    Some(waker) if waker.will_wake(cx.waker()) => waker,
                    _ => cx.waker().clone(),
                };
                *slot = Slot::Waiting(Some(waker));
                Poll::Pending
            }
            // Polled again after it returned: it stays pending.
            other => {
                *slot = other;
                Poll::Pending
            }
        }
    }

    /// The future is dropped: returns an outcome it never took, for the
    /// caller to undo; from now on [`complete`](Self::complete) gives its
    /// value back.
    pub(crate) fn abandon(&self) -> Option<T> {
        match std::mem::replace(&mut *self.slot.lock(), Slot::Abandoned) {
            Slot::Ready(value) => Some(value),
            _ => None,
        }
    }
}

/// Wakes `waker`; a waker that panics does not take the client's thread
/// with it.
pub(crate) fn wake(waker: Waker) {
    if catch_unwind(AssertUnwindSafe(|| waker.wake())).is_err() {
        log::error!("redhold: a task's waker panicked");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::task::Wake;

    struct Count(AtomicUsize);

    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn an_outcome_reaches_its_future_once_and_an_abandoned_one_comes_back() {
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(Arc::clone(&count));
        let mut cx = Context::from_waker(&waker);
        let done = Completion::default();
        assert!(done.poll(&mut cx).is_pending());
        done.complete(7).unwrap();
        assert_eq!(count.0.load(Ordering::SeqCst), 1);
        assert_eq!(done.poll(&mut cx), Poll::Ready(7));
        assert!(done.poll(&mut cx).is_pending());

        let gone = Completion::default();
        gone.complete(1).unwrap();
        assert_eq!(gone.abandon(), Some(1), "ready but never taken");
        assert_eq!(gone.complete(2), Err(2));
        let early = Completion::<u8>::default();
        assert_eq!(early.abandon(), None);
        assert!(early.is_abandoned());
    }
}
