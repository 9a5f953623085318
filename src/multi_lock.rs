//! All-or-nothing locking of several plain locks, on one or many clients.

use std::fmt;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::guard::LockGuard;
use crate::interrupt::Interrupt;
use crate::lock::Lock;

/// Several [`Lock`]s taken together: all of them or none (Redisson's
/// `RedissonMultiLock`). The locks may live on different clients and servers.
///
/// When one lock of the set is busy, every lock taken so far is released
/// before waiting, so two threads locking overlapping sets in different
/// orders cannot deadlock. The waiting thread then waits on the busy lock
/// (woken by its release message) and starts again from there. A lock
/// whose server is unreachable is treated the same way: the set is
/// released and the call waits that outage out on that lock (see
/// [`ClientBuilder::outage_tolerance`](crate::ClientBuilder::outage_tolerance)),
/// whichever lock of the set it is.
///
/// ```no_run
/// # fn main() -> redhold::Result<()> {
/// let client = redhold::Client::open("redis://127.0.0.1:6379/")?;
/// let transfer = redhold::MultiLock::new(vec![
///     client.lock("account:1"),
///     client.lock("account:2"),
/// ]);
/// let _both = transfer.lock()?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct MultiLock {
    locks: Vec<Lock>,
}

/// Holds every lock of a [`MultiLock`]; dropping it releases them all.
///
/// Like [`LockGuard`], it belongs to the thread that took the locks.
#[must_use = "if unused the locks will immediately unlock"]
pub struct MultiLockGuard {
    guards: Vec<LockGuard>,
}

impl MultiLock {
    /// A multi-lock over `locks`, taken in the given order. An empty list
    /// is reported by the first call that locks ([`Error::InvalidArgument`]).
    pub fn new(locks: Vec<Lock>) -> Self {
        MultiLock { locks }
    }

    /// The locks of the set.
    pub fn locks(&self) -> &[Lock] {
        &self.locks
    }

    /// Waits until every lock is held; the watchdog renews them.
    ///
    /// # Errors
    ///
    /// As [`Lock::lock`]; nothing stays locked after an error.
    pub fn lock(&self) -> Result<MultiLockGuard> {
        self.acquire(None, None, None).map(expect_held)
    }

    /// Waits until every lock is held, each for at most `lease`.
    ///
    /// # Errors
    ///
    /// As [`Lock::lock_with_lease`]; nothing stays locked after an error.
    pub fn lock_with_lease(&self, lease: Duration) -> Result<MultiLockGuard> {
        self.acquire(Some(lease), None, None).map(expect_held)
    }

    /// Waits until every lock is held, or `interrupt` is triggered.
    ///
    /// # Errors
    ///
    /// As [`Lock::lock_interruptibly`]; nothing stays locked after an error.
    pub fn lock_interruptibly(&self, interrupt: &Interrupt) -> Result<MultiLockGuard> {
        self.acquire(None, None, Some(interrupt)).map(expect_held)
    }

    /// Takes every lock if all are free now; `Ok(None)` otherwise, with
    /// nothing left locked.
    ///
    /// # Errors
    ///
    /// As [`Lock::try_lock`].
    pub fn try_lock(&self) -> Result<Option<MultiLockGuard>> {
        self.acquire(None, Some(Duration::ZERO), None)
    }

    /// Waits at most `wait`, in total, for every lock.
    ///
    /// # Errors
    ///
    /// As [`Lock::try_lock_for`].
    pub fn try_lock_for(&self, wait: Duration) -> Result<Option<MultiLockGuard>> {
        self.acquire(None, Some(wait), None)
    }

    /// Waits at most `wait`, in total, for every lock, each held for at most
    /// `lease`.
    ///
    /// # Errors
    ///
    /// As [`Lock::try_lock_for_with_lease`].
    pub fn try_lock_for_with_lease(
        &self,
        wait: Duration,
        lease: Duration,
    ) -> Result<Option<MultiLockGuard>> {
        self.acquire(Some(lease), Some(wait), None)
    }

