//! The lock handle: the public API of one named lock of any kind. The
//! acquire, wait and release machinery behind it is the client's
//! [`Engine`](crate::engine::Engine).

mod futures;
mod holder;
mod state;

pub use futures::{LockFuture, TryLockFuture, UnlockFuture};

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::client::Client;
use crate::engine::{self, LockRef, Mode};
use crate::error::Result;
use crate::guard::{Held, LockGuard};
use crate::hold::Hold;
use crate::holding::{Holding, ThisThread};
use crate::interrupt::Interrupt;
use crate::kind::sealed::KindOps;
use crate::kind::{Fair, Fenced, LockKind, Read, Reentrant, Spin, Write};
use crate::names;
use crate::owner::Owner;

/// A handle on one named lock held in Redis, of kind `K`: by default the
/// plain reentrant lock (Redisson's `RLock`); see [`LockKind`] for the others.
///
/// The lock excludes every other holder, of this process or any other, that
/// locks the same name on the same server (Redisson clients included); the
/// holder that has it may lock it again, and must release it as many times.
/// Handles are cheap to clone and may be shared between threads.
///
/// `H` says who holds what the handle takes: by default the calling thread
/// ([`ThisThread`](crate::ThisThread)): a hold belongs to the thread that
/// took it, and its [`LockGuard`] cannot leave that thread. A handle made
/// with [`for_owner`](Self::for_owner) takes holds for an
/// [`Owner`](crate::Owner) instead, from whichever thread calls, and its
/// guards ([`OwnerGuard`](crate::OwnerGuard)) may move to other threads.
///
/// ```no_run
/// # fn main() -> redhold::Result<()> {
/// let client = redhold::Client::open("redis://127.0.0.1:6379/")?;
/// let lock = client.lock("orders:42");
/// {
///     let _guard = lock.lock()?;      // waits; renewed by the watchdog
///     let _again = lock.lock()?;      // reentrant: hold count 2
/// }                                   // both holds released here
/// if let Some(_guard) = lock.try_lock_for(std::time::Duration::from_millis(500))? {
///     // got it within half a second
/// }
/// # Ok(()) }
/// ```
pub struct Lock<K: LockKind = Reentrant, H: Holding = ThisThread> {
    client: Client,
    keys: Arc<Keys<K>>,
    holder: H,
}

/// The plain reentrant lock (Redisson's `RLock`): [`Client::lock`].
pub type ReentrantLock = Lock<Reentrant>;
/// A first-come, first-served lock: [`Client::fair_lock`].
pub type FairLock = Lock<Fair>;
/// A lock whose every acquire returns a fencing token: [`Client::fenced_lock`].
pub type FencedLock = Lock<Fenced>;
/// A lock whose waiters poll with backoff instead of pub/sub: [`Client::spin_lock`].
pub type SpinLock = Lock<Spin>;
/// The shared side of a [`ReadWriteLock`](crate::ReadWriteLock).
pub type ReadLock = Lock<Read>;
/// The exclusive side of a [`ReadWriteLock`](crate::ReadWriteLock).
pub type WriteLock = Lock<Write>;

/// The name of one lock and its kind's key names.
struct Keys<K> {
    name: Arc<str>,
    kind: K,
}

impl<K: LockKind, H: Holding> Clone for Lock<K, H> {
    fn clone(&self) -> Self {
        Lock {
            client: self.client.clone(),
            keys: Arc::clone(&self.keys),
            holder: self.holder,
        }
    }
}

impl<H: Holding> Lock<Spin, H> {
    /// The same spin lock with another backoff: a waiter tries again after
    /// `initial`, doubling up to `max`. The default is 1 ms to 128 ms.
    pub fn with_backoff(self, initial: Duration, max: Duration) -> Self {
        let name = Arc::clone(&self.keys.name);
        let kind = Spin::for_name(&name, self.client.config()).with_backoff(initial, max);
        Lock {
            client: self.client,
            keys: Arc::new(Keys { name, kind }),
            holder: self.holder,
        }
    }
}

impl<K: LockKind> Lock<K> {
    pub(crate) fn new(client: Client, name: String) -> Self {
        let kind = K::for_name(&name, client.config());
        Lock {
            client,
            keys: Arc::new(Keys {
                name: Arc::from(name),
                kind,
            }),
            holder: ThisThread,
        }
    }
}

