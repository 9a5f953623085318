//! The lock handle and the one acquire / wait / release path that every
//! kind of lock shares.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::client::Client;
use crate::config::lease_millis;
use crate::error::{Error, Result};
use crate::guard::{Hold, LockGuard, Renewal};
use crate::interrupt::{self, Interrupt};
use crate::kind::sealed::KindOps;
use crate::kind::{Attempt, Fair, Fenced, LockKind, Read, Reentrant, Spin, Target, Write};
use crate::names;
use crate::pubsub::Wake;
use crate::renewals::Which;

/// How long a thread that did not wait stands back after a local release
/// found waiters parked, so that the woken waiter gets the lock instead of a
/// thread coming straight back for it (barging). A hand-off takes well under
/// a millisecond; the grace only bounds the cost when the wake-up is lost.
const HANDOFF_GRACE: Duration = Duration::from_millis(50);

/// The most holds counted twice given back after one acquire: each costs a
/// round trip, and more than a few means something else writes our field.
const MAX_ORPHANS_RELEASED: u32 = 8;

/// A handle on one named lock held in Redis, of kind `K`: by default the
/// plain reentrant lock (Redisson's `RLock`); see [`LockKind`] for the others.
///
/// The lock excludes every other thread, of this process or any other, that
/// locks the same name on the same server (Redisson clients included); the
/// thread that holds it may lock it again, and must release it as many times.
/// Handles are cheap to clone and may be shared between threads; a hold
/// belongs to the thread that took it, and its [`LockGuard`] cannot leave
/// that thread.
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
pub struct Lock<K: LockKind = Reentrant> {
    client: Client,
    keys: Arc<Keys<K>>,
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

impl<K: LockKind> Clone for Lock<K> {
    fn clone(&self) -> Self {
        Lock {
            client: self.client.clone(),
            keys: Arc::clone(&self.keys),
        }
    }
}

impl Lock<Spin> {
    /// The same spin lock with another backoff: a waiter tries again after
    /// `initial`, doubling up to `max`. The default is 1 ms to 128 ms.
    pub fn with_backoff(self, initial: Duration, max: Duration) -> Self {
        let name = Arc::clone(&self.keys.name);
        let kind = Spin::for_name(&name, &self.client).with_backoff(initial, max);
        Lock {
            client: self.client,
            keys: Arc::new(Keys { name, kind }),
        }
    }
}

impl<K: LockKind> Lock<K> {
    pub(crate) fn new(client: Client, name: String) -> Self {
        let kind = K::for_name(&name, &client);
        Lock {
            client,
            keys: Arc::new(Keys {
                name: Arc::from(name),
                kind,
            }),
        }
    }

    /// The lock's name, which is also its Redis key.
    pub fn name(&self) -> &str {
        &self.keys.name
    }

    /// The client this lock belongs to.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Waits until the lock is held, however long that takes. No lease: the
    /// watchdog renews it until the guard is dropped, so it never expires
    /// while this process runs.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidName`], [`Error::Shutdown`], or [`Error::Redis`] when
    /// Redis cannot be reached within the retries.
    pub fn lock(&self) -> Result<LockGuard<K>> {
        self.acquire_or_wait(None, None, None)
    }

    /// Waits until the lock is held, then lets it expire after `lease` unless
    /// released before; the watchdog does not renew it.
    ///
    /// # Errors
    ///
    /// As [`lock`](Self::lock), and [`Error::InvalidArgument`] for a lease
    /// under one millisecond.
    pub fn lock_with_lease(&self, lease: Duration) -> Result<LockGuard<K>> {
        self.acquire_or_wait(Some(lease), None, None)
    }

    /// Waits until the lock is held, or until `interrupt` is triggered.
    ///
    /// # Errors
    ///
    /// [`Error::Interrupted`] once `interrupt` is triggered (also when it was
    /// triggered before the call), otherwise as [`lock`](Self::lock).
    pub fn lock_interruptibly(&self, interrupt: &Interrupt) -> Result<LockGuard<K>> {
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
    ) -> Result<LockGuard<K>> {
        self.acquire_or_wait(Some(lease), Some(interrupt), None)
    }

