//! The contended path of an acquire: subscribe to the lock's channel, try
//! again, park until a release is announced or the lock's TTL runs out, and
//! repeat. A waiter never sleeps longer than the TTL, so a lost message
//! costs time, never safety. While Redis is unreachable it sleeps a
//! backoff instead and tries again (see [`Outage`]).

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::first_busy::FirstBusy;
use super::outage::{outage_cause, Outage};
use super::{Call, Taken, HANDOFF_GRACE};
use crate::error::{Error, Result};
use crate::hold::Hold;
use crate::interrupt::{self, Interrupt};
use crate::kind::sealed::KindOps;
use crate::kind::Handover;
use crate::pubsub::{Offer, Subscription, Wake};
use crate::stats::Counters;

/// The longest a courtesy pause sleeps before it looks again whether the
/// courtesy still holds.
const COURTESY_SLICE: Duration = Duration::from_micros(500);

/// The longest a waiter without a subscription (the spin lock) sleeps
/// before it looks whether the client was shut down: no release wakes it.
const SHUTDOWN_SLICE: Duration = Duration::from_millis(50);

impl<K: KindOps> Call<'_, K> {
    /// A first attempt, unless a local waiter is being handed the lock (then
    /// this thread queues behind it instead of racing it: threads of one
    /// client take turns), then the contended path. A thread that holds the
    /// lock already (a re-entry, maybe of a lock just handed to it) never
    /// stands back: no hand-over would ever come to it. A first attempt
    /// that finds Redis unreachable begins an outage the contended path
    /// waits out.
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
        let mut outage = None;
        let mut first_busy = None;
        if !stand_back {
            // Taken before the try is sent: see `FirstBusy`.
            let quiet = self
                .lock
                .kind
                .wait_channel(&self.field)
                .and_then(|channel| self.engine.pubsub.quiet_mark(&channel));
            let started = Instant::now();
            match self.try_acquire(true) {
                Ok(Taken::Held(held)) => return Ok(Some(held)),
                Ok(Taken::Busy(ttl)) => {
                    first_busy = quiet.map(|quiet| FirstBusy {
                        quiet,
                        ttl,
                        at: started,
                    });
                }
                Err(e) => {
                    let began = Outage::began(started, outage_cause(e)?);
                    let tolerance = self.outage_tolerance();
                    if began.exceeds(tolerance) {
                        return Err(began.give_up(self.lock.name, tolerance));
                    }
                    outage = Some(began);
                }
            }
        }
        self.acquire_slow(wait, interrupt, stand_back, outage, first_busy)
    }

    /// How long this client's waiters keep trying while Redis is
    /// unreachable.
    pub(super) fn outage_tolerance(&self) -> Option<Duration> {
        self.engine.server.config().outage_tolerance
    }

    /// Sleeps `pause` without a subscription to wake it: ends early on
    /// `interrupt`, or when the client shuts down (the next attempt then
    /// fails with [`Error::Shutdown`]).
    fn sleep(&self, pause: Duration, interrupt: Option<&Interrupt>) -> Wake {
        let until = Instant::now().checked_add(pause);
        loop {
            let left = until.map_or(SHUTDOWN_SLICE, |until| {
                until.saturating_duration_since(Instant::now())
            });
            if left.is_zero() || self.engine.server.is_closed() {
                return Wake::TimedOut;
            }
            if interrupt::sleep(left.min(SHUTDOWN_SLICE), interrupt) {
                return Wake::Interrupted;
            }
        }
    }

    /// Whether the calling thread holds the lock now, as far as this client
    /// knows: under its own field, or under one that lets it in at once (a
    /// read lock taken by the thread that holds the write lock).
    pub(super) fn holds_already(&self) -> bool {
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
                .entered_through(&self.engine.base_field(self.holder))
                .is_some_and(|field| holds(&field))
    }

    /// The contended path: subscribe, try again, park until woken or the
    /// lock's TTL runs out, and repeat. A kind without pub/sub (the spin
    /// lock) backs off instead of subscribing. With `stand_back` the thread
    /// parks behind the local waiters first (at most [`HANDOFF_GRACE`]).
    /// During an `outage` (one may have begun with the first attempt) it
    /// sleeps a backoff instead, looks whether Redis answers, and tries
    /// again; it gives up with [`Error::Unreachable`] at its deadline or
    /// after the outage tolerance.
    #[cold]
    fn acquire_slow(
        &self,
        wait: Option<Duration>,
        interrupt: Option<&Interrupt>,
        stand_back: bool,
        outage: Option<Outage>,
        first_busy: Option<FirstBusy>,
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
        let taken = self.wait_subscribed(
            subscription.as_ref(),
            deadline,
            interrupt,
            stand_back,
            outage,
            first_busy,
        );
        if let (Ok(Some(_)), Some(subscription)) = (&taken, &subscription) {
            self.bound_waiters_left(subscription);
        }
        taken
    }

    /// The local waiters still parked for the lock this call just took
    /// sleep no longer than the TTL it set (see `Waiters::bound_parked`).
    pub(super) fn bound_waiters_left(&self, subscription: &Subscription) {
        let ttl = Duration::from_millis(self.lease_ms);
        subscription.bound_parked(crate::config::deadline_after(Instant::now(), ttl));
    }

    /// `acquire_slow` once subscribed (a kind without pub/sub has no
    /// `subscription`).
    fn wait_subscribed(
        &self,
        subscription: Option<&Subscription>,
        deadline: Option<Instant>,
        interrupt: Option<&Interrupt>,
        stand_back: bool,
        mut outage: Option<Outage>,
        first_busy: Option<FirstBusy>,
    ) -> Result<Option<(Hold, K::Grant)>> {
        let engine = self.engine;
        let left = |now: Instant| deadline.map(|d| d.saturating_duration_since(now));
        // What a local release needs to hand this thread the lock directly.
        let offer = self.lock.kind.handover().map(|handover| Offer {
            field: self.field.clone(),
            lease_ms: self.lease_ms,
            lease: self.lease,
            token_key: match handover {
                Handover::Field => None,
                Handover::Token { token_key } => Some(Arc::from(token_key)),
            },
        });
        // Where this client's takings of the lock stood before the attempt
        // whose TTL the next park is on: one since bounds that park too
        // (see `Waiters::enqueue_as`). Marked before the quiet look, which
        // a taking disturbs, for a first try's answer.
        let mut take_mark = subscription.map(Subscription::take_mark);
        // The first try's answer still stands when nothing was announced
        // (nor taken here) between it and joining the waiters: park on it
        // at once.
        let mut busy_still = first_busy.and_then(|first| {
            let quiet = subscription.as_ref()?.quiet_since(&first.quiet);
            quiet.then(|| first.ttl_left()).flatten()
        });
        let tolerance = self.outage_tolerance();
        // The first attempt failed: sleep a backoff before the next one.
        let mut pause_first = outage.is_some();
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
                subscription.park(grace, None, interrupt, offer.clone())
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
                self.leave_unsettled(maybe_handed);
                return Err(self.interrupted());
            }
            // How long the lock's TTL lets this waiter park; `None` while
            // Redis is unreachable (it sleeps the outage's backoff).
            let ttl_park = if std::mem::take(&mut pause_first) {
                None
            } else if let Some(ttl) = busy_still.take() {
                Counters::bump(&engine.counters.second_tries_skipped);
                Some(self.ttl_park(ttl, failures))
            } else {
                let started = Instant::now();
                let probe_until = |outage: &Outage| {
                    let gives_up = outage.gives_up_at(tolerance);
                    match (deadline, gives_up) {
                        (Some(d), Some(g)) => Some(d.min(g)),
                        (d, g) => d.or(g),
                    }
                };
                let look = |o: &Outage| match probe_until(o) {
                    // No time left for a look: still unreachable, as last seen.
                    Some(until) if until <= Instant::now() => Err(o.last_cause()),
                    until => self.answers(until),
                };
                let attempt = match outage.as_ref().map(look) {
                    // Still unreachable: no acquire sent.
                    Some(Err(cause)) => Err(Error::Redis(cause)),
                    _ => {
                        take_mark = subscription.map(Subscription::take_mark);
                        self.try_acquire(true)
                    }
                };
                if attempt.is_err() {
                    pass_on(handed_wake_up);
                }
                match &attempt {
                    // No attempt can re-enter it now: clear the hand-over's
                    // trace, if there is one, so shutdown leaves none behind.
                    Err(Error::Shutdown) => self.leave_unsettled(maybe_handed),
                    // The attempt ran: it re-entered a lock handed over, or
                    // found that no hand-over happened.
                    Ok(_) => maybe_handed = false,
                    Err(_) => {}
                }
                if let (true, Some(subscription)) = (handed_wake_up, &subscription) {
                    // The woken waiter has had its turn: newcomers may try.
                    subscription.handoff_done();
                    if courtesy.is_some() {
                        subscription.courtesy_ended(matches!(attempt, Ok(Taken::Busy(_))));
                    }
                }
                match attempt {
                    Ok(Taken::Held(held)) => {
                        if handed_wake_up {
                            Counters::bump(&engine.counters.local_handoffs);
                        }
                        return Ok(Some(held));
                    }
                    Ok(Taken::Busy(ttl)) => {
                        outage = None;
                        Some(self.ttl_park(ttl, failures))
                    }
                    // Only an outage is waited out; an attempt that may
                    // have run is safe to repeat: a lock it took is
                    // re-entered, and the hold counted twice given back.
                    Err(e) => {
                        let cause = outage_cause(e)?;
                        let going_on = match outage.take() {
                            Some(mut going_on) => {
                                going_on.failed_again(cause);
                                going_on
                            }
                            None => Outage::began(started, cause),
                        };
                        if going_on.exceeds(tolerance) {
                            self.leave_unsettled(maybe_handed);
                            return Err(going_on.give_up(self.lock.name, tolerance));
                        }
                        outage = Some(going_on);
                        None
                    }
                }
            };
            failures = failures.saturating_add(1);
            let mut park = match (ttl_park, &mut outage) {
                (Some(park), _) => park,
                (None, Some(outage)) => outage.next_pause(tolerance),
                (None, None) => Duration::ZERO,
            };
            if let Some(left) = left(Instant::now()) {
                if left.is_zero() {
                    return match outage {
                        // Its own wait ran out while Redis was away: the
                        // lock's state is unknown, so an error, not `None`.
                        Some(outage) => {
                            self.leave_unsettled(maybe_handed);
                            Err(outage.give_up(self.lock.name, None))
                        }
                        None => Ok(None),
                    };
                }
                park = park.min(left);
            }
            let woke = {
                let _parked = engine.counters.parked();
                match &subscription {
                    Some(subscription) => {
                        subscription.park(park, take_mark, interrupt, offer.clone())
                    }
                    None => self.sleep(park, interrupt),
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
}
