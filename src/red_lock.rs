//! RedLock: a lock held on a majority of independent Redis servers.

use std::fmt;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::guard::LockGuard;
use crate::holding::{Holding, ThisThread};
use crate::interrupt::{self, Interrupt};
use crate::kind::Reentrant;
use crate::lock::Lock;
use crate::multi_lock::release_all;
use crate::names;
use crate::owner::Owner;
use crate::red_lock_guard::{release_unsure, RedLockGuard};

/// Longest pause between two rounds; each pause is random below it, so that
/// competing clients do not keep splitting the servers between them.
pub(crate) const MAX_RETRY_PAUSE: Duration = Duration::from_millis(50);

/// The RedLock algorithm over N independent servers: the lock is held when
/// a majority (N/2 + 1) of its per-server [`Lock`]s were taken within the
/// lease, with time to spare.
///
/// Give it one lock per server, each from its own [`Client`](crate::Client)
/// (build those clients with few or no retries, so that a dead server costs
/// little time). Each round tries every server once without waiting; if no
/// majority was reached, everything taken is released and the next round
/// starts after a short random pause, until the wait runs out.
///
/// # Safety limits
///
/// RedLock assumes bounded process pauses, network delays and clock drift.
/// A holder paused (GC-like stall, swapped out, stopped) for longer than the
/// remaining [`validity`](RedLockGuard::validity) may still act as if it held
/// the lock after it expired; a server whose clock jumps forward expires
/// locks early; a server that restarts without persistence forgets them. See
/// Martin Kleppmann, "How to do distributed locking" (2016). Where
/// correctness matters, protect the resource with a
/// [`FencedLock`](crate::FencedLock) token checked by the storage itself.
///
/// A restarted server is the limit operators can act on: keep a server
/// that restarted without its data out of service for longer than the
/// longest lease or watchdog timeout in use (every lock it had forgotten has
/// then expired on the others too), or run every server with
/// `appendonly yes` and `appendfsync always`. The library does not enforce
/// the delay itself (see `docs/lock-kinds.md`).
///
/// ```no_run
/// # fn main() -> redhold::Result<()> {
/// use std::time::Duration;
/// let servers = ["redis://10.0.0.1/", "redis://10.0.0.2/", "redis://10.0.0.3/"];
/// let mut locks = Vec::new();
/// for url in servers {
///     let client = redhold::Client::builder().url(url).retry_attempts(0).build()?;
///     locks.push(client.lock("report"));
/// }
/// let red = redhold::RedLock::new(locks);
/// if let Some(guard) = red.try_lock_for_with_lease(Duration::from_secs(1), Duration::from_secs(10))? {
///     println!("valid for {:?}", guard.validity());
/// }
/// # Ok(()) }
/// ```
///
/// [`for_owner`](Self::for_owner) takes it for an [`Owner`] instead of the
/// calling thread; its guard may then move to other threads.
#[derive(Clone)]
pub struct RedLock<H: Holding = ThisThread> {
    locks: Vec<Lock<Reentrant, H>>,
    holder: H,
}

impl RedLock {
    /// A RedLock over `locks`, one per independent server. An empty list is
    /// reported by the first call that locks ([`Error::InvalidArgument`]).
    pub fn new(locks: Vec<Lock>) -> Self {
        RedLock {
            locks,
            holder: ThisThread,
        }
    }
}

impl<H: Holding> RedLock<H> {
    /// Its per-server locks.
    pub(crate) fn locks(&self) -> &[Lock<Reentrant, H>] {
        &self.locks
    }

    /// Who its holds are for.
    pub(crate) fn holder(&self) -> H {
        self.holder
    }

    /// The same RedLock, taken and released for `owner` instead of the
    /// calling thread (see [`Lock::for_owner`]).
    pub fn for_owner(&self, owner: Owner) -> RedLock<Owner> {
        RedLock {
            locks: self
                .locks
                .iter()
                .map(|lock| lock.for_owner(owner))
                .collect(),
            holder: owner,
        }
    }

    /// How many per-server locks make a majority.
    pub fn quorum(&self) -> usize {
        self.locks.len() / 2 + 1
    }

    /// Waits until a majority is held; the watchdog renews the per-server
    /// locks, and the validity counts from the watchdog timeout.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for an empty list, [`Error::InvalidName`];
    /// errors of single servers only count as failed votes.
    pub fn lock(&self) -> Result<RedLockGuard<H>> {
        match self.acquire(None, None, None)? {
            Some(guard) => Ok(guard),
            None => unreachable!("an unbounded wait ended without the lock"),
        }
    }

    /// Waits until a majority is held for `lease`.
    ///
    /// # Errors
    ///
    /// As [`lock`](Self::lock), and [`Error::InvalidArgument`] for a lease
    /// under one millisecond.
    pub fn lock_with_lease(&self, lease: Duration) -> Result<RedLockGuard<H>> {
        match self.acquire(Some(lease), None, None)? {
            Some(guard) => Ok(guard),
            None => unreachable!("an unbounded wait ended without the lock"),
        }
    }

    /// Waits until a majority is held, or `interrupt` is triggered.
    ///
    /// # Errors
    ///
    /// As [`lock`](Self::lock), and [`Error::Interrupted`].
    pub fn lock_interruptibly(&self, interrupt: &Interrupt) -> Result<RedLockGuard<H>> {
        match self.acquire(None, None, Some(interrupt))? {
            Some(guard) => Ok(guard),
            None => unreachable!("an unbounded wait ended without the lock"),
        }
    }

