//! The RAII guard of one hold on a lock, held by a thread or an owner.

use std::fmt;

use crate::error::Result;
use crate::hold::Hold;
use crate::holding::{Holding, ThisThread};
use crate::kind::{Fenced, LockKind, Reentrant};
use crate::lock::Lock;
use crate::names;
use crate::owner::Owner;

/// One hold on a [`Lock`] of kind `K`, released when the guard is dropped.
///
/// A thread's guard (`H` = [`ThisThread`], the default) belongs to the
/// thread that took the lock: it is `!Send`, so the compiler refuses to
/// move it to another thread, where the release would name the wrong
/// holder:
///
/// ```compile_fail
/// let client = redhold::Client::open("redis://127.0.0.1:6379/").unwrap();
/// let guard = client.lock("orders:42").lock().unwrap();
/// std::thread::spawn(move || drop(guard)); // error: `LockGuard` cannot be sent between threads
/// ```
///
/// An owner's guard ([`OwnerGuard`], from a [`Lock::for_owner`] handle) is
/// `Send + Sync + 'static`: it may move to another thread, a channel or a
/// struct that outlives the call, and its drop releases one hold of the
/// owner wherever it runs.
///
/// Dropping the guard releases on a best-effort basis and logs a failure.
/// The drop waits at most about one response timeout: a release Redis has
/// not confirmed by then (a stalled server) goes on in the background, and
/// the holder's next acquire of the same lock waits for it. Call
/// [`unlock`](Self::unlock) to learn whether the release worked and whether
/// the lock was still held.
#[must_use = "if unused the lock will immediately unlock"]
pub struct LockGuard<K: LockKind = Reentrant, H: Holding = ThisThread> {
    held: Held<K, H>,
    /// `!Send` for a thread's guard.
    _holder: H::GuardMarker,
}

/// The guard of a hold taken for an [`Owner`]: `Send`, released on drop
/// from whichever thread drops it.
pub type OwnerGuard<K = Reentrant> = LockGuard<K, Owner>;

impl<K: LockKind, H: Holding> LockGuard<K, H> {
    pub(crate) fn new(held: Held<K, H>) -> Self {
        LockGuard {
            held,
            _holder: H::GuardMarker::default(),
        }
    }

    /// Whether the hold is still believed held, without asking Redis: false
    /// once the watchdog (or a release) found the lock gone, once a lease has
    /// run out, and once its holder took the lock anew after losing it.
    ///
    /// It is not told of a [`force_unlock`](Lock::force_unlock) or an
    /// expiry until the watchdog's next renewal (at most a third of the
    /// watchdog timeout later) or the holder's next acquire or release of
    /// the lock; [`Lock::hold_count`] asks Redis.
    pub fn is_held(&self) -> bool {
        self.held.is_held()
    }

    /// The lock this guard holds.
    pub fn lock(&self) -> &Lock<K, H> {
        self.held.lock()
    }

    /// Releases the hold and reports how it went.
    ///
    /// # Errors
    ///
    /// [`Error::LockLost`](crate::Error::LockLost) when the lock had expired
    /// or been deleted meanwhile (someone else may have held it); a guard
    /// whose hold was already known lost, or whose holder has taken the
    /// lock anew since, sends nothing to Redis and reports this too;
    /// [`Error::ReleaseUnconfirmed`](crate::Error::ReleaseUnconfirmed) when
    /// Redis did not confirm the release within the retry rule's bound
    /// (connect + response timeout) × (retries + 1) + the retry delays; the
    /// release then goes on in the background until confirmed or until the
    /// lock's TTL has run out; [`Error::Shutdown`](crate::Error::Shutdown) after
    /// [`Client::shutdown`](crate::Client::shutdown).
    pub fn unlock(self) -> Result<()> {
        self.held.unlock()
    }

    /// Keeps the hold without a guard: it stays held (and renewed by the
    /// watchdog, if it has no lease) until its holder (the same thread, or
    /// the owner from any thread) calls [`Lock::unlock`].
    ///
    /// A leaked hold with a lease ends when the lock's key expires, which is
    /// when its lease runs out only if the holder holds the lock no other
    /// way meanwhile: Redis keeps one TTL per lock, and redhold never
    /// shortens it while the holder holds the lock, so a leaked lease nested
    /// in (or followed by) other holds of the same holder lasts as long as
    /// they keep the key alive, as in Redisson. Release it with
    /// [`Lock::unlock`] once the holder is done with it.
    pub fn leak(self) {
        self.held.leak();
    }

