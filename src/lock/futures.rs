//! The async forms of a lock's acquires and `unlock`: named futures,
//! `Send + 'static`, that any executor (or a plain `block_on`) drives.
//! Their Redis calls run on the client's own threads and their waits are
//! entries in the client's waiter registry and timer
//! (`engine/async_acquire.rs`): polling one never blocks and never does
//! I/O.
//!
//! # Cancel safety
//!
//! Dropping an acquire's future at any point leaves nothing behind: not
//! yet started, it sends nothing; with a request in flight, the request's
//! outcome is settled on the client's threads as for a thread's call that
//! failed (a hold it took is given back, the undo behind a late request
//! still follows it); parked, it leaves the line and passes on a wake-up
//! it was handed; reserved for a direct hand-over, it waits for the
//! hand-over's outcome on the client's threads and gives back the lock
//! if it was handed; done but not polled, the hold is given back.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use super::Lock;
use crate::engine::AsyncAcquire;
use crate::error::{Error, Result};
use crate::guard::{Held, LockGuard, OwnerGuard};
use crate::holding::Holding;
use crate::kind::{LockKind, Reentrant};
use crate::owner::Owner;
use crate::tasks::offloaded::Offloaded;

/// An async acquire that ends only with the lock (or an error):
/// [`Lock::lock_async`], [`Lock::lock_with_lease_async`]. Resolves to the
/// [`OwnerGuard`] of the hold. Cancel-safe (see [`Lock::lock_async`]).
#[must_use = "futures do nothing unless `.await`ed or polled"]
#[derive(Debug)]
pub struct LockFuture<K: LockKind = Reentrant> {
    acquiring: Acquiring<K>,
}

/// An async acquire that may end without the lock: [`Lock::try_lock_async`],
/// [`Lock::try_lock_for_async`], [`Lock::try_lock_for_with_lease_async`].
/// Resolves to the [`OwnerGuard`] of the hold, or `None`. Cancel-safe
/// (see [`Lock::lock_async`]).
#[must_use = "futures do nothing unless `.await`ed or polled"]
#[derive(Debug)]
pub struct TryLockFuture<K: LockKind = Reentrant> {
    acquiring: Acquiring<K>,
}

/// An async call that runs on the client's threads and reports how it
/// went: [`Lock::unlock_async`], [`LockGuard::unlock_async`],
/// [`Client::shutdown_async`](crate::Client::shutdown_async). Dropping it
/// does not stop the call.
#[must_use = "futures do nothing unless `.await`ed or polled"]
#[derive(Debug)]
pub struct UnlockFuture {
    call: Offloaded<()>,
}

impl UnlockFuture {
    pub(crate) fn new(call: Offloaded<()>) -> Self {
        UnlockFuture { call }
    }
}

impl Future for UnlockFuture {
    type Output = Result<()>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<()>> {
        Pin::new(&mut self.call).poll(cx)
    }
}

/// One async acquire call for an owner, or the error that kept it from
/// starting.
#[derive(Debug)]
struct Acquiring<K: LockKind> {
    lock: Lock<K, Owner>,
    call: std::result::Result<Arc<AsyncAcquire<K>>, Option<Error>>,
    /// The outcome was handed to the caller: nothing to cancel.
    finished: bool,
}

impl<K: LockKind> Acquiring<K> {
    fn start<H: Holding>(
        lock: &Lock<K, H>,
        lease: Option<Duration>,
        wait: Option<Duration>,
    ) -> Self {
        let owner = lock.holder.async_owner();
        let lock = lock.for_owner(owner);
        let call = lock
            .client
            .engine()
            .acquire_async(
                Arc::clone(&lock.keys.name),
                lock.keys.kind.clone(),
                crate::holding::Holder::Owner(owner),
                lease,
                wait,
            )
            .map_err(Some);
        Acquiring {
            lock,
            call,
            finished: false,
        }
    }

    fn poll(&mut self, cx: &mut Context<'_>) -> Poll<Result<Option<OwnerGuard<K>>>> {
        let outcome = match &mut self.call {
            Ok(call) => match call.poll(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(outcome) => outcome,
            },
            Err(error) => Err(error.take().unwrap_or(Error::Shutdown)),
        };
        self.finished = true;
        Poll::Ready(outcome.map(|held| {
            held.map(|(hold, grant)| {
                LockGuard::new(Held::taken_async(self.lock.clone(), hold, grant))
            })
        }))
    }
}

impl<K: LockKind> Drop for Acquiring<K> {
    fn drop(&mut self) {
        if let (Ok(call), false) = (&self.call, self.finished) {
            call.cancel();
        }
    }
}

impl<K: LockKind> Future for LockFuture<K> {
    type Output = Result<OwnerGuard<K>>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.acquiring.poll(cx).map(|outcome| {
            outcome.map(|held| match held {
                Some(guard) => guard,
                // Only a bounded wait ends without the lock.
                None => unreachable!("an unbounded wait ended without the lock"),
            })
        })
    }
}

