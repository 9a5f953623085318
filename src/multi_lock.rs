//! All-or-nothing locking of several locks of any kinds, on one or many
//! clients.

mod futures;
mod member;

use std::fmt;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::guard::LockGuard;
use crate::holding::{Holding, ThisThread};
use crate::interrupt::Interrupt;
use crate::kind::LockKind;
use crate::lock::Lock;
use crate::owner::Owner;

pub use futures::{MultiLockFuture, TryMultiLockFuture};
pub use member::{MemberGuard, MultiMember};

/// Several locks taken together: all of them or none (Redisson's
/// `RedissonMultiLock`). The locks may live on different clients and
/// servers, and be of any kinds: plain, fair, fenced, spin, read or write
/// locks ([`MultiLock::of`], [`MultiLock::with`]). They are released in the
/// reverse order of their acquisition.
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
///
/// // Locks of several kinds: a fair queue, a shared read, a fenced write.
/// let ledger = client.read_write_lock("ledger");
/// use redhold::MultiMember;
/// let mixed = redhold::MultiLock::of([MultiMember::from(client.fair_lock("queue")), ledger.read().into()])
///     .with(client.fenced_lock("journal"));
/// let guard = mixed.try_lock()?;
/// let token = guard.as_ref().and_then(|g| g.guards().iter().find_map(|m| m.token()));
/// # let _ = token;
/// # Ok(()) }
/// ```
///
/// [`for_owner`](Self::for_owner) takes the set for an
/// [`Owner`](crate::Owner) instead of the calling thread; its guard may then
/// move to other threads.
#[derive(Clone)]
pub struct MultiLock<H: Holding = ThisThread> {
    members: Vec<MultiMember>,
    holder: H,
}

/// Holds every lock of a [`MultiLock`]; dropping it releases them all, in
/// the reverse order of their acquisition.
///
/// Like [`LockGuard`], a thread's belongs to the thread that took the locks;
/// an owner's (`H` = [`Owner`](crate::Owner)) may move to other threads.
#[must_use = "if unused the locks will immediately unlock"]
pub struct MultiLockGuard<H: Holding = ThisThread> {
    /// In the order they were taken.
    guards: Vec<MemberGuard<H>>,
}

impl MultiLock {
    /// A multi-lock over plain `locks`, taken in the given order. An empty
    /// list is reported by the first call that locks
    /// ([`Error::InvalidArgument`]).
    pub fn new(locks: Vec<Lock>) -> Self {
        MultiLock::of(locks)
    }

    /// A multi-lock over locks of any kinds (each made a [`MultiMember`]
    /// with `.into()`), taken in the given order.
    pub fn of<I>(locks: I) -> Self
    where
        I: IntoIterator,
        I::Item: Into<MultiMember>,
    {
        MultiLock {
            members: locks.into_iter().map(Into::into).collect(),
            holder: ThisThread,
        }
    }
}

impl<H: Holding> MultiLock<H> {
    /// The same set, taken and released for `owner` instead of the calling
    /// thread (see [`Lock::for_owner`]).
    pub fn for_owner(&self, owner: Owner) -> MultiLock<Owner> {
        MultiLock {
            members: self.members.clone(),
            holder: owner,
        }
    }

    /// The same multi-lock with `lock` (of any kind) added last.
    pub fn with(mut self, lock: impl Into<MultiMember>) -> Self {
        self.members.push(lock.into());
        self
    }

    /// The locks of the set, in their order.
    pub fn members(&self) -> &[MultiMember] {
        &self.members
    }

    /// Waits until every lock is held; the watchdog renews them.
    ///
    /// # Errors
    ///
    /// As [`Lock::lock`]; nothing stays locked after an error.
    pub fn lock(&self) -> Result<MultiLockGuard<H>> {
        self.acquire(None, None, None).map(expect_held)
    }

    /// Waits until every lock is held, each for at most `lease`.
    ///
    /// # Errors
    ///
    /// As [`Lock::lock_with_lease`]; nothing stays locked after an error.
    pub fn lock_with_lease(&self, lease: Duration) -> Result<MultiLockGuard<H>> {
        self.acquire(Some(lease), None, None).map(expect_held)
    }

    /// Waits until every lock is held, or `interrupt` is triggered.
    ///
    /// # Errors
    ///
    /// As [`Lock::lock_interruptibly`]; nothing stays locked after an error.
    pub fn lock_interruptibly(&self, interrupt: &Interrupt) -> Result<MultiLockGuard<H>> {
        self.acquire(None, None, Some(interrupt)).map(expect_held)
    }