    /// One round: takes the lock if a majority is free now.
    ///
    /// # Errors
    ///
    /// As [`lock`](Self::lock).
    pub fn try_lock(&self) -> Result<Option<RedLockGuard<H>>> {
        self.acquire(None, Some(Duration::ZERO), None)
    }

    /// Tries for at most `wait`.
    ///
    /// # Errors
    ///
    /// As [`lock`](Self::lock).
    pub fn try_lock_for(&self, wait: Duration) -> Result<Option<RedLockGuard<H>>> {
        self.acquire(None, Some(wait), None)
    }

    /// Tries for at most `wait` to hold a majority for `lease`.
    ///
    /// # Errors
    ///
    /// As [`lock_with_lease`](Self::lock_with_lease).
    pub fn try_lock_for_with_lease(
        &self,
        wait: Duration,
        lease: Duration,
    ) -> Result<Option<RedLockGuard<H>>> {
        self.acquire(Some(lease), Some(wait), None)
    }

    fn acquire(
        &self,
        lease: Option<Duration>,
        wait: Option<Duration>,
        interrupt: Option<&Interrupt>,
    ) -> Result<Option<RedLockGuard<H>>> {
        if self.locks.is_empty() {
            return Err(Error::InvalidArgument {
                what: "lock list",
                reason: "a RedLock needs at least one lock".into(),
            });
        }
        for lock in &self.locks {
            names::validate(lock.name())?;
        }
        // How long the acquired locks live before renewal: the lease, or the
        // shortest watchdog timeout among the servers' clients.
        let ttl = lease.unwrap_or_else(|| {
            self.locks
                .iter()
                .map(|l| l.client().watchdog_timeout())
                .min()
                .unwrap_or_default()
        });
        // Clock drift allowance, as in the RedLock description: 1% + 2 ms.
        let drift = ttl / 100 + Duration::from_millis(2);
        let deadline = wait.and_then(|w| Instant::now().checked_add(w));
        loop {
            if interrupt.is_some_and(Interrupt::is_triggered) {
                return Err(Error::Interrupted {
                    lock: names::shorten(self.locks[0].name()),
                });
            }
            let started = Instant::now();
            if let Some((guards, unsure)) = self.round(lease)? {
                let guard = RedLockGuard {
                    guards,
                    unsure,
                    quorum: self.quorum(),
                    lease,
                    started,
                    drift,
                    queued_drop: false,
                };
                let spent = started.elapsed();
                if ttl > spent + drift {
                    return Ok(Some(guard));
                }
                log::debug!("redhold RedLock: majority reached too late ({spent:?} of {ttl:?})");
                let _ = guard.unlock();
            }
            let now = Instant::now();
            let pause = match deadline {
                Some(d) if now >= d => return Ok(None),
                Some(d) => random_below(MAX_RETRY_PAUSE).min(d - now),
                None => random_below(MAX_RETRY_PAUSE),
            };
            if interrupt::sleep(pause, interrupt) {
                return Err(Error::Interrupted {
                    lock: names::shorten(self.locks[0].name()),
                });
            }
        }
    }

    /// Tries every server once. Returns the guards and the servers whose
    /// reply was lost when a majority was taken; otherwise releases what was
    /// (or may have been) taken and returns `None`.
    fn round(&self, lease: Option<Duration>) -> Result<Option<Taken<H>>> {
        let quorum = self.quorum();
        let mut guards = Vec::with_capacity(self.locks.len());
        let mut unsure = Vec::new();
        let mut refused = 0;
        // Servers that can never grant the lock (their client is shut down,
        // or the name holds another kind there), and the first such error.
        let mut hopeless = (0, None);
        for lock in &self.locks {
            match lock.acquire(lease, Some(Duration::ZERO), None) {
                Ok(Some(guard)) => guards.push(guard),
                Ok(None) => refused += 1,
                Err(e @ (Error::InvalidArgument { .. } | Error::InvalidName { .. })) => {
                    let _ = release_all(guards);
                    release_unsure(unsure);
                    return Err(e);
                }
                Err(
                    e @ (Error::Shutdown | Error::ForkedProcess { .. } | Error::WrongKind { .. }),
                ) => {
                    // Nothing was sent (or nothing was changed): not unsure.
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
                    // The request may have taken the lock before its reply
                    // was lost: release it with the others, whenever that is.
                    unsure.push(lock.clone());
                }
            }
            if self.locks.len() - refused < quorum {
                break;
            }
        }
        if guards.len() >= quorum {
            return Ok(Some((guards, unsure)));
        }
        let _ = release_all(guards);
        release_unsure(unsure);
        match hopeless {
            // Too few servers left that could ever grant it: waiting on
            // would never end.
            (count, Some(e)) if self.locks.len() - count < quorum => Err(e),
            _ => Ok(None),
        }
    }
}

/// What a round that reached a majority took: the guards of the servers
/// that granted the lock, and the servers whose reply was lost.
type Taken<H> = (Vec<LockGuard<Reentrant, H>>, Vec<Lock<Reentrant, H>>);

/// A random duration in `[0, max)`, from the OS's random source.
pub(crate) fn random_below(max: Duration) -> Duration {
    let (random, _) = uuid::Uuid::new_v4().as_u64_pair();
    let nanos = u64::try_from(max.as_nanos().max(1)).unwrap_or(u64::MAX);
    Duration::from_nanos(random % nanos)
}

impl<H: Holding> fmt::Debug for RedLock<H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedLock")
            .field("locks", &self.locks)
            .field("quorum", &self.quorum())
            .finish()
    }
}