impl<K: LockKind, H: Holding> Lock<K, H> {
    /// The same lock, taken and released for `owner` instead of the calling
    /// thread: every acquire, `unlock` and query of the returned handle acts
    /// for `owner`, whichever thread calls, and its guards are `Send` (see
    /// [`Owner`]). Reentrant for the owner from any thread; the owner and
    /// any thread are different holders, each waiting for the other.
    pub fn for_owner(&self, owner: Owner) -> Lock<K, Owner> {
        Lock {
            client: self.client.clone(),
            keys: Arc::clone(&self.keys),
            holder: owner,
        }
    }

    /// Who this handle's holds are for: [`ThisThread`] or an [`Owner`].
    pub fn holder(&self) -> H {
        self.holder
    }

    /// The lock's name, which is also its Redis key.
    pub fn name(&self) -> &str {
        &self.keys.name
    }

    /// The client this lock belongs to.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Waits until the lock is held, however long that takes, and returns
    /// the guard that releases it. No lease: the watchdog renews the lock
    /// until the guard is dropped, so it never expires while this process
    /// runs.
    ///
    /// While Redis is unreachable (a restart, a failover) it keeps trying,
    /// with backoff, and takes the lock once Redis is back.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidName`](crate::Error::InvalidName), [`Error::Shutdown`](crate::Error::Shutdown),
    /// [`Error::Unreachable`](crate::Error::Unreachable) once Redis has been unreachable for the
    /// client's [outage tolerance](crate::ClientBuilder::outage_tolerance),
    /// or [`Error::Redis`](crate::Error::Redis) when Redis refuses the request itself.
    pub fn lock(&self) -> Result<LockGuard<K, H>> {
        self.acquire_or_wait(None, None, None)
    }

    /// Waits until the lock is held, then lets it expire after `lease` unless
    /// released before; the watchdog does not renew it.
    ///
    /// # Errors
    ///
    /// As [`lock`](Self::lock), and [`Error::InvalidArgument`](crate::Error::InvalidArgument) for a lease
    /// under one millisecond.
    pub fn lock_with_lease(&self, lease: Duration) -> Result<LockGuard<K, H>> {
        self.acquire_or_wait(Some(lease), None, None)
    }

    /// Waits until the lock is held, or until `interrupt` is triggered.
    ///
    /// # Errors
    ///
    /// [`Error::Interrupted`](crate::Error::Interrupted) once `interrupt` is triggered (also when it was
    /// triggered before the call), otherwise as [`lock`](Self::lock).
    pub fn lock_interruptibly(&self, interrupt: &Interrupt) -> Result<LockGuard<K, H>> {
        self.acquire_or_wait(None, Some(interrupt), None)
    }

    /// Like [`lock_interruptibly`](Self::lock_interruptibly), with a lease
    /// instead of the watchdog.
    ///
    /// # Errors
    ///
    /// As [`lock_interruptibly`](Self::lock_interruptibly) and
    /// [`lock_with_lease`](Self::lock_with_lease).
    pub fn lock_interruptibly_with_lease(
        &self,
        interrupt: &Interrupt,
        lease: Duration,
    ) -> Result<LockGuard<K, H>> {
        self.acquire_or_wait(Some(lease), Some(interrupt), None)
    }

    /// Takes the lock if it is free (or already held by this thread), without
    /// waiting. `Ok(None)` means another holder has it.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidName`](crate::Error::InvalidName), [`Error::Shutdown`](crate::Error::Shutdown), or [`Error::Redis`](crate::Error::Redis)
    /// when Redis cannot be reached within the retries (no outage is
    /// waited out).
    pub fn try_lock(&self) -> Result<Option<LockGuard<K, H>>> {
        self.acquire(None, Some(Duration::ZERO), None)
    }

    /// Waits at most `wait` for the lock; `Ok(None)` when it was not free
    /// in time. An outage is waited out, like [`lock`](Self::lock)'s.
    ///
    /// # Errors
    ///
    /// As [`lock`](Self::lock); also [`Error::Unreachable`](crate::Error::Unreachable) when `wait`
    /// runs out while Redis is unreachable (whether the lock was free is
    /// then unknown).
    pub fn try_lock_for(&self, wait: Duration) -> Result<Option<LockGuard<K, H>>> {
        self.acquire(None, Some(wait), None)
    }

