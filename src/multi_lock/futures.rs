//! The async forms of a [`MultiLock`]'s acquires: the same all-or-nothing
//! rounds as a thread's (`multi_lock.rs`), each member taken with its own
//! async acquire, so that nothing blocks the executor. The guard is a
//! [`MultiLockGuard<Owner>`]: `Send`, each member released on the
//! client's threads when it drops.
//!
//! Cancel-safe: dropped at any point, the future drops the members taken
//! so far (their releases are queued) and the member acquire in flight
//! (which ends on the client's threads, giving back what it took).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use super::{MemberGuard, MultiLock, MultiLockGuard, MultiMember};
use crate::error::{Error, Result};
use crate::holding::Holding;
use crate::owner::Owner;

/// An async multi-lock acquire, boxed: the members' futures are of many kinds.
type Acquiring = Pin<Box<dyn Future<Output = Result<Option<MultiLockGuard<Owner>>>> + Send>>;

/// An async multi-lock acquire that ends only with every lock:
/// [`MultiLock::lock_async`], [`MultiLock::lock_with_lease_async`].
#[must_use = "futures do nothing unless `.await`ed or polled"]
pub struct MultiLockFuture {
    acquiring: Acquiring,
}

/// An async multi-lock acquire that may end without the locks:
/// [`MultiLock::try_lock_async`], [`MultiLock::try_lock_for_async`],
/// [`MultiLock::try_lock_for_with_lease_async`].
#[must_use = "futures do nothing unless `.await`ed or polled"]
pub struct TryMultiLockFuture {
    acquiring: Acquiring,
}

impl std::fmt::Debug for MultiLockFuture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MultiLockFuture").finish_non_exhaustive()
    }
}

impl std::fmt::Debug for TryMultiLockFuture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TryMultiLockFuture").finish_non_exhaustive()
    }
}

impl Future for MultiLockFuture {
    type Output = Result<MultiLockGuard<Owner>>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.acquiring.as_mut().poll(cx).map(|outcome| {
            outcome.map(|guard| match guard {
                Some(guard) => guard,
                None => unreachable!("an unbounded wait ended without the locks"),
            })
        })
    }
}

impl Future for TryMultiLockFuture {
    type Output = Result<Option<MultiLockGuard<Owner>>>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.acquiring.as_mut().poll(cx)
    }
}

impl<H: Holding> MultiLock<H> {
    fn acquiring(&self, lease: Option<Duration>, wait: Option<Duration>) -> Acquiring {
        let members = self.members.clone();
        let owner = self.holder.async_owner();
        Box::pin(acquire(members, owner, lease, wait))
    }

    /// Takes every lock, waiting as long as it takes, without blocking the
    /// task's executor: the async form of [`lock`](Self::lock). The locks
    /// are held by this multi-lock's owner ([`for_owner`](Self::for_owner)),
    /// or by a new owner each call from a thread's multi-lock. Cancel-safe.
    ///
    /// # Errors
    ///
    /// As [`lock`](Self::lock).
    pub fn lock_async(&self) -> MultiLockFuture {
        MultiLockFuture {
            acquiring: self.acquiring(None, None),
        }
    }

    /// The async form of [`lock_with_lease`](Self::lock_with_lease).
    ///
    /// # Errors
    ///
    /// As [`lock_with_lease`](Self::lock_with_lease).
    pub fn lock_with_lease_async(&self, lease: Duration) -> MultiLockFuture {
        MultiLockFuture {
            acquiring: self.acquiring(Some(lease), None),
        }
    }

    /// The async form of [`try_lock`](Self::try_lock).
    ///
    /// # Errors
    ///
    /// As [`try_lock`](Self::try_lock).
    pub fn try_lock_async(&self) -> TryMultiLockFuture {
        TryMultiLockFuture {
            acquiring: self.acquiring(None, Some(Duration::ZERO)),
        }
    }

    /// The async form of [`try_lock_for`](Self::try_lock_for).
    ///
    /// # Errors
    ///
    /// As [`try_lock_for`](Self::try_lock_for).
    pub fn try_lock_for_async(&self, wait: Duration) -> TryMultiLockFuture {
        TryMultiLockFuture {
            acquiring: self.acquiring(None, Some(wait)),
        }
    }

    /// The async form of [`try_lock_for_with_lease`](Self::try_lock_for_with_lease).
    ///
    /// # Errors
    ///
    /// As [`try_lock_for_with_lease`](Self::try_lock_for_with_lease).
    pub fn try_lock_for_with_lease_async(
        &self,
        wait: Duration,
        lease: Duration,
    ) -> TryMultiLockFuture {
        TryMultiLockFuture {
            acquiring: self.acquiring(Some(lease), Some(wait)),
        }
    }
}

/// The rounds of `MultiLock::acquire`, awaiting each member's acquire: the
/// lock found busy last is waited for first, the others are tried; a busy
/// one (or one whose server is away) makes the round drop what it took and
/// wait on that one.
async fn acquire(
    members: Vec<MultiMember>,
    owner: Owner,
    lease: Option<Duration>,
    wait: Option<Duration>,
) -> Result<Option<MultiLockGuard<Owner>>> {
    if members.is_empty() {
        return Err(Error::InvalidArgument {
            what: "lock list",
            reason: "a multi-lock needs at least one lock".into(),
        });
    }
    let deadline = wait.and_then(|w| Instant::now().checked_add(w));
    let mut first = 0;
    loop {
        let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
        let Some(head) = members[first].acquire_async(owner, lease, left).await? else {
            return Ok(None);
        };
        let mut guards = vec![head];
        let mut busy = None;
        let mut away = None;
        for (i, lock) in members.iter().enumerate() {
            if i == first {
                continue;
            }
            match lock.acquire_async(owner, lease, Some(Duration::ZERO)).await {
                Ok(Some(guard)) => guards.push(guard),
                Ok(None) => {
                    busy = Some(i);
                    break;
                }
                Err(e) if e.is_connection_error() => {
                    busy = Some(i);
                    away = Some(e);
                    break;
                }
                Err(e) => {
                    release(guards);
                    return Err(e);
                }
            }
        }
        let Some(busy) = busy else {
            return Ok(Some(MultiLockGuard { guards }));
        };
        // Released before waiting, so that nobody waits for locks we hold
        // while we wait for theirs (queued: a drop never blocks).
        release(guards);
        if deadline.is_some_and(|d| Instant::now() >= d) {
            return away.map_or(Ok(None), Err);
        }
        first = busy;
    }
}

/// Drops `guards`, the last taken first: each queues its release.
fn release(mut guards: Vec<MemberGuard<Owner>>) {
    while let Some(guard) = guards.pop() {
        drop(guard);
    }
}
