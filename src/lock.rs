//! The reentrant distributed lock (Redisson's `RLock`).

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::client::Client;
use crate::config::lease_millis;
use crate::error::{Error, Result};
use crate::guard::{Hold, LockGuard};
use crate::interrupt::Interrupt;
use crate::names;
use crate::pubsub::Wake;
use crate::scripts;

/// A handle on one named reentrant lock held in Redis.
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
#[derive(Clone)]
pub struct Lock {
    client: Client,
    keys: Arc<Keys>,
}

/// The Redis names of one lock.
struct Keys {
    name: Arc<str>,
    channel: String,
}

impl Lock {
    pub(crate) fn new(client: Client, name: String) -> Lock {
        let channel = names::lock_channel(&name);
        Lock {
            client,
            keys: Arc::new(Keys {
                name: Arc::from(name),
                channel,
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

    /// Waits until the lock is held by the calling thread. The watchdog
    /// renews it until the guard is dropped, so it never expires while this
    /// process runs.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidName`], [`Error::Shutdown`], or [`Error::Redis`] when
    /// Redis cannot be reached within the retries.
    pub fn lock(&self) -> Result<LockGuard> {
        self.acquire_or_wait(None, None, None)
    }

    /// Waits until the lock is held, then lets it expire after `lease` unless
    /// released before; the watchdog does not renew it.
    ///
    /// # Errors
    ///
    /// As [`lock`](Self::lock), and [`Error::InvalidArgument`] for a lease
    /// under one millisecond.
    pub fn lock_with_lease(&self, lease: Duration) -> Result<LockGuard> {
        self.acquire_or_wait(Some(lease), None, None)
    }

    /// Waits until the lock is held, or until `interrupt` is triggered.
    ///
    /// # Errors
    ///
    /// [`Error::Interrupted`] once `interrupt` is triggered (also when it was
    /// triggered before the call), otherwise as [`lock`](Self::lock).
    pub fn lock_interruptibly(&self, interrupt: &Interrupt) -> Result<LockGuard> {
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
    ) -> Result<LockGuard> {
        self.acquire_or_wait(Some(lease), Some(interrupt), None)
    }

    /// Takes the lock if it is free (or already held by this thread), without
    /// waiting. `Ok(None)` means another holder has it.
    ///
    /// # Errors
    ///
    /// As [`lock`](Self::lock).
    pub fn try_lock(&self) -> Result<Option<LockGuard>> {
        self.acquire(None, Some(Duration::ZERO), None)
    }

    /// Waits at most `wait` for the lock; `Ok(None)` when it was not free
    /// in time.
    ///
    /// # Errors
    ///
    /// As [`lock`](Self::lock).
    pub fn try_lock_for(&self, wait: Duration) -> Result<Option<LockGuard>> {
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
    ) -> Result<Option<LockGuard>> {
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
        let deleted: i64 = self.client.run(|conn| {
            scripts::FORCE_RELEASE
                .key(&*self.keys.name)
                .key(&self.keys.channel)
                .arg(scripts::WAKE_ONE)
                .arg(scripts::PUBLISH)
                .invoke(conn)
        })?;
        Ok(deleted == 1)
    }

    /// Releases one hold of the calling thread without a guard, for holds
    /// whose guard was given up with [`LockGuard::leak`].
    ///
    /// # Errors
    ///
    /// [`Error::NotHeld`] when the calling thread holds no hold on the lock,
    /// otherwise as [`lock`](Self::lock).
    pub fn unlock(&self) -> Result<()> {
        self.validate()?;
        let field: Arc<str> = Arc::from(self.client.current_field());
        let record = self.client.renewals().find(&self.keys.name, &field);
        let hold = match record {
            Some(record) => Hold::Watched(record),
            None => Hold::Leased {
                field,
                lease_ms: self.watchdog_millis(),
                expires_at: None,
            },
        };
        match self.release(&hold) {
            Err(Error::LockLost { lock }) => Err(Error::NotHeld { lock }),
            other => other,
        }
    }

    /// Whether any thread of any client holds the lock.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidName`], [`Error::Shutdown`], [`Error::Redis`].
    pub fn is_locked(&self) -> Result<bool> {
        self.validate()?;
        self.client
            .run(|conn| redis::cmd("EXISTS").arg(&*self.keys.name).query(conn))
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
        let field = self.client.current_field();
        let count: Option<u32> = self.client.run(|conn| {
            redis::cmd("HGET")
                .arg(&*self.keys.name)
                .arg(&field)
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
    ) -> Result<LockGuard> {
        match self.acquire(lease, wait, interrupt)? {
            Some(guard) => Ok(guard),
            // Only a bounded wait can end without the lock.
            None => unreachable!("an unbounded wait ended without the lock"),
        }
    }

    /// Takes the lock, waiting at most `wait` (forever when `None`).
    fn acquire(
        &self,
        lease: Option<Duration>,
        wait: Option<Duration>,
        interrupt: Option<&Interrupt>,
    ) -> Result<Option<LockGuard>> {
        self.validate()?;
        let lease_ms = match lease {
            Some(lease) => lease_millis(lease)?,
            None => self.watchdog_millis(),
        };
        if interrupt.is_some_and(Interrupt::is_triggered) {
            return Err(self.interrupted());
        }
        let field: Arc<str> = Arc::from(self.client.current_field());
        let started = Instant::now();
        match self.try_acquire(lease_ms, &field)? {
            None => Ok(Some(self.guard(lease, lease_ms, field, started))),
            Some(_) if wait == Some(Duration::ZERO) => Ok(None),
            Some(_) => self.acquire_slow(lease, lease_ms, field, wait, interrupt),
        }
    }

    /// The contended path: subscribe, try again, park until woken or the
    /// lock's TTL runs out, and repeat.
    #[cold]
    fn acquire_slow(
        &self,
        lease: Option<Duration>,
        lease_ms: u64,
        field: Arc<str>,
        wait: Option<Duration>,
        interrupt: Option<&Interrupt>,
    ) -> Result<Option<LockGuard>> {
        let deadline = wait.map(|w| Instant::now() + w);
        let left = |now: Instant| deadline.map(|d| d.saturating_duration_since(now));
        let confirm_for = left(Instant::now()).unwrap_or(Duration::MAX);
        let subscription = self
            .client
            .pubsub()
            .subscribe(&self.keys.channel, confirm_for);
        loop {
            self.client.check_open()?;
            if interrupt.is_some_and(Interrupt::is_triggered) {
                return Err(self.interrupted());
            }
            let started = Instant::now();
            let ttl = match self.try_acquire(lease_ms, &field)? {
                None => return Ok(Some(self.guard(lease, lease_ms, field, started))),
                Some(ttl) => ttl,
            };
            let mut park = match ttl {
                // The lock vanished between our checks: try again at once.
                -2 => Duration::ZERO,
                // A key without expiry, made by someone else: rely on the
                // release message, but look again now and then.
                ttl if ttl < 0 => self.client.watchdog_timeout(),
                ttl => Duration::from_millis(ttl as u64),
            };
            if let Some(left) = left(Instant::now()) {
                if left.is_zero() {
                    return Ok(None);
                }
                park = park.min(left);
            }
            if subscription.park(park, interrupt) == Wake::Interrupted {
                return Err(self.interrupted());
            }
        }
    }

    /// One acquire script call: `None` when the lock is now ours, else the
    /// holder's remaining TTL in ms.
    fn try_acquire(&self, lease_ms: u64, field: &str) -> Result<Option<i64>> {
        self.client.run(|conn| {
            scripts::ACQUIRE
                .key(&*self.keys.name)
                .arg(lease_ms)
                .arg(field)
                .invoke(conn)
        })
    }

    fn guard(
        &self,
        lease: Option<Duration>,
        lease_ms: u64,
        field: Arc<str>,
        started: Instant,
    ) -> LockGuard {
        let hold = match lease {
            None => Hold::Watched(self.client.renewals().add(&self.keys.name, &field)),
            // Counted from before the request: the key may expire a little
            // earlier than our clock says, never later.
            Some(lease) => Hold::Leased {
                field,
                lease_ms,
                expires_at: started.checked_add(lease),
            },
        };
        LockGuard::new(self.clone(), hold)
    }

    // ---- releasing ----

    /// Releases one hold. Retries are safe: the script remembers each
    /// request's reply for a while (the unlock latch).
    pub(crate) fn release(&self, hold: &Hold) -> Result<()> {
        let (field, lease_ms) = match hold {
            Hold::Watched(record) => {
                if record.is_lost() {
                    return Err(self.lost());
                }
                // Stop renewing first: if the release fails the lock then
                // expires on its own instead of being renewed forever.
                self.client.renewals().remove_one(record);
                (&record.field, self.watchdog_millis())
            }
            Hold::Leased {
                field, lease_ms, ..
            } => (field, *lease_ms),
        };
        let latch = names::unlock_latch(&self.keys.name, &self.client.next_request_id());
        let latch_ttl_ms = self.client.config().unlock_latch_ttl().as_millis() as u64;
        let reply: Option<i64> = self.client.run(|conn| {
            scripts::RELEASE
                .key(&*self.keys.name)
                .key(&self.keys.channel)
                .key(&latch)
                .arg(scripts::WAKE_ONE)
                .arg(lease_ms)
                .arg(&**field)
                .arg(latch_ttl_ms)
                .arg(scripts::PUBLISH)
                .invoke(conn)
        })?;
        match reply {
            Some(_) => Ok(()),
            None => Err(self.lost()),
        }
    }

    // ---- helpers ----

    fn validate(&self) -> Result<()> {
        names::validate(&self.keys.name)
    }

    fn watchdog_millis(&self) -> u64 {
        self.client.watchdog_timeout().as_millis() as u64
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

impl fmt::Debug for Lock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lock")
            .field("name", &names::shorten(&self.keys.name))
            .field("client", &self.client.id())
            .finish()
    }
}