    /// Takes the lock if it is free (or already held by this thread), without
    /// waiting. `Ok(None)` means another holder has it.
    ///
    /// # Errors
    ///
    /// As [`lock`](Self::lock).
    pub fn try_lock(&self) -> Result<Option<LockGuard<K>>> {
        self.acquire(None, Some(Duration::ZERO), None)
    }

    /// Waits at most `wait` for the lock; `Ok(None)` when it was not free
    /// in time.
    ///
    /// # Errors
    ///
    /// As [`lock`](Self::lock).
    pub fn try_lock_for(&self, wait: Duration) -> Result<Option<LockGuard<K>>> {
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
    ) -> Result<Option<LockGuard<K>>> {
        self.acquire(Some(lease), Some(wait), None)
    }

    /// Deletes the lock whoever holds it and wakes its waiters; for cleanup
    /// code and operators. Returns whether there was a lock to delete.
    /// Holders find out when they renew or release ([`Error::LockLost`]).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidName`], [`Error::Shutdown`], [`Error::Redis`].
    pub fn force_unlock(&self) -> Result<bool> {
        self.validate()?;
        self.client.check_open()?;
        self.keys.kind.force_release(self.target())
    }

    /// Releases one hold of the calling thread without a guard, for holds
    /// whose guard was given up with [`LockGuard::leak`].
    ///
    /// # Errors
    ///
    /// [`Error::NotHeld`] when the calling thread holds no hold on the lock
    /// (nothing is sent to Redis), [`Error::LockLost`] when it held one but
    /// the lock expired or was deleted meanwhile, otherwise as
    /// [`lock`](Self::lock).
    pub fn unlock(&self) -> Result<()> {
        self.validate()?;
        self.client.check_open()?;
        let field = self.field();
        match self.client.renewals().find(&self.keys.name, &field) {
            Some(record) => self.release(&Hold {
                record,
                renewal: Renewal::Unguarded,
            }),
            // No hold known here; Redis may still count one that no guard
            // stands for (see `release_orphans`): give that back.
            None => {
                let request_id = self.client.next_request_id();
                match self
                    .keys
                    .kind
                    .release(self.target(), &field, &request_id)
                    .map_err(|e| self.wrong_kind(e))?
                {
                    Some(_) => Ok(()),
                    None => Err(Error::NotHeld {
                        lock: names::shorten(&self.keys.name),
                    }),
                }
            }
        }
    }

    /// Whether any thread of any client holds the lock (for a read or write
    /// lock: holds it in that mode).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidName`], [`Error::Shutdown`], [`Error::Redis`].
    pub fn is_locked(&self) -> Result<bool> {
        self.validate()?;
        self.client.check_open()?;
        self.keys.kind.is_locked(self.target())
    }

    /// Whether the calling thread holds the lock.
    ///
    /// # Errors
    ///
    /// As [`is_locked`](Self::is_locked).
    pub fn is_held_by_current_thread(&self) -> Result<bool> {
        Ok(self.hold_count()? > 0)
    }

    /// How many times the calling thread holds the lock (0 when it does not).
    ///
    /// # Errors
    ///
    /// As [`is_locked`](Self::is_locked).
    pub fn hold_count(&self) -> Result<u32> {
        self.validate()?;
        let field = self.field();
        let count: Option<u32> = self.client.run(|conn| {
            redis::cmd("HGET")
                .arg(&*self.keys.name)
                .arg(&*field)
                .query(conn)
        })?;
        Ok(count.unwrap_or(0))
    }

    /// How long the lock will live in Redis unless renewed or released;
    /// `None` when it is not locked. A key without expiry (which redhold
    /// never makes) reports `Duration::MAX`.
    ///
    /// # Errors
    ///
    /// As [`is_locked`](Self::is_locked).
    pub fn remaining_lease(&self) -> Result<Option<Duration>> {
        self.validate()?;
        let ttl: i64 = self
            .client
            .run(|conn| redis::cmd("PTTL").arg(&*self.keys.name).query(conn))?;
        Ok(match ttl {
            -2 => None,
            -1 => Some(Duration::MAX),
            ms => Some(Duration::from_millis(ms.max(0) as u64)),
        })
    }