impl<K: LockKind> Future for TryLockFuture<K> {
    type Output = Result<Option<OwnerGuard<K>>>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.acquiring.poll(cx)
    }
}

impl<K: LockKind, H: Holding> Lock<K, H> {
    /// An async acquire waiting at most `wait` (forever when `None`).
    pub(crate) fn acquire_async(
        &self,
        lease: Option<Duration>,
        wait: Option<Duration>,
    ) -> TryLockFuture<K> {
        TryLockFuture {
            acquiring: Acquiring::start(self, lease, wait),
        }
    }

    /// Takes the lock, however long that takes, without blocking the
    /// calling task's executor: the async form of [`lock`](Self::lock).
    /// Renewed by the watchdog until the guard drops.
    ///
    /// The hold belongs to an [`Owner`]: this handle's owner (a
    /// [`for_owner`](Self::for_owner) handle: reentrant for it), or, from
    /// a thread's handle, a new owner each call (not reentrant, as
    /// `tokio::sync::Mutex`). The guard is an [`OwnerGuard`]: it may be
    /// held across `.await`s and moved between threads; dropping it queues
    /// the release on the client's threads and returns at once.
    ///
    /// Every Redis call runs on the client's threads
    /// ([`ClientBuilder::async_threads`](crate::ClientBuilder::async_threads));
    /// a waiting call costs no thread: it is woken by the client's
    /// subscriber like a parked thread, and may be handed the lock
    /// directly by a release of the same client. It works on any executor.
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe at every point: dropping the future leaves no hold, no
    /// queue entry and no read-hold key behind (see the module's docs on
    /// the futures). Dropping it is also how to stop waiting: there is no
    /// async `lock_interruptibly`.
    ///
    /// # Errors
    ///
    /// As [`lock`](Self::lock).
    pub fn lock_async(&self) -> LockFuture<K> {
        LockFuture {
            acquiring: Acquiring::start(self, None, None),
        }
    }

    /// [`lock_async`](Self::lock_async) with a lease, as
    /// [`lock_with_lease`](Self::lock_with_lease).
    ///
    /// # Errors
    ///
    /// As [`lock_with_lease`](Self::lock_with_lease).
    pub fn lock_with_lease_async(&self, lease: Duration) -> LockFuture<K> {
        LockFuture {
            acquiring: Acquiring::start(self, Some(lease), None),
        }
    }

    /// Takes the lock if it is free now (or held by this handle's owner):
    /// the async form of [`try_lock`](Self::try_lock), one attempt. See
    /// [`lock_async`](Self::lock_async) for the owner and the guard.
    ///
    /// # Errors
    ///
    /// As [`try_lock`](Self::try_lock).
    pub fn try_lock_async(&self) -> TryLockFuture<K> {
        TryLockFuture {
            acquiring: Acquiring::start(self, None, Some(Duration::ZERO)),
        }
    }

    /// Waits at most `wait` for the lock: the async form of
    /// [`try_lock_for`](Self::try_lock_for). See
    /// [`lock_async`](Self::lock_async) for the owner and the guard.
    ///
    /// # Errors
    ///
    /// As [`try_lock_for`](Self::try_lock_for).
    pub fn try_lock_for_async(&self, wait: Duration) -> TryLockFuture<K> {
        TryLockFuture {
            acquiring: Acquiring::start(self, None, Some(wait)),
        }
    }

    /// [`try_lock_for_async`](Self::try_lock_for_async) with a lease, as
    /// [`try_lock_for_with_lease`](Self::try_lock_for_with_lease).
    ///
    /// # Errors
    ///
    /// As [`try_lock_for_with_lease`](Self::try_lock_for_with_lease).
    pub fn try_lock_for_with_lease_async(
        &self,
        wait: Duration,
        lease: Duration,
    ) -> TryLockFuture<K> {
        TryLockFuture {
            acquiring: Acquiring::start(self, Some(lease), Some(wait)),
        }
    }
}

impl<K: LockKind> Lock<K, Owner> {
    /// Releases one leaked hold of the owner: the async form of
    /// [`unlock`](Self::unlock), run on the client's threads.
    ///
    /// # Errors
    ///
    /// As [`unlock`](Self::unlock).
    pub fn unlock_async(&self) -> UnlockFuture {
        let lock = self.clone();
        UnlockFuture::new(Offloaded::spawn(self.client.engine().tasks(), move || {
            lock.unlock()
        }))
    }
}

impl<K: LockKind> LockGuard<K, Owner> {
    /// Releases the hold on the client's threads and reports how it went:
    /// the async form of [`unlock`](LockGuard::unlock).
    ///
    /// # Errors
    ///
    /// As [`unlock`](LockGuard::unlock).
    pub fn unlock_async(self) -> UnlockFuture {
        let engine = Arc::clone(self.lock().client().engine());
        UnlockFuture::new(Offloaded::spawn(engine.tasks(), move || self.unlock()))
    }
}
