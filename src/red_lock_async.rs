//! The async forms of a [`RedLock`]'s acquires: the same rounds as a
//! thread's (`red_lock.rs`), each server tried with its own async acquire
//! and the random pause between rounds on the client's timer, so that
//! nothing blocks the executor. The guard is a [`RedLockGuard<Owner>`]:
//! `Send`; its drop queues each server's release on the client's threads.
//!
//! Cancel-safe: dropped at any point, the future drops the servers' guards
//! taken so far (their releases are queued) and the acquire in flight
//! (which ends on the client's threads, giving back what it took).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::guard::LockGuard;
use crate::holding::Holding;
use crate::kind::Reentrant;
use crate::lock::Lock;
use crate::names;
use crate::owner::Owner;
use crate::red_lock::{random_below, RedLock, MAX_RETRY_PAUSE};
use crate::red_lock_guard::{release_unsure, RedLockGuard};
use crate::tasks::sleep::Sleep;

/// An async RedLock acquire, boxed.
type Acquiring = Pin<Box<dyn Future<Output = Result<Option<RedLockGuard<Owner>>>> + Send>>;

/// An async RedLock acquire that ends only with a majority:
/// [`RedLock::lock_async`], [`RedLock::lock_with_lease_async`].
#[must_use = "futures do nothing unless `.await`ed or polled"]
pub struct RedLockFuture {
    acquiring: Acquiring,
}

/// An async RedLock acquire that may end without a majority:
/// [`RedLock::try_lock_async`], [`RedLock::try_lock_for_async`],
/// [`RedLock::try_lock_for_with_lease_async`].
#[must_use = "futures do nothing unless `.await`ed or polled"]
pub struct TryRedLockFuture {
    acquiring: Acquiring,
}

impl std::fmt::Debug for RedLockFuture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedLockFuture").finish_non_exhaustive()
    }
}

impl std::fmt::Debug for TryRedLockFuture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TryRedLockFuture").finish_non_exhaustive()
    }
}

impl Future for RedLockFuture {
    type Output = Result<RedLockGuard<Owner>>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.acquiring.as_mut().poll(cx).map(|outcome| {
            outcome.map(|guard| match guard {
                Some(guard) => guard,
                None => unreachable!("an unbounded wait ended without the lock"),
            })
        })
    }
}

impl Future for TryRedLockFuture {
    type Output = Result<Option<RedLockGuard<Owner>>>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.acquiring.as_mut().poll(cx)
    }
}

impl<H: Holding> RedLock<H> {
    fn acquiring(&self, lease: Option<Duration>, wait: Option<Duration>) -> Acquiring {
        let owner = self.holder().async_owner();
        let locks: Vec<Lock<Reentrant, Owner>> = self
            .locks()
            .iter()
            .map(|lock| lock.for_owner(owner))
            .collect();
        Box::pin(acquire(locks, lease, wait))
    }

    /// Waits until a majority is held, without blocking the task's
    /// executor: the async form of [`lock`](Self::lock). The per-server
    /// locks are held by this RedLock's owner ([`for_owner`](Self::for_owner)),
    /// or by a new owner each call from a thread's RedLock. Cancel-safe.
    ///
    /// # Errors
    ///
    /// As [`lock`](Self::lock).
    pub fn lock_async(&self) -> RedLockFuture {
        RedLockFuture {
            acquiring: self.acquiring(None, None),
        }
    }

    /// The async form of [`lock_with_lease`](Self::lock_with_lease).
    ///
    /// # Errors
    ///
    /// As [`lock_with_lease`](Self::lock_with_lease).
    pub fn lock_with_lease_async(&self, lease: Duration) -> RedLockFuture {
        RedLockFuture {
            acquiring: self.acquiring(Some(lease), None),
        }
    }

    /// The async form of [`try_lock`](Self::try_lock).
    ///
    /// # Errors
    ///
    /// As [`try_lock`](Self::try_lock).
    pub fn try_lock_async(&self) -> TryRedLockFuture {
        TryRedLockFuture {
            acquiring: self.acquiring(None, Some(Duration::ZERO)),
        }
    }

