//! The contended path of an acquire: subscribe to the lock's channel, try
//! again, park until a release is announced or the lock's TTL runs out, and
//! repeat. A waiter never sleeps longer than the TTL, so a lost message
//! costs time, never safety.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{Call, HANDOFF_GRACE};
use crate::error::{Error, Result};
use crate::hold::Hold;
use crate::interrupt::{self, Interrupt};
use crate::kind::sealed::KindOps;
use crate::kind::{Attempt, Handover};
use crate::pubsub::{Offer, Wake};
use crate::stats::Counters;

/// The longest a courtesy pause sleeps before it looks again whether the
/// courtesy still holds.
const COURTESY_SLICE: Duration = Duration::from_micros(500);

/// How an acquire call ends: the hold and its grant, `None` when the wait
/// ran out, or an error.
type Acquired<G> = Result<Option<(Hold, G)>>;

impl<K: KindOps> Call<'_, K> {
    /// A first attempt, unless a local waiter is being handed the lock (then
    /// this thread queues behind it instead of racing it: threads of one
    /// client take turns), then the contended path. A thread that holds the
    /// lock already (a re-entry, maybe of a lock just handed to it) never
    /// stands back: no hand-over would ever come to it.
    pub(super) fn acquire_waiting(
        &self,
        wait: Option<Duration>,
        interrupt: Option<&Interrupt>,
    ) -> Result<Option<(Hold, K::Grant)>> {
        let stand_back = self
            .lock
            .kind
            .shared_channel()
            .is_some_and(|channel| self.engine.pubsub.handoff_pending(channel, self.lock.name))
            && !self.holds_already();
        if !stand_back {
            let started = Instant::now();
            if let Attempt::Acquired { grant, holds } = self.try_acquire(true)? {
                return Ok(Some(self.hold(started, grant, holds)));
            }
        }
        self.acquire_slow(wait, interrupt, stand_back)
    }

    /// Whether the calling thread holds the lock now, as far as this client
    /// knows: under its own field, or under one that lets it in at once (a
    /// read lock taken by the thread that holds the write lock).
    fn holds_already(&self) -> bool {
        let holds = |field: &Arc<str>| {
            self.engine
                .renewals
                .find(self.lock.name, field)
                .is_some_and(|record| record.is_live())
        };
        holds(&self.field)
            || self
                .lock
                .kind
                .entered_through(&self.engine.base_field())
                .is_some_and(|field| holds(&field))
    }

    /// The contended path: subscribe, try again, park until woken or the
    /// lock's TTL runs out, and repeat. A kind without pub/sub (the spin
    /// lock) backs off instead of subscribing. With `stand_back` the thread
    /// parks behind the local waiters first (at most [`HANDOFF_GRACE`]).
    #[cold]
    fn acquire_slow(
        &self,
        wait: Option<Duration>,
        interrupt: Option<&Interrupt>,
        stand_back: bool,
    ) -> Result<Option<(Hold, K::Grant)>> {
        let engine = self.engine;
        // A wait too long to represent is no wait limit at all.
        let deadline = wait.and_then(|w| Instant::now().checked_add(w));
        let left = |now: Instant| deadline.map(|d| d.saturating_duration_since(now));
        let confirm_for = left(Instant::now()).unwrap_or(Duration::MAX);
        let subscription = self.lock.kind.wait_channel(&self.field).map(|channel| {
            engine
                .pubsub
                .subscribe(&channel, self.lock.name, confirm_for)
        });
        // What a local release needs to hand this thread the lock directly.
        let offer = self.lock.kind.handover().map(|handover| Offer {
            field: self.field.clone(),
            lease_ms: self.lease_ms,
            token_key: match handover {
                Handover::Field => None,
                Handover::Token { token_key } => Some(Arc::from(token_key)),
            },
        });
        let mut failures = 0u32;
        // Whether a release reserved this waiter and left the hand-over
        // unconfirmed: the lock may be ours in Redis already.
        let mut maybe_handed = false;
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
                let _parked = engine.counters.parked();
                subscription.park(grace, interrupt, offer.clone())
            };
            if let Some(end) = self.park_ended_call(woke) {
                return end;
            }
            handed_wake_up = matches!(
                woke,
                Wake::Notified | Wake::Unsettled | Wake::HandedOver { .. }
            );
            maybe_handed |= woke == Wake::Unsettled;
        }
        loop {
            // Woken by an announcement another process heard too: let its
            // waiter have this turn (see `pubsub/handover.rs`).
            let courtesy = match (handed_wake_up, &subscription) {
                (true, Some(subscription)) => subscription.courtesy_left(),
                _ => None,
            };
            if let (Some(courtesy), Some(subscription)) = (courtesy, &subscription) {
                Counters::bump(&engine.counters.courtesy_pauses);
                // In slices: the courtesy ends early once the other
                // process has had its turn (its release was heard).
                let mut pause = Some(courtesy);
                while let Some(courtesy) = pause {
                    let slice = left(Instant::now())
                        .map_or(courtesy, |l| l.min(courtesy))
                        .min(COURTESY_SLICE);
                    if slice.is_zero() || interrupt::sleep(slice, interrupt) {
                        break;
                    }
                    pause = subscription.courtesy_left();
                }
            }
            if interrupt.is_some_and(Interrupt::is_triggered) {
                pass_on(handed_wake_up);
                if maybe_handed {
                    // Leaving without an attempt that would re-enter a lock
                    // handed over unconfirmed: clear its trace.
                    self.give_back_trace();
                }
                return Err(self.interrupted());
            }
            let started = Instant::now();
            let attempt = self.try_acquire(true);
            if attempt.is_err() {
                pass_on(handed_wake_up);
            }
            match &attempt {
                // No attempt can re-enter it now: clear the hand-over's
                // trace, if there is one, so shutdown leaves none behind.
                Err(Error::Shutdown) if maybe_handed => self.give_back_trace(),
                // The attempt ran: it re-entered a lock handed over, or
                // found that no hand-over happened.
                Ok(_) => maybe_handed = false,
                Err(_) => {}
            }
            if let (true, Some(subscription)) = (handed_wake_up, &subscription) {
                // The woken waiter has had its turn: newcomers may try.
                subscription.handoff_done();
                if courtesy.is_some() {
                    subscription.courtesy_ended(matches!(attempt, Ok(Attempt::Busy(_))));
                }
            }
            let ttl = match attempt? {
                Attempt::Acquired { grant, holds } => {
                    if handed_wake_up {
                        Counters::bump(&engine.counters.local_handoffs);
                    }
                    return Ok(Some(self.hold(started, grant, holds)));
                }
                Attempt::Busy(ttl) => ttl,
            };
            let mut park = match ttl {
                // The lock vanished between our checks: try again at once.
                -2 => Duration::ZERO,
                // A key without expiry, made by someone else: rely on the
                // release message, but look again now and then.
                ttl if ttl < 0 => engine.watchdog_timeout(),
                // At least 1 ms: a lock about to expire reports 0, and
                // retrying in a tight loop would only load Redis.
                ttl => Duration::from_millis(ttl.max(1) as u64),
            };
            if let Some(backoff) = self.lock.kind.backoff(failures) {
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
                let _parked = engine.counters.parked();
                match &subscription {
                    Some(subscription) => subscription.park(park, interrupt, offer.clone()),
                    None if interrupt::sleep(park, interrupt) => Wake::Interrupted,
                    None => Wake::TimedOut,
                }
            };
            if let Some(end) = self.park_ended_call(woke) {
                return end;
            }
            handed_wake_up = matches!(
                woke,
                Wake::Notified | Wake::Unsettled | Wake::HandedOver { .. }
            );
            maybe_handed |= woke == Wake::Unsettled;
        }
    }

    /// How a park that ended with `woke` ends the call, if it does: an
    /// interrupt, or the lock handed over by a local release. `None`: try
    /// the lock again (after a wake-up handed to this waiter, or not).
    fn park_ended_call(&self, woke: Wake) -> Option<Acquired<K::Grant>> {
        match woke {
            Wake::Interrupted => Some(Err(self.interrupted())),
            Wake::HandedOver { at, token } => {
                self.handed_over(at, token).map(|taken| Ok(Some(taken)))
            }
            Wake::Notified | Wake::Unsettled | Wake::TimedOut => None,
        }
    }

    /// A local release handed this thread the lock (one hold, its lease,
    /// set no earlier than `at`, and `token` when the kind draws one):
    /// records the hold. `None` only when the grant cannot be had (a kind
    /// never handed over, a fenced hand-over without its token), which no
    /// release does; the caller's next attempt would then re-enter and give
    /// back the extra hold.
    fn handed_over(&self, at: Instant, token: Option<u64>) -> Option<(Hold, K::Grant)> {
        let grant = self.lock.kind.handed_over_grant(token)?;
        Some(self.hold(at, grant, 1))
    }
}