    // ---- acquiring ----

    fn acquire_or_wait(
        &self,
        lease: Option<Duration>,
        interrupt: Option<&Interrupt>,
        wait: Option<Duration>,
    ) -> Result<LockGuard<K>> {
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
    ) -> Result<Option<LockGuard<K>>> {
        self.validate()?;
        self.client.check_open()?;
        let lease_ms = match lease {
            Some(lease) => lease_millis(lease)?,
            None => self.watchdog_millis(),
        };
        if interrupt.is_some_and(Interrupt::is_triggered) {
            return Err(self.interrupted());
        }
        let field = self.field();
        if wait == Some(Duration::ZERO) {
            // A try that will not wait joins no queue: nothing to leave.
            let started = Instant::now();
            return Ok(match self.try_acquire(lease_ms, &field, false)? {
                Attempt::Acquired { grant, holds } => {
                    Some(self.guard(lease, field, started, grant, holds))
                }
                Attempt::Busy(_) => None,
            });
        }
        // Counted until the waiter has left any queue it joined, so that
        // shutdown can wait for that.
        let _waiting = self.client.waiting();
        let outcome = self.acquire_waiting(lease, lease_ms, &field, wait, interrupt);
        if !matches!(outcome, Ok(Some(_))) {
            // Every way out without the lock, errors and shutdown included,
            // leaves the queue (a fair lock's first attempt may have queued
            // us even when its reply was lost).
            self.give_up(&field);
        }
        outcome
    }

    /// A first attempt, unless a local waiter is being handed the lock (then
    /// this thread queues behind it instead of racing it: threads of one
    /// client take turns), then the contended path.
    fn acquire_waiting(
        &self,
        lease: Option<Duration>,
        lease_ms: u64,
        field: &Arc<str>,
        wait: Option<Duration>,
        interrupt: Option<&Interrupt>,
    ) -> Result<Option<LockGuard<K>>> {
        let stand_back = self
            .keys
            .kind
            .shared_channel()
            .is_some_and(|channel| self.client.pubsub().handoff_pending(channel));
        if !stand_back {
            let started = Instant::now();
            if let Attempt::Acquired { grant, holds } = self.try_acquire(lease_ms, field, true)? {
                let field = Arc::clone(field);
                return Ok(Some(self.guard(lease, field, started, grant, holds)));
            }
        }
        self.acquire_slow(lease, lease_ms, field, wait, interrupt, stand_back)
    }

