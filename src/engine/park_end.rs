//! How a waiting call's park ends: how long it parks on a lock's TTL,
//! which wake-ups end the call (an interrupt, the lock handed over by a
//! local release), and what a waiter that leaves without its attempt
//! clears.

use std::time::{Duration, Instant};

use super::finish::Acquired;
use super::Call;
use crate::hold::Hold;
use crate::kind::sealed::KindOps;
use crate::pubsub::Wake;

impl<K: KindOps> Call<'_, K> {
    /// How long a waiter that found the lock busy with `ttl` left parks
    /// (the `failures`-th time), unless a release wakes it first.
    pub(super) fn ttl_park(&self, ttl: i64, failures: u32) -> Duration {
        let park = match ttl {
            // The lock vanished between our checks: try again at once.
            -2 => Duration::ZERO,
            // A key without expiry, made by someone else: rely on the
            // release message, but look again now and then.
            ttl if ttl < 0 => self.engine.watchdog_timeout(),
            // At least 1 ms: a lock about to expire reports 0, and
            // retrying in a tight loop would only load Redis.
            ttl => Duration::from_millis(ttl.max(1) as u64),
        };
        match self.lock.kind.backoff(failures) {
            Some(backoff) => park.min(backoff),
            None => park,
        }
    }

    /// A waiter leaves without an attempt that would re-enter a lock
    /// handed over unconfirmed (`maybe_handed`): shutdown, an interrupt, an
    /// outage past its limits. Clears that trace (best effort: during an
    /// outage Redis is likely still away, and the trace expires with its
    /// lease).
    pub(super) fn leave_unsettled(&self, maybe_handed: bool) {
        if maybe_handed {
            self.give_back_trace();
        }
    }

    /// How a park that ended with `woke` ends the call, if it does: an
    /// interrupt, or the lock handed over by a local release. `None`: try
    /// the lock again (after a wake-up handed to this waiter, or not).
    pub(super) fn park_ended_call(&self, woke: Wake) -> Option<Acquired<K::Grant>> {
        match woke {
            Wake::Interrupted => Some(Err(self.interrupted())),
            Wake::HandedOver { at, token } => {
                self.handed_over(at, token).map(|taken| Ok(Some(taken)))
            }
            Wake::Notified | Wake::Unsettled | Wake::TimedOut => None,
        }
    }

    /// A local release handed this thread the lock (one hold, its lease,
    /// set no earlier than `at`, and `token` when the kind draws one), and
    /// recorded the hold as it did (`RenewalMap::add_handed`): claims it.
    /// `None` when the grant cannot be had (a kind never handed over, a
    /// fenced hand-over without its token), which no release does, or when
    /// the hold's generation has ended since (it was found lost): the
    /// caller's next attempt then takes the lock anew, or re-enters and
    /// gives back a hold counted twice.
    pub(super) fn handed_over(&self, at: Instant, token: Option<u64>) -> Option<(Hold, K::Grant)> {
        let grant = self.lock.kind.handed_over_grant(token)?;
        let record = self
            .engine
            .renewals
            .claim_handed(self.lock.name, &self.field, at)?;
        let renewal = self.renewal_from(at);
        Some((Hold { record, renewal }, grant))
    }
}
