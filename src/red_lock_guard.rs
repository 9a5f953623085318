//! The guard of a [`RedLock`](crate::RedLock): the per-server holds that
//! make its majority, how long they are certainly valid, and their release.

use std::fmt;
use std::mem;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::guard::LockGuard;
use crate::holding::{Holding, ThisThread};
use crate::kind::Reentrant;
use crate::lock::Lock;
use crate::multi_lock::release_all;

/// Holds a RedLock: the per-server locks that were taken (a majority).
///
/// Dropping it releases them, and also tries the servers whose reply was
/// lost while acquiring: their request may have taken the lock after all.
#[must_use = "if unused the lock will immediately unlock"]
pub struct RedLockGuard<H: Holding = ThisThread> {
    pub(crate) guards: Vec<LockGuard<Reentrant, H>>,
    /// Servers whose acquire failed without a reply (error, timeout): they
    /// may hold the lock for us anyway, so they are released with the rest.
    pub(crate) unsure: Vec<Lock<Reentrant, H>>,
    pub(crate) quorum: usize,
    /// The lease, or `None` when the watchdog renews the per-server locks.
    pub(crate) lease: Option<Duration>,
    /// When the round started, from which a lease runs.
    pub(crate) started: Instant,
    /// The clock drift allowance, subtracted from every expiry.
    pub(crate) drift: Duration,
    /// Taken by an async call: its drop queues the releases on the
    /// client's threads instead of waiting for them.
    pub(crate) queued_drop: bool,
}

/// Releases the locks of servers whose acquire reply was lost. A server
/// where the acquire did not happen answers `NotHeld`; one still unreachable
/// lets the lock expire after its lease or watchdog timeout.
pub(crate) fn release_unsure<H: Holding>(unsure: Vec<Lock<Reentrant, H>>) {
    for lock in unsure {
        match lock.unlock() {
            Ok(()) | Err(Error::NotHeld { .. }) => {}
            Err(e) => log::debug!(
                "redhold RedLock: releasing {:?} on a server that did not answer the \
                 acquire failed ({}); it expires on its own",
                lock,
                e.report()
            ),
        }
    }
}

impl<H: Holding> RedLockGuard<H> {
    /// How much longer the lock is certainly held on a majority; do the
    /// protected work within it.
    ///
    /// For each server still held, its lock certainly lives until its TTL,
    /// counted from when the last confirmation was requested: the acquire
    /// with a lease, and the latest successful watchdog renewal without one
    /// (so the validity grows back with every renewal). The validity is the
    /// time left until the quorum-th longest of those ends, minus the clock
    /// drift allowance (1% of the TTL + 2 ms). It is zero once fewer than a
    /// quorum of servers are believed held.
    pub fn validity(&self) -> Duration {
        let mut ends: Vec<Instant> = self
            .guards
            .iter()
            .filter(|guard| guard.is_held())
            .filter_map(|guard| self.held_until(guard))
            .collect();
        if ends.len() < self.quorum {
            return Duration::ZERO;
        }
        ends.sort_unstable_by(|a, b| b.cmp(a));
        let end = ends[self.quorum - 1];
        end.checked_sub(self.drift).map_or(Duration::ZERO, |end| {
            end.saturating_duration_since(Instant::now())
        })
    }

    /// Until when one server's lock certainly lives in Redis, if known.
    fn held_until(&self, guard: &LockGuard<Reentrant, H>) -> Option<Instant> {
        let lock = guard.lock();
        match self.lease {
            Some(lease) => self.started.checked_add(lease),
            // The guard's hold record, as the watchdog updates it.
            None => guard
                .hold()
                .record
                .last_confirmed()
                .checked_add(lock.client().watchdog_timeout()),
        }
    }

    /// Whether a majority of the per-server locks is still believed held
    /// (no I/O); see [`LockGuard::is_held`].
    pub fn is_held(&self) -> bool {
        self.guards.iter().filter(|g| g.is_held()).count() >= self.quorum
    }

    /// How many servers granted the lock.
    pub fn servers_held(&self) -> usize {
        self.guards.len()
    }

    /// Releases the lock on every server that granted it, and on the
    /// servers whose acquire reply was lost (their errors are not reported:
    /// the lock may never have been taken there).
    ///
    /// # Errors
    ///
    /// The first error of [`LockGuard::unlock`], after trying them all.
    pub fn unlock(mut self) -> Result<()> {
        self.release()
    }

    fn release(&mut self) -> Result<()> {
        let released = release_all(mem::take(&mut self.guards));
        release_unsure(mem::take(&mut self.unsure));
        released
    }

    /// The drop of an async call's guard: each server's guard queues its
    /// own release, and the servers whose reply was lost are released on
    /// the client's threads.
    fn release_queued(&mut self) {
        drop(mem::take(&mut self.guards));
        let unsure = mem::take(&mut self.unsure);
        let Some(first) = unsure.first() else {
            return;
        };
        let engine = std::sync::Arc::clone(first.client().engine());
        if let Err(e) = engine
            .tasks()
            .spawn(Box::new(move || release_unsure(unsure)))
        {
            log::debug!(
                "redhold RedLock: servers that did not answer the acquire are left to their \
                 lease ({})",
                e.report()
            );
        }
    }
}

impl RedLockGuard<crate::owner::Owner> {
    /// Releases the lock on every server that granted it (and those whose
    /// reply was lost) on the client's threads, and reports the first
    /// error: the async form of [`unlock`](Self::unlock).
    ///
    /// # Errors
    ///
    /// As [`unlock`](Self::unlock).
    pub fn unlock_async(self) -> crate::lock::UnlockFuture {
        let engine = self
            .guards
            .first()
            .map(|guard| std::sync::Arc::clone(guard.lock().client().engine()));
        match engine {
            Some(engine) => crate::lock::UnlockFuture::new(
                crate::tasks::offloaded::Offloaded::spawn(engine.tasks(), move || self.unlock()),
            ),
            None => {
                crate::lock::UnlockFuture::new(crate::tasks::offloaded::Offloaded::done(Ok(())))
            }
        }
    }
}

impl<H: Holding> Drop for RedLockGuard<H> {
    fn drop(&mut self) {
        if self.queued_drop {
            return self.release_queued();
        }
        if let Err(e) = self.release() {
            log::warn!(
                "redhold: releasing a RedLock on guard drop failed: {}",
                e.report()
            );
        }
    }
}

impl<H: Holding> fmt::Debug for RedLockGuard<H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedLockGuard")
            .field("servers_held", &self.guards.len())
            .field("servers_unsure", &self.unsure.len())
            .field("quorum", &self.quorum)
            .field("validity", &self.validity())
            .finish()
    }
}