    /// The hold inside, for the guards that carry guards of any kind.
    pub(crate) fn into_held(self) -> Held<K, H> {
        self.held
    }

    /// The hold this guard stands for.
    pub(crate) fn hold(&self) -> &Hold {
        self.held.hold()
    }
}

impl<K: LockKind> LockGuard<K, Owner> {
    /// The owner this hold belongs to.
    pub fn owner(&self) -> Owner {
        self.held.lock().holder()
    }
}

impl<H: Holding> LockGuard<Fenced, H> {
    /// The fencing token of this acquire: larger than every token handed out
    /// before for this lock name, by any client.
    pub fn token(&self) -> u64 {
        self.held.grant()
    }
}

impl<K: LockKind, H: Holding> fmt::Debug for LockGuard<K, H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.held, f)
    }
}

// ---- the hold inside a guard ----

/// One hold of `lock`'s holder, released on drop unless done.
pub(crate) struct Held<K: LockKind, H: Holding> {
    lock: Lock<K, H>,
    hold: Hold,
    /// What the acquire handed out (the fencing token of a fenced lock).
    grant: K::Grant,
    /// Set once released (or leaked), so that `Drop` does nothing.
    done: bool,
    /// Taken by an async call: its drop queues the release on the client's
    /// threads instead of waiting for it (an executor's thread must not
    /// wait on Redis).
    queued_drop: bool,
}

impl<K: LockKind, H: Holding> Held<K, H> {
    pub(crate) fn new(lock: Lock<K, H>, hold: Hold, grant: K::Grant) -> Self {
        Held {
            lock,
            hold,
            grant,
            done: false,
            queued_drop: false,
        }
    }

    /// [`new`](Self::new), for an async call's guard: its drop never waits.
    pub(crate) fn taken_async(lock: Lock<K, H>, hold: Hold, grant: K::Grant) -> Self {
        let mut held = Held::new(lock, hold, grant);
        held.queued_drop = true;
        held
    }

    pub(crate) fn is_held(&self) -> bool {
        let client = self.lock.client();
        self.hold
            .is_held_after(client.is_shut_down(), client.watchdog_timeout())
    }

    pub(crate) fn lock(&self) -> &Lock<K, H> {
        &self.lock
    }

    pub(crate) fn grant(&self) -> K::Grant {
        self.grant
    }

    /// The hold this stands for.
    pub(crate) fn hold(&self) -> &Hold {
        &self.hold
    }

    pub(crate) fn unlock(mut self) -> Result<()> {
        self.done = true;
        self.lock.release(&self.hold, false)
    }

    pub(crate) fn leak(mut self) {
        self.done = true;
        self.lock.leak(&self.hold);
    }
}

impl<K: LockKind, H: Holding> Drop for Held<K, H> {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        if self.queued_drop {
            let (lock, hold) = (self.lock.clone(), self.hold.clone());
            let queued = self.lock.client().engine().tasks().spawn(Box::new(move || {
                if let Err(e) = lock.release(&hold, true) {
                    log::warn!(
                        "redhold: releasing lock {:?} on guard drop failed: {}",
                        names::shorten(lock.name()),
                        e.report()
                    );
                }
            }));
            if queued.is_ok() {
                return;
            }
            // The client is shut down: the release fails fast anyway.
        }
        if let Err(e) = self.lock.release(&self.hold, true) {
            log::warn!(
                "redhold: releasing lock {:?} on guard drop failed: {}",
                names::shorten(self.lock.name()),
                e.report()
            );
        }
    }
}

impl<K: LockKind, H: Holding> fmt::Debug for Held<K, H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LockGuard")
            .field("lock", &self.lock)
            .field("held", &self.is_held())
            .field("grant", &self.grant)
            .finish()
    }
}

/// A hold of any kind, for the guards that carry several (a multi-lock's
/// members): `Send + Sync` whoever holds it.
pub(crate) trait AnyHeld: Send + Sync + fmt::Debug {
    fn unlock(self: Box<Self>) -> Result<()>;
    fn is_held(&self) -> bool;
    fn name(&self) -> &str;
    /// The fencing token, when the lock is a fenced lock.
    fn token(&self) -> Option<u64>;
}

impl<K: LockKind, H: Holding> AnyHeld for Held<K, H> {
    fn unlock(self: Box<Self>) -> Result<()> {
        Held::unlock(*self)
    }

    fn is_held(&self) -> bool {
        Held::is_held(self)
    }

    fn name(&self) -> &str {
        self.lock.name()
    }

    fn token(&self) -> Option<u64> {
        K::token_of(&self.grant)
    }
}
