//! One lock of a [`MultiLock`](crate::MultiLock), of any kind, and its
//! guard: the multi-lock takes, releases and reports its locks through
//! these, whether they are plain, fair, fenced, spin, read or write locks
//! (Redisson's `RedissonMultiLock` takes any `RLock` too).

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use crate::error::Result;
use crate::guard::AnyHeld;
use crate::holding::{Holder, Holding, ThisThread};
use crate::interrupt::Interrupt;
use crate::kind::LockKind;
use crate::lock::Lock;
use crate::owner::Owner;

/// An async acquire of one member, whatever its kind.
pub(super) type HeldFuture = Pin<Box<dyn Future<Output = Result<Option<Box<dyn AnyHeld>>>> + Send>>;

/// What a multi-lock needs of one lock, whatever its kind.
trait AnyLock: Send + Sync + fmt::Debug {
    /// Takes the lock for `holder`, as [`Lock`]'s acquires do.
    fn acquire(
        &self,
        holder: Holder,
        lease: Option<Duration>,
        wait: Option<Duration>,
        interrupt: Option<&Interrupt>,
    ) -> Result<Option<Box<dyn AnyHeld>>>;
    /// An async acquire for `owner` (see [`Lock::lock_async`]).
    fn acquire_async(
        &self,
        owner: Owner,
        lease: Option<Duration>,
        wait: Option<Duration>,
    ) -> HeldFuture;
    fn force_unlock(&self) -> Result<bool>;
    fn name(&self) -> &str;
    fn kind(&self) -> &'static str;
}

impl<K: LockKind> AnyLock for Lock<K> {
    fn acquire(
        &self,
        holder: Holder,
        lease: Option<Duration>,
        wait: Option<Duration>,
        interrupt: Option<&Interrupt>,
    ) -> Result<Option<Box<dyn AnyHeld>>> {
        fn boxed(held: impl AnyHeld + 'static) -> Box<dyn AnyHeld> {
            Box::new(held)
        }
        Ok(match holder {
            Holder::Thread => self.acquire_held(lease, wait, interrupt)?.map(boxed),
            Holder::Owner(owner) => self
                .for_owner(owner)
                .acquire_held(lease, wait, interrupt)?
                .map(boxed),
        })
    }

    fn acquire_async(
        &self,
        owner: Owner,
        lease: Option<Duration>,
        wait: Option<Duration>,
    ) -> HeldFuture {
        let acquiring = self.for_owner(owner).acquire_async(lease, wait);
        Box::pin(async move {
            let guard = acquiring.await?;
            Ok(guard.map(|guard| Box::new(guard.into_held()) as Box<dyn AnyHeld>))
        })
    }

    fn force_unlock(&self) -> Result<bool> {
        Lock::force_unlock(self)
    }

    fn name(&self) -> &str {
        Lock::name(self)
    }

    fn kind(&self) -> &'static str {
        K::DESCRIPTION
    }
}

/// One lock of a [`MultiLock`](crate::MultiLock): a plain, fair, fenced,
/// spin, read or write lock, made from the [`Lock`] with `.into()` (or
/// `MultiMember::from`). Cheap to clone.
#[derive(Clone)]
pub struct MultiMember {
    lock: Arc<dyn AnyLock>,
}

impl<K: LockKind> From<Lock<K>> for MultiMember {
    fn from(lock: Lock<K>) -> Self {
        MultiMember {
            lock: Arc::new(lock),
        }
    }
}

impl MultiMember {
    /// The lock's name.
    pub fn name(&self) -> &str {
        self.lock.name()
    }

    /// The lock's kind in words: "plain lock", "fair lock", "read lock"…
    pub fn kind(&self) -> &'static str {
        self.lock.kind()
    }

    /// Takes the lock for `holder`, as [`Lock`]'s acquires do.
    pub(crate) fn acquire<H: Holding>(
        &self,
        holder: H,
        lease: Option<Duration>,
        wait: Option<Duration>,
        interrupt: Option<&Interrupt>,
    ) -> Result<Option<MemberGuard<H>>> {
        let held = self.lock.acquire(holder.holder(), lease, wait, interrupt)?;
        Ok(held.map(|guard| MemberGuard {
            guard,
            _holder: H::GuardMarker::default(),
        }))
    }

    /// Takes the lock for `owner` without blocking (see
    /// [`Lock::lock_async`]).
    pub(super) async fn acquire_async(
        &self,
        owner: Owner,
        lease: Option<Duration>,
        wait: Option<Duration>,
    ) -> Result<Option<MemberGuard<Owner>>> {
        let held = self.lock.acquire_async(owner, lease, wait).await?;
        Ok(held.map(|guard| MemberGuard {
            guard,
            _holder: Default::default(),
        }))
    }

    /// See [`Lock::force_unlock`].
    pub(crate) fn force_unlock(&self) -> Result<bool> {
        self.lock.force_unlock()
    }
}

impl fmt::Debug for MultiMember {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.lock, f)
    }
}

/// The guard of one lock of a [`MultiLockGuard`](crate::MultiLockGuard):
/// dropping it releases that lock (one hold), like the lock's own
/// [`LockGuard`](crate::LockGuard). A thread's belongs to the thread that
/// took the locks; an owner's may move to other threads.
#[must_use = "if unused the lock will immediately unlock"]
pub struct MemberGuard<H: Holding = ThisThread> {
    guard: Box<dyn AnyHeld>,
    /// `!Send` for a thread's guard.
    _holder: H::GuardMarker,
}

impl<H: Holding> MemberGuard<H> {
    /// The lock's name.
    pub fn name(&self) -> &str {
        self.guard.name()
    }

    /// Whether the lock is still believed held (no I/O); see
    /// [`LockGuard::is_held`](crate::LockGuard::is_held).
    pub fn is_held(&self) -> bool {
        self.guard.is_held()
    }

    /// The fencing token, when the lock is a fenced lock.
    pub fn token(&self) -> Option<u64> {
        self.guard.token()
    }

    /// Releases the lock and reports the outcome; see
    /// [`LockGuard::unlock`](crate::LockGuard::unlock).
    ///
    /// # Errors
    ///
    /// As [`LockGuard::unlock`](crate::LockGuard::unlock).
    pub fn unlock(self) -> Result<()> {
        self.guard.unlock()
    }
}

impl<H: Holding> fmt::Debug for MemberGuard<H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.guard, f)
    }
}
