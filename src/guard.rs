//! The RAII guard of one hold on a lock.

use std::fmt;
use std::marker::PhantomData;

use crate::error::Result;
use crate::hold::Hold;
use crate::kind::{Fenced, LockKind, Reentrant};
use crate::lock::Lock;
use crate::names;

/// One hold on a [`Lock`] of kind `K`, released when the guard is dropped.
///
/// A guard belongs to the thread that took the lock: it is `!Send`, so the
/// compiler refuses to move it to another thread, where the release would
/// name the wrong holder:
///
/// ```compile_fail
/// let client = redhold::Client::open("redis://127.0.0.1:6379/").unwrap();
/// let guard = client.lock("orders:42").lock().unwrap();
/// std::thread::spawn(move || drop(guard)); // error: `LockGuard` cannot be sent between threads
/// ```
///
/// Dropping the guard releases on a best-effort basis and logs a failure.
/// The drop waits at most about one response timeout: a release Redis has
/// not confirmed by then (a stalled server) goes on in the background, and
/// a later acquire of the same lock by the same thread waits for it. Call
/// [`unlock`](Self::unlock) to learn whether the release worked and whether
/// the lock was still held.
#[must_use = "if unused the lock will immediately unlock"]
pub struct LockGuard<K: LockKind = Reentrant> {
    lock: Lock<K>,
    hold: Hold,
    /// What the acquire handed out (the fencing token of a fenced lock).
    grant: K::Grant,
    /// Set once released (or leaked), so that `Drop` does nothing.
    done: bool,
    _not_send: PhantomData<std::sync::MutexGuard<'static, ()>>,
}

impl<K: LockKind> LockGuard<K> {
    pub(crate) fn new(lock: Lock<K>, hold: Hold, grant: K::Grant) -> Self {
        LockGuard {
            lock,
            hold,
            grant,
            done: false,
            _not_send: PhantomData,
        }
    }

    /// Whether the hold is still believed held, without asking Redis: false
    /// once the watchdog (or a release) found the lock gone, once a lease has
    /// run out, and once this thread took the lock anew after losing it.
    ///
    /// It is not told of a [`force_unlock`](Lock::force_unlock) or an
    /// expiry until the watchdog's next renewal (at most a third of the
    /// watchdog timeout later) or this thread's next acquire or release of
    /// the lock; [`Lock::is_held_by_current_thread`] asks Redis.
    pub fn is_held(&self) -> bool {
        let client = self.lock.client();
        self.hold
            .is_held_after(client.is_shut_down(), client.watchdog_timeout())
    }

    /// The lock this guard holds.
    pub fn lock(&self) -> &Lock<K> {
        &self.lock
    }

    /// The fencing token of a fenced lock's guard; `None` for other kinds.
    pub(crate) fn token_if_fenced(&self) -> Option<u64> {
        K::token_of(&self.grant)
    }

    /// The hold this guard stands for.
    pub(crate) fn hold(&self) -> &Hold {
        &self.hold
    }

    /// Releases the hold and reports how it went.
    ///
    /// # Errors
    ///
    /// [`Error::LockLost`](crate::Error::LockLost) when the lock had expired
    /// or been deleted meanwhile (someone else may have held it); a guard
    /// whose hold was already known lost, or whose thread has taken the
    /// lock anew since, sends nothing to Redis and reports this too;
    /// [`Error::ReleaseUnconfirmed`](crate::Error::ReleaseUnconfirmed) when
    /// Redis did not confirm the release within the retry rule's bound
    /// (connect + response timeout) × (retries + 1) + the retry delays; the
    /// release then goes on in the background until confirmed or until the
    /// lock's TTL has run out; [`Error::Shutdown`](crate::Error::Shutdown) after
    /// [`Client::shutdown`](crate::Client::shutdown).
    pub fn unlock(mut self) -> Result<()> {
        self.done = true;
        self.lock.release(&self.hold, false)
    }

    /// Keeps the hold without a guard: it stays held (and renewed by the
    /// watchdog, if it has no lease) until the same thread calls
    /// [`Lock::unlock`].
    ///
    /// A leaked hold with a lease ends when the lock's key expires, which is
    /// when its lease runs out only if the thread holds the lock no other
    /// way meanwhile: Redis keeps one TTL per lock, and redhold never
    /// shortens it while the thread holds the lock, so a leaked lease nested
    /// in (or followed by) other holds of the same thread lasts as long as
    /// they keep the key alive, as in Redisson. Release it with
    /// [`Lock::unlock`] once the thread is done with it.
    pub fn leak(mut self) {
        self.done = true;
        self.lock.leak(&self.hold);
    }
}

impl LockGuard<Fenced> {
    /// The fencing token of this acquire: larger than every token handed out
    /// before for this lock name, by any client.
    pub fn token(&self) -> u64 {
        self.grant
    }
}

impl<K: LockKind> Drop for LockGuard<K> {
    fn drop(&mut self) {
        if self.done {
            return;
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

impl<K: LockKind> fmt::Debug for LockGuard<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LockGuard")
            .field("lock", &self.lock)
            .field("held", &self.is_held())
            .field("grant", &self.grant)
            .finish()
    }
}