    /// The contended path: subscribe, try again, park until woken or the
    /// lock's TTL runs out, and repeat. A kind without pub/sub (the spin
    /// lock) backs off instead of subscribing. With `stand_back` the thread
    /// parks behind the local waiters first (at most [`HANDOFF_GRACE`]).
    #[cold]
    fn acquire_slow(
        &self,
        lease: Option<Duration>,
        lease_ms: u64,
        field: &Arc<str>,
        wait: Option<Duration>,
        interrupt: Option<&Interrupt>,
        stand_back: bool,
    ) -> Result<Option<LockGuard<K>>> {
        // A wait too long to represent is no wait limit at all.
        let deadline = wait.and_then(|w| Instant::now().checked_add(w));
        let left = |now: Instant| deadline.map(|d| d.saturating_duration_since(now));
        let confirm_for = left(Instant::now()).unwrap_or(Duration::MAX);
        let subscription = self
            .keys
            .kind
            .wait_channel(field)
            .map(|channel| self.client.pubsub().subscribe(&channel, confirm_for));
        let mut failures = 0u32;
        // Whether the last park ended with a wake-up handed to this waiter:
        // leaving without trying the lock must pass it on to the next one.
        let mut handed_wake_up = false;
        let pass_on = |handed: bool| {
            if let (true, Some(subscription)) = (handed, &subscription) {
                subscription.pass_on();
            }
        };
        if let (true, Some(subscription)) = (stand_back, &subscription) {
            let grace = left(Instant::now()).map_or(HANDOFF_GRACE, |l| l.min(HANDOFF_GRACE));
            let woke = {
                let _parked = self.client.parked_thread();
                subscription.park(grace, interrupt)
            };
            match woke {
                Wake::Interrupted => return Err(self.interrupted()),
                woke => handed_wake_up = woke == Wake::Notified,
            }
        }
        loop {
            if interrupt.is_some_and(Interrupt::is_triggered) {
                pass_on(handed_wake_up);
                return Err(self.interrupted());
            }
            let started = Instant::now();
            let attempt = self.try_acquire(lease_ms, field, true);
            if attempt.is_err() {
                pass_on(handed_wake_up);
            }
            if let (true, Some(subscription)) = (handed_wake_up, &subscription) {
                // The woken waiter has had its turn: newcomers may try.
                subscription.handoff_done();
            }
            let ttl = match attempt? {
                Attempt::Acquired { grant, holds } => {
                    if handed_wake_up {
                        self.client.count_handoff();
                    }
                    let field = Arc::clone(field);
                    return Ok(Some(self.guard(lease, field, started, grant, holds)));
                }
                Attempt::Busy(ttl) => ttl,
            };
            let mut park = match ttl {
                // The lock vanished between our checks: try again at once.
                -2 => Duration::ZERO,
                // A key without expiry, made by someone else: rely on the
                // release message, but look again now and then.
                ttl if ttl < 0 => self.client.watchdog_timeout(),
                // At least 1 ms: a lock about to expire reports 0, and
                // retrying in a tight loop would only load Redis.
                ttl => Duration::from_millis(ttl.max(1) as u64),
            };
            if let Some(backoff) = self.keys.kind.backoff(failures) {
                park = park.min(backoff);
            }
            failures = failures.saturating_add(1);
            if let Some(left) = left(Instant::now()) {
                if left.is_zero() {
                    return Ok(None);
                }
                park = park.min(left);
            }
            let woke = {
                let _parked = self.client.parked_thread();
                match &subscription {
                    Some(subscription) => subscription.park(park, interrupt),
                    None if interrupt::sleep(park, interrupt) => Wake::Interrupted,
                    None => Wake::TimedOut,
                }
            };
            if woke == Wake::Interrupted {
                return Err(self.interrupted());
            }
            handed_wake_up = woke == Wake::Notified;
        }
    }

    /// Tells the kind that this thread stopped waiting without the lock (a
    /// fair lock then leaves its queue). Best effort: a waiter that cannot
    /// say so is dropped from the queue once its deadline passes.
    fn give_up(&self, field: &str) {
        if let Err(e) = self.keys.kind.give_up(self.target(), field) {
            log::debug!(
                "redhold: leaving the queue of {:?} failed: {e}",
                names::shorten(self.name())
            );
        }
    }

    /// One acquire attempt. An acquire that the replicas did not confirm
    /// in time (`sync_replicas`) is undone before the error is returned.
    fn try_acquire(
        &self,
        lease_ms: u64,
        field: &str,
        may_queue: bool,
    ) -> Result<Attempt<K::Grant>> {
        self.client.check_open()?;
        let attempt = self
            .keys
            .kind
            .try_acquire(self.target(), lease_ms, field, may_queue)
            .map_err(|e| self.wrong_kind(e));
        if let Err(Error::ReplicasNotSynced { .. }) = &attempt {
            let request_id = self.client.next_request_id();
            match self.keys.kind.release(self.target(), field, &request_id) {
                // The undo itself is not replicated either, but it stands
                // on the master, which is what the next acquire checks.
                Ok(_) | Err(Error::ReplicasNotSynced { .. }) => {}
                Err(e) => log::warn!(
                    "redhold: undoing an unreplicated acquire of {:?} failed: {e}; \
                     the hold expires after its lease",
                    names::shorten(self.name())
                ),
            }
        }
        attempt
    }