    /// The async form of [`try_lock_for`](Self::try_lock_for).
    ///
    /// # Errors
    ///
    /// As [`try_lock_for`](Self::try_lock_for).
    pub fn try_lock_for_async(&self, wait: Duration) -> TryRedLockFuture {
        TryRedLockFuture {
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
    ) -> TryRedLockFuture {
        TryRedLockFuture {
            acquiring: self.acquiring(Some(lease), Some(wait)),
        }
    }
}

/// `RedLock::acquire`'s rounds, awaiting each server's acquire and the
/// pause between rounds.
async fn acquire(
    locks: Vec<Lock<Reentrant, Owner>>,
    lease: Option<Duration>,
    wait: Option<Duration>,
) -> Result<Option<RedLockGuard<Owner>>> {
    let Some(first) = locks.first() else {
        return Err(Error::InvalidArgument {
            what: "lock list",
            reason: "a RedLock needs at least one lock".into(),
        });
    };
    for lock in &locks {
        names::validate(lock.name())?;
    }
    let engine = Arc::clone(first.client().engine());
    let quorum = locks.len() / 2 + 1;
    let ttl = lease.unwrap_or_else(|| {
        locks
            .iter()
            .map(|l| l.client().watchdog_timeout())
            .min()
            .unwrap_or_default()
    });
    let drift = ttl / 100 + Duration::from_millis(2);
    let deadline = wait.and_then(|w| Instant::now().checked_add(w));
    loop {
        let started = Instant::now();
        if let Some((guards, unsure)) = round(&locks, quorum, lease).await? {
            let guard = RedLockGuard {
                guards,
                unsure,
                quorum,
                lease,
                started,
                drift,
                queued_drop: true,
            };
            let spent = started.elapsed();
            if ttl > spent + drift {
                return Ok(Some(guard));
            }
            log::debug!("redhold RedLock: majority reached too late ({spent:?} of {ttl:?})");
            drop(guard);
        }
        let now = Instant::now();
        let pause = match deadline {
            Some(d) if now >= d => return Ok(None),
            Some(d) => random_below(MAX_RETRY_PAUSE).min(d - now),
            None => random_below(MAX_RETRY_PAUSE),
        };
        Sleep::new(engine.tasks(), pause).await;
    }
}

/// The guards of the servers that granted the lock, and the servers whose
/// reply was lost.
type Taken = (
    Vec<LockGuard<Reentrant, Owner>>,
    Vec<Lock<Reentrant, Owner>>,
);

/// One round: every server tried once without waiting (`RedLock::round`).
async fn round(
    locks: &[Lock<Reentrant, Owner>],
    quorum: usize,
    lease: Option<Duration>,
) -> Result<Option<Taken>> {
    let mut guards = Vec::with_capacity(locks.len());
    let mut unsure = Vec::new();
    let mut refused = 0;
    let mut hopeless = (0, None);
    for lock in locks {
        match lock.acquire_async(lease, Some(Duration::ZERO)).await {
            Ok(Some(guard)) => guards.push(guard),
            Ok(None) => refused += 1,
            Err(e @ (Error::InvalidArgument { .. } | Error::InvalidName { .. })) => {
                give_back(guards, unsure);
                return Err(e);
            }
            Err(e @ (Error::Shutdown | Error::ForkedProcess { .. } | Error::WrongKind { .. })) => {
                refused += 1;
                hopeless.0 += 1;
                hopeless.1.get_or_insert(e);
            }
            Err(e) => {
                log::debug!(
                    "redhold RedLock: server of {:?} failed: {}",
                    lock.client(),
                    e.report()
                );
                refused += 1;
                unsure.push(lock.clone());
            }
        }
        if locks.len() - refused < quorum {
            break;
        }
    }
    if guards.len() >= quorum {
        return Ok(Some((guards, unsure)));
    }
    give_back(guards, unsure);
    match hopeless {
        (count, Some(e)) if locks.len() - count < quorum => Err(e),
        _ => Ok(None),
    }
}

/// Drops what a round took (each release queued) and releases the servers
/// whose reply was lost on the client's threads.
fn give_back(guards: Vec<LockGuard<Reentrant, Owner>>, unsure: Vec<Lock<Reentrant, Owner>>) {
    drop(guards);
    let Some(first) = unsure.first() else {
        return;
    };
    let engine = Arc::clone(first.client().engine());
    let _ = engine
        .tasks()
        .spawn(Box::new(move || release_unsure(unsure)));
}