    /// Deletes every lock of the set whoever holds it; returns whether any
    /// existed.
    ///
    /// # Errors
    ///
    /// The first error of [`Lock::force_unlock`]; the other locks are still
    /// deleted.
    pub fn force_unlock(&self) -> Result<bool> {
        let mut any = false;
        let mut first_error = None;
        for lock in &self.locks {
            match lock.force_unlock() {
                Ok(deleted) => any |= deleted,
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        first_error.map_or(Ok(any), Err)
    }

    fn acquire(
        &self,
        lease: Option<Duration>,
        wait: Option<Duration>,
        interrupt: Option<&Interrupt>,
    ) -> Result<Option<MultiLockGuard>> {
        if self.locks.is_empty() {
            return Err(Error::InvalidArgument {
                what: "lock list",
                reason: "a multi-lock needs at least one lock".into(),
            });
        }
        let deadline = wait.and_then(|w| Instant::now().checked_add(w));
        // The lock to wait for first: the one found busy in the last round.
        let mut first = 0;
        loop {
            let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
            let Some(head) = self.locks[first].acquire(lease, left, interrupt)? else {
                return Ok(None);
            };
            let mut guards = Vec::with_capacity(self.locks.len());
            guards.push(head);
            let mut busy = None;
            // Why the busy lock could not be had, when its server is away.
            let mut away = None;
            for (i, lock) in self.locks.iter().enumerate() {
                if i == first {
                    continue;
                }
                // On error `?` drops the guards taken so far: released.
                match lock.acquire(lease, Some(Duration::ZERO), None) {
                    Ok(Some(guard)) => guards.push(guard),
                    Ok(None) => {
                        busy = Some(i);
                        break;
                    }
                    // Its server is away (down, stalled, failing over):
                    // wait that out on this lock, as on the first one,
                    // instead of failing the whole set. Its try settled
                    // whatever it may have taken (`engine/attempt.rs`); a
                    // late one is re-entered and given back by the wait.
                    Err(e) if e.is_connection_error() => {
                        busy = Some(i);
                        away = Some(e);
                        break;
                    }
                    Err(e) => return Err(e),
                }
            }
            let Some(busy) = busy else {
                return Ok(Some(MultiLockGuard { guards }));
            };
            // Release everything before waiting, so that nobody waits for
            // locks we hold while we wait for theirs.
            let _ = release_all(guards);
            if deadline.is_some_and(|d| Instant::now() >= d) {
                // Out of time while a server was away: its state is
                // unknown, so an error, as a single lock's wait reports.
                return away.map_or(Ok(None), Err);
            }
            first = busy;
        }
    }
}

/// An unbounded wait only ends with the locks or an error.
fn expect_held(guard: Option<MultiLockGuard>) -> MultiLockGuard {
    match guard {
        Some(guard) => guard,
        None => unreachable!("an unbounded wait ended without the locks"),
    }
}

/// Releases every guard, returning the first error after trying them all.
pub(crate) fn release_all(guards: Vec<LockGuard>) -> Result<()> {
    let mut first_error = None;
    for guard in guards {
        if let Err(e) = guard.unlock() {
            first_error.get_or_insert(e);
        }
    }
    first_error.map_or(Ok(()), Err)
}

impl MultiLockGuard {
    /// Whether every lock is still believed held (no I/O); see
    /// [`LockGuard::is_held`].
    pub fn is_held(&self) -> bool {
        self.guards.iter().all(LockGuard::is_held)
    }

    /// The guards of the individual locks, in the multi-lock's order of
    /// acquisition.
    pub fn guards(&self) -> &[LockGuard] {
        &self.guards
    }

    /// Releases every lock and reports the first failure, after trying all.
    ///
    /// # Errors
    ///
    /// As [`LockGuard::unlock`].
    pub fn unlock(self) -> Result<()> {
        release_all(self.guards)
    }
}

impl fmt::Debug for MultiLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MultiLock")
            .field("locks", &self.locks)
            .finish()
    }
}

impl fmt::Debug for MultiLockGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MultiLockGuard")
            .field("guards", &self.guards)
            .finish()
    }
}