    fn guard(
        &self,
        lease: Option<Duration>,
        field: Arc<str>,
        started: Instant,
        grant: K::Grant,
        holds: u32,
    ) -> LockGuard<K> {
        let (record, orphans) = self.client.renewals().add(
            &self.keys.name,
            &field,
            self.keys.kind.renew_kind(),
            started,
            holds,
            lease.is_none(),
        );
        if orphans > 0 {
            self.release_orphans(&field, orphans);
        }
        let renewal = match lease {
            None => Renewal::Watched,
            // Counted from before the request: the key may expire a little
            // earlier than our clock says, never later.
            Some(lease) => Renewal::Leased {
                expires_at: started.checked_add(lease),
            },
        };
        LockGuard::new(self.clone(), Hold { record, renewal }, grant)
    }

    /// Gives back holds Redis counts for this thread that no guard stands
    /// for: an acquire retried after its reply was lost, which counted
    /// twice, or holds of a generation judged lost that Redis still had.
    /// Left alone they would keep the lock after the last guard's release
    /// until its TTL ran out. Best effort: a failure costs only that delay.
    #[cold]
    fn release_orphans(&self, field: &str, orphans: u32) {
        for _ in 0..orphans.min(MAX_ORPHANS_RELEASED) {
            let request_id = self.client.next_request_id();
            if let Err(e) = self.keys.kind.release(self.target(), field, &request_id) {
                log::warn!(
                    "redhold: giving back a hold of {:?} counted twice failed: {e}; \
                     the lock stays held until its TTL runs out",
                    names::shorten(self.name())
                );
                return;
            }
        }
    }

    // ---- releasing ----

    /// Releases one hold. Retries are safe: the script remembers each
    /// request's reply for a while (the unlock latch).
    pub(crate) fn release(&self, hold: &Hold) -> Result<()> {
        self.client.check_open()?;
        // Forget the hold first: if the release then fails, the lock expires
        // on its own instead of being renewed forever. A hold of a
        // generation that is over is not released at all: the thread's
        // current holds (same hash field) would be the ones released.
        let which = match hold.renewal {
            Renewal::Unguarded => Which::Unguarded,
            _ => Which::Guard {
                watched: hold.is_watched(),
            },
        };
        if !self.client.renewals().release_one(&hold.record, which) {
            return Err(self.lost());
        }
        let request_id = self.client.next_request_id();
        let reply = self
            .keys
            .kind
            .release(self.target(), &hold.record.field, &request_id)
            .map_err(|e| self.wrong_kind(e))?;
        match reply {
            Some(freed) => {
                if freed == 1 {
                    if let Some(channel) = self.keys.kind.shared_channel() {
                        self.client.pubsub().released(channel, HANDOFF_GRACE);
                    }
                }
                Ok(())
            }
            None => {
                // Redis has no hold of ours: the generation's other guards
                // are stale too.
                self.client.renewals().mark_lost(&hold.record);
                Err(self.lost())
            }
        }
    }

    // ---- helpers ----

    fn validate(&self) -> Result<()> {
        names::validate(&self.keys.name)
    }

    fn target(&self) -> Target<'_> {
        Target {
            client: &self.client,
            name: &self.keys.name,
        }
    }

    /// The calling thread's field in this lock's hash.
    fn field(&self) -> Arc<str> {
        Arc::from(self.keys.kind.holder_field(self.client.current_field()))
    }

    fn watchdog_millis(&self) -> u64 {
        self.client.watchdog_timeout().as_millis() as u64
    }

    fn wrong_kind(&self, e: Error) -> Error {
        crate::kind::wrong_kind(&self.keys.name, K::DESCRIPTION, e)
    }

    fn lost(&self) -> Error {
        Error::LockLost {
            lock: names::shorten(&self.keys.name),
        }
    }

    fn interrupted(&self) -> Error {
        Error::Interrupted {
            lock: names::shorten(&self.keys.name),
        }
    }
}

impl<K: LockKind> fmt::Debug for Lock<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lock")
            .field("kind", &self.keys.kind)
            .field("name", &names::shorten(&self.keys.name))
            .field("client", &self.client.id())
            .finish()
    }
}
