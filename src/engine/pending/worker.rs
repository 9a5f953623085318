//! The release worker: rounds of one attempt per pending release, with a
//! growing pause while Redis does not answer (see `pending.rs`).

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{Pending, Shared, FIRST_PAUSE, MAX_PAUSE};
use crate::error::{is_transient, Error, Result};
use crate::kind::{Target, GONE_ON_RETRY};
use crate::names;
use crate::server::request::retry_bound;
use crate::server::Server;

impl Shared {
    /// The worker: rounds of one attempt per pending release, with a
    /// growing pause while Redis does not answer.
    pub(super) fn work(self: Arc<Self>) {
        // These are our own holds: given back even while shutting down.
        let _giving_back = self.server.giving_back();
        let mut pause = FIRST_PAUSE;
        loop {
            let stop_at = *self.stop_at.lock();
            let round: Vec<Arc<Pending>> = self.queue.lock().clone();
            if round.is_empty() || stop_at.is_some_and(|at| Instant::now() >= at) {
                if stop_at.is_some() {
                    self.abandon_all();
                    return;
                }
                let mut queue = self.queue.lock();
                if queue.is_empty() {
                    self.wake.wait_for(&mut queue, MAX_PAUSE);
                }
                pause = FIRST_PAUSE;
                continue;
            }
            let mut failed = false;
            for pending in round {
                // An acquire of the same lock may be settling it right now.
                let Some(_busy) = pending.busy.try_lock() else {
                    continue;
                };
                let deadline = attempt_deadline(&self.server, stop_at);
                failed |= self.attempt(&pending, Some(deadline)).is_err();
            }
            if failed {
                let mut queue = self.queue.lock();
                self.wake.wait_for(&mut queue, jittered(pause));
                pause = pause.saturating_mul(2).min(MAX_PAUSE);
            }
        }
    }

    /// One attempt of `pending` (the caller holds its `busy` lock).
    pub(super) fn attempt(&self, pending: &Arc<Pending>, deadline: Option<Instant>) -> Result<()> {
        if pending.settled.load(Ordering::SeqCst) {
            return Ok(());
        }
        if !self.latch_outlives(pending, deadline) {
            // Sent now, the request could find its latch gone and release
            // a second hold. It is not sent again: it ran or it never
            // will. A hold it did not release is one Redis counts beyond
            // the generation's guards, which the generation's last release
            // or the thread's next acquire of the lock gives back.
            if pending.record.is_some() {
                log::debug!(
                    "redhold: the release of lock {:?} was not confirmed while its latch \
                     lived; not sent again",
                    names::shorten(&pending.name)
                );
            } else {
                log::warn!(
                    "redhold: semaphore {:?}: an acquire whose reply was lost could not be \
                     given back while its request latch lived; what it took stays taken",
                    names::shorten(&pending.name)
                );
            }
            self.settled(pending);
            return Ok(());
        }
        // Not before the undos behind the thread's late acquires of the lock
        // have run (see `Engine::release`); until then, like an outage.
        self.undos.settle(&pending.name, &pending.field, deadline)?;
        let target = Target {
            server: &self.server,
            name: &pending.name,
            deadline,
            attempts_made: Some(&pending.attempts_made),
            late: None,
            undo_above: None,
            recorder: None,
        };
        let outcome = (pending.run)(target, &pending.field, &pending.request_id);
        match outcome {
            Ok(Some(GONE_ON_RETRY)) | Ok(None) => {
                // Redis had no hold of ours: the hold was lost before its
                // release; the generation's other guards are stale too.
                if let Some(record) = &pending.record {
                    self.renewals.mark_lost(record);
                }
                log::warn!(
                    "redhold: the lock {:?} had been lost before its release on guard drop",
                    names::shorten(&pending.name)
                );
                self.settled(pending);
                Ok(())
            }
            Ok(Some(_)) => {
                self.settled(pending);
                Ok(())
            }
            Err(Error::Redis(e)) if is_transient(&e) => {
                if self.certainly_expired(pending) {
                    log::warn!(
                        "redhold: releasing lock {:?} on guard drop was never confirmed ({e}); \
                         its TTL has run out meanwhile",
                        names::shorten(&pending.name)
                    );
                    self.settled(pending);
                }
                Err(Error::Redis(e))
            }
            Err(e) => {
                // Not an outage (a forked child, a wrong kind): retrying
                // would not help.
                log::warn!(
                    "redhold: releasing lock {:?} on guard drop failed: {}",
                    names::shorten(&pending.name),
                    e.report()
                );
                self.settled(pending);
                Err(e)
            }
        }
    }

    /// Whether an attempt that ends by `deadline` (the retry rule's bound
    /// without one) reaches Redis while the request's latch surely lives.
    fn latch_outlives(&self, pending: &Pending, deadline: Option<Instant>) -> bool {
        let arrives_by =
            deadline.or_else(|| Instant::now().checked_add(retry_bound(self.server.config())));
        match (arrives_by, pending.latch_alive_until) {
            (Some(arrives_by), Some(alive_until)) => arrives_by < alive_until,
            _ => false,
        }
    }

    /// Whether the released hold has expired in Redis for sure: its
    /// generation ended here (nothing renews the key any more) and the
    /// longest TTL it may have had, counted generously, is over.
    fn certainly_expired(&self, pending: &Pending) -> bool {
        // A give-back ends only by running, or with its latch.
        let Some(record) = &pending.record else {
            return false;
        };
        if record.is_live() {
            return false;
        }
        let config = self.server.config();
        let slack = config
            .connect_timeout
            .saturating_add(config.response_timeout)
            .saturating_mul(2);
        let renewed_until = record
            .last_confirmed()
            .checked_add(config.watchdog_timeout.saturating_add(slack));
        let now = Instant::now();
        renewed_until.is_some_and(|at| now >= at)
            && pending
                .lease_end
                .is_none_or(|end| end.checked_add(slack).is_some_and(|at| now >= at))
    }

    pub(super) fn settled(&self, pending: &Arc<Pending>) {
        pending.settled.store(true, Ordering::SeqCst);
        self.queue.lock().retain(|p| !Arc::ptr_eq(p, pending));
    }

    /// Shutdown came before Redis confirmed these: their locks expire
    /// after their TTL (the watchdog no longer renews them).
    pub(super) fn abandon_all(&self) {
        for pending in self.queue.lock().drain(..) {
            pending.settled.store(true, Ordering::SeqCst);
            log::warn!(
                "redhold: the release of lock {:?} was not confirmed before shutdown; \
                 the lock expires after its TTL",
                names::shorten(&pending.name)
            );
        }
    }
}

/// One response timeout from now, cut to the shutdown deadline.
fn attempt_deadline(server: &Server, stop_at: Option<Instant>) -> Instant {
    let now = Instant::now();
    let one = now
        .checked_add(server.config().response_timeout)
        .unwrap_or(now);
    stop_at.map_or(one, |stop| one.min(stop))
}

/// Between half of `pause` and all of it, at random.
fn jittered(pause: Duration) -> Duration {
    let half = pause / 2;
    let span = u64::try_from(half.as_nanos()).unwrap_or(u64::MAX);
    let random = RandomState::new().hash_one(Instant::now());
    half + Duration::from_nanos(random % span.saturating_add(1))
}