    /// Takes every lock if all are free now; `Ok(None)` otherwise, with
    /// nothing left locked.
    ///
    /// # Errors
    ///
    /// As [`Lock::try_lock`].
    pub fn try_lock(&self) -> Result<Option<MultiLockGuard<H>>> {
        self.acquire(None, Some(Duration::ZERO), None)
    }

    /// Waits at most `wait`, in total, for every lock.
    ///
    /// # Errors
    ///
    /// As [`Lock::try_lock_for`].
    pub fn try_lock_for(&self, wait: Duration) -> Result<Option<MultiLockGuard<H>>> {
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
    ) -> Result<Option<MultiLockGuard<H>>> {
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
        for lock in &self.members {
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
    ) -> Result<Option<MultiLockGuard<H>>> {
        if self.members.is_empty() {
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
            let Some(head) = self.members[first].acquire(self.holder, lease, left, interrupt)?
            else {
                return Ok(None);
            };
            let mut guards = Vec::with_capacity(self.members.len());
            guards.push(head);
            let mut busy = None;
            // Why the busy lock could not be had, when its server is away.
            let mut away = None;
            for (i, lock) in self.members.iter().enumerate() {
                if i == first {
                    continue;
                }
                // On error the guards taken so far are released, last first.
                match lock.acquire(self.holder, lease, Some(Duration::ZERO), None) {
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
                    Err(e) => {
                        let _ = release_members(guards);
                        return Err(e);
                    }
                }
            }
            let Some(busy) = busy else {
                return Ok(Some(MultiLockGuard { guards }));
            };
            // Release everything before waiting, so that nobody waits for
            // locks we hold while we wait for theirs.
            let _ = release_members(guards);
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
fn expect_held<H: Holding>(guard: Option<MultiLockGuard<H>>) -> MultiLockGuard<H> {
    match guard {
        Some(guard) => guard,
        None => unreachable!("an unbounded wait ended without the locks"),
    }
}

/// Releases every member's guard, the last taken first, returning the
/// first error after trying them all.
fn release_members<H: Holding>(guards: Vec<MemberGuard<H>>) -> Result<()> {
    first_error(guards.into_iter().rev().map(MemberGuard::unlock))
}

/// Releases every guard, returning the first error after trying them all.
pub(crate) fn release_all<K: LockKind, H: Holding>(guards: Vec<LockGuard<K, H>>) -> Result<()> {
    first_error(guards.into_iter().map(LockGuard::unlock))
}

/// Runs every release of `outcomes` and returns the first error, if any.
fn first_error(outcomes: impl Iterator<Item = Result<()>>) -> Result<()> {
    let mut first = None;
    for outcome in outcomes {
        if let Err(e) = outcome {
            first.get_or_insert(e);
        }
    }
    first.map_or(Ok(()), Err)
}

impl<H: Holding> MultiLockGuard<H> {
    /// Whether every lock is still believed held (no I/O); see
    /// [`LockGuard::is_held`].
    pub fn is_held(&self) -> bool {
        self.guards.iter().all(MemberGuard::is_held)
    }

    /// The guards of the individual locks, in the order they were taken
    /// (the lock waited for first, then the others in the multi-lock's
    /// order).
    pub fn guards(&self) -> &[MemberGuard<H>] {
        &self.guards
    }

    /// The guards of the individual locks, each to be released on its own
    /// (in the order of [`guards`](Self::guards)).
    pub fn into_guards(mut self) -> Vec<MemberGuard<H>> {
        std::mem::take(&mut self.guards)
    }

    /// Releases every lock, the last taken first, and reports the first
    /// failure, after trying all.
    ///
    /// # Errors
    ///
    /// As [`LockGuard::unlock`].
    pub fn unlock(mut self) -> Result<()> {
        release_members(std::mem::take(&mut self.guards))
    }
}

impl<H: Holding> Drop for MultiLockGuard<H> {
    /// Releases every lock still here, the last taken first.
    fn drop(&mut self) {
        while let Some(guard) = self.guards.pop() {
            drop(guard);
        }
    }
}

impl<H: Holding> fmt::Debug for MultiLock<H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MultiLock")
            .field("members", &self.members)
            .field("holder", &self.holder)
            .finish()
    }
}

impl<H: Holding> fmt::Debug for MultiLockGuard<H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MultiLockGuard")
            .field("guards", &self.guards)
            .finish()
    }
}