    /// Waits at most `wait` for the lock and holds it for at most `lease`.
    ///
    /// # Errors
    ///
    /// As [`lock_with_lease`](Self::lock_with_lease).
    pub fn try_lock_for_with_lease(
        &self,
        wait: Duration,
        lease: Duration,
    ) -> Result<Option<LockGuard<K, H>>> {
        self.acquire(Some(lease), Some(wait), None)
    }

    /// Deletes the lock whoever holds it and wakes its waiters; for cleanup
    /// code and operators. Returns whether there was a lock to delete.
    /// Holders find out when they renew or release ([`Error::LockLost`](crate::Error::LockLost)).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidName`](crate::Error::InvalidName), [`Error::Shutdown`](crate::Error::Shutdown), [`Error::Redis`](crate::Error::Redis).
    pub fn force_unlock(&self) -> Result<bool> {
        self.validate()?;
        let server = self.client.engine().server();
        server.check_open()?;
        self.keys
            .kind
            .force_release(engine::target(server, self.lock_ref()))
    }

    /// Releases one hold of the calling thread without a guard, for holds
    /// whose guard was given up with [`LockGuard::leak`]. A hold that a live
    /// guard stands for is never released here: only its guard may.
    ///
    /// # Errors
    ///
    /// [`Error::NotHeld`](crate::Error::NotHeld) when the calling thread holds no leaked hold on
    /// the lock, also while live guards hold it (nothing is sent to Redis
    /// then), [`Error::LockLost`](crate::Error::LockLost) when it held one but
    /// the lock expired or was deleted meanwhile, otherwise as
    /// [`lock`](Self::lock).
    pub fn unlock(&self) -> Result<()> {
        self.client
            .engine()
            .unlock(self.lock_ref(), self.holder.holder())
    }

    fn acquire_or_wait(
        &self,
        lease: Option<Duration>,
        interrupt: Option<&Interrupt>,
        wait: Option<Duration>,
    ) -> Result<LockGuard<K, H>> {
        match self.acquire(lease, wait, interrupt)? {
            Some(guard) => Ok(guard),
            // Only a bounded wait can end without the lock.
            None => unreachable!("an unbounded wait ended without the lock"),
        }
    }

    /// Takes the lock, waiting at most `wait` (forever when `None`).
    pub(crate) fn acquire(
        &self,
        lease: Option<Duration>,
        wait: Option<Duration>,
        interrupt: Option<&Interrupt>,
    ) -> Result<Option<LockGuard<K, H>>> {
        Ok(self
            .acquire_held(lease, wait, interrupt)?
            .map(LockGuard::new))
    }

    /// [`acquire`](Self::acquire), the hold not yet in a guard (`Send` for
    /// every holder).
    pub(crate) fn acquire_held(
        &self,
        lease: Option<Duration>,
        wait: Option<Duration>,
        interrupt: Option<&Interrupt>,
    ) -> Result<Option<Held<K, H>>> {
        let held = self.client.engine().acquire(
            self.lock_ref(),
            self.holder.holder(),
            lease,
            wait,
            interrupt,
        )?;
        Ok(held.map(|(hold, grant)| Held::new(self.clone(), hold, grant)))
    }

    /// Releases the hold a guard stands for: on the guard's drop, or with
    /// its `unlock` (see [`Mode`]).
    pub(crate) fn release(&self, hold: &Hold, on_drop: bool) -> Result<()> {
        let mode = if on_drop { Mode::Drop } else { Mode::Unlock };
        self.client.engine().release(self.lock_ref(), hold, mode)
    }

    /// Keeps the hold a guard stands for without it.
    pub(crate) fn leak(&self, hold: &Hold) {
        self.client.engine().leak(hold);
    }

    fn lock_ref(&self) -> LockRef<'_, K> {
        LockRef {
            name: &self.keys.name,
            kind: &self.keys.kind,
        }
    }

    fn validate(&self) -> Result<()> {
        names::validate(&self.keys.name)
    }
}

impl<K: LockKind, H: Holding> fmt::Debug for Lock<K, H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lock")
            .field("kind", &K::DESCRIPTION)
            .field("name", &names::shorten(&self.keys.name))
            .field("client", &self.client.id())
            .field("holder", &self.holder)
            .finish()
    }
}
