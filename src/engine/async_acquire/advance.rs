//! The steps of an async acquire: `wait.rs`'s loop, cut where a thread
//! would park or sleep, each cut a phase that an event resumes (see
//! `async_acquire.rs`).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{AsyncAcquire, Driving, Phase};
use crate::engine::finish::Acquired;
use crate::engine::first_busy::FirstBusy;
use crate::engine::outage::{outage_cause, Outage};
use crate::engine::{Call, CallState, LockRef, Taken};
use crate::kind::sealed::KindOps;
use crate::kind::Handover;
use crate::pubsub::{Offer, Wake};

impl<K: KindOps> AsyncAcquire<K> {
    pub(super) fn lock(&self) -> LockRef<'_, K> {
        LockRef {
            name: &self.name,
            kind: &self.kind,
        }
    }

    /// Moves the call on until it must wait for an event (`None`) or ends
    /// (its outcome).
    pub(super) fn advance(self: &Arc<Self>, driving: &mut Driving) -> Option<Acquired<K::Grant>> {
        let abandoned = self.done.is_abandoned();
        loop {
            match std::mem::replace(&mut driving.phase, Phase::Loop) {
                Phase::Done => {
                    driving.phase = Phase::Done;
                    return None;
                }
                Phase::Start if abandoned => return Some(Ok(None)),
                Phase::Start => {
                    if let Some(end) = self.start(driving) {
                        return Some(end);
                    }
                }
                Phase::Parked {
                    waiter,
                    until,
                    timer,
                } => {
                    let now = Instant::now();
                    // A local taking of the lock may have bounded the park
                    // (see `Waiters::bound_parked`): its end moves there.
                    let (until, timer) = match waiter.until() {
                        Some(bound) if until.is_none_or(|until| bound < until) => {
                            if let Some(timer) = timer {
                                self.engine.tasks().timers().cancel(timer);
                            }
                            let timer = (bound > now).then(|| self.timer(bound)).flatten();
                            (Some(bound), timer)
                        }
                        _ => (until, timer),
                    };
                    let give_up = abandoned || until.is_some_and(|until| now >= until);
                    let woke = match waiter.outcome() {
                        Some(woke) => Some(woke),
                        None if give_up => driving
                            .subscription
                            .as_ref()
                            .and_then(|s| s.leave_async(&waiter)),
                        None => None,
                    };
                    let Some(woke) = woke else {
                        // Still waiting (or reserved for a hand-over: its
                        // outcome comes with the next wake-up).
                        driving.phase = Phase::Parked {
                            waiter,
                            until,
                            timer,
                        };
                        return None;
                    };
                    if let Some(timer) = timer {
                        self.engine.tasks().timers().cancel(timer);
                    }
                    self.engine.counters.parked.fetch_sub(1, Ordering::Relaxed);
                    if let Some(end) = self.woke(driving, woke, abandoned) {
                        return Some(end);
                    }
                }
                Phase::Sleeping {
                    until,
                    timer,
                    parked,
                } => {
                    if !abandoned && Instant::now() < until {
                        driving.phase = Phase::Sleeping {
                            until,
                            timer,
                            parked,
                        };
                        return None;
                    }
                    if parked {
                        self.engine.counters.parked.fetch_sub(1, Ordering::Relaxed);
                    }
                    if abandoned {
                        if let Some(timer) = timer {
                            self.engine.tasks().timers().cancel(timer);
                        }
                        self.call(&driving.call)
                            .leave_unsettled(driving.maybe_handed);
                        return Some(Ok(None));
                    }
                }
                Phase::Loop if abandoned => {
                    if driving.handed_wake_up {
                        if let Some(subscription) = &driving.subscription {
                            subscription.pass_on();
                        }
                    }
                    self.call(&driving.call)
                        .leave_unsettled(driving.maybe_handed);
                    return Some(Ok(None));
                }
                Phase::Loop => {
                    if let Some(end) = self.round(driving) {
                        return Some(end);
                    }
                }
            }
            if !matches!(driving.phase, Phase::Loop | Phase::Start) {
                return None;
            }
        }
    }

    pub(super) fn call<'a>(&'a self, state: &'a CallState) -> Call<'a, K> {
        Call {
            engine: &self.engine,
            lock: self.lock(),
            state,
        }
    }

    /// The first attempt (unless a local waiter is being handed the lock),
    /// then the subscription: `acquire_waiting` and the start of
    /// `acquire_slow`. A try that does not wait ends here.
    fn start(self: &Arc<Self>, driving: &mut Driving) -> Option<Acquired<K::Grant>> {
        let engine = &self.engine;
        if self.wait == Some(Duration::ZERO) {
            let taken = self.call(&driving.call).try_acquire(false);
            return Some(taken.map(|taken| match taken {
                Taken::Held(held) => Some(held),
                Taken::Busy(_) => None,
            }));
        }
        let call = self.call(&driving.call);
        let stand_back = self
            .kind
            .shared_channel()
            .is_some_and(|channel| engine.pubsub.handoff_pending(channel, &self.name))
            && !call.holds_already();
        let mut first_busy = None;
        if !stand_back {
            let quiet = self
                .kind
                .wait_channel(&call.field)
                .and_then(|channel| engine.pubsub.quiet_mark(&channel));
            let started = Instant::now();
            match call.try_acquire(true) {
                Ok(Taken::Held(held)) => return Some(Ok(Some(held))),
                Ok(Taken::Busy(ttl)) => {
                    first_busy = quiet.map(|quiet| FirstBusy {
                        quiet,
                        ttl,
                        at: started,
                    });
                }
                Err(e) => {
                    let began = match outage_cause(e) {
                        Ok(cause) => Outage::began(started, cause),
                        Err(e) => return Some(Err(e)),
                    };
                    let tolerance = call.outage_tolerance();
                    if began.exceeds(tolerance) {
                        return Some(Err(began.give_up(&self.name, tolerance)));
                    }
                    driving.pause_first = true;
                    driving.outage = Some(began);
                }
            }
        }
        let confirm_for = driving.deadline.map_or(Duration::MAX, |d| {
            d.saturating_duration_since(Instant::now())
        });
        let subscription = self
            .kind
            .wait_channel(&driving.call.field)
            .map(|channel| engine.pubsub.subscribe(&channel, &self.name, confirm_for));
        driving.offer = self.kind.handover().map(|handover| Offer {
            field: driving.call.field.clone(),
            lease_ms: driving.call.lease_ms,
            lease: driving.call.lease,
            token_key: match handover {
                Handover::Field => None,
                Handover::Token { token_key } => Some(Arc::from(token_key)),
            },
        });
        // Marked before the quiet look, which a local taking disturbs (see
        // `wait_subscribed`).
        driving.take_mark = subscription.as_ref().map(|s| s.take_mark());
        driving.busy_still = first_busy.and_then(|first| {
            let quiet = subscription.as_ref()?.quiet_since(&first.quiet);
            quiet.then(|| first.ttl_left()).flatten()
        });
        driving.subscription = subscription;
        if stand_back && driving.subscription.is_some() {
            let grace = driving.deadline.map_or(crate::engine::HANDOFF_GRACE, |d| {
                d.saturating_duration_since(Instant::now())
                    .min(crate::engine::HANDOFF_GRACE)
            });
            return self.park(driving, grace);
        }
        driving.phase = Phase::Loop;
        None
    }

    /// A park ended with `woke`: the lock handed over ends the call; a
    /// wake-up handed to this waiter makes the next attempt its turn.
    pub(super) fn woke(
        self: &Arc<Self>,
        driving: &mut Driving,
        woke: Wake,
        abandoned: bool,
    ) -> Option<Acquired<K::Grant>> {
        let call = self.call(&driving.call);
        if let Some(end) = call.park_ended_call(woke) {
            // Handed over: held now, given back at the end if abandoned.
            return Some(end);
        }
        let handed = matches!(woke, Wake::Notified | Wake::Unsettled);
        let maybe_handed = driving.maybe_handed || woke == Wake::Unsettled;
        if abandoned {
            if let (true, Some(subscription)) = (handed, &driving.subscription) {
                subscription.pass_on();
            }
            call.leave_unsettled(maybe_handed);
            return Some(Ok(None));
        }
        driving.handed_wake_up = handed;
        driving.maybe_handed = maybe_handed;
        driving.in_courtesy = false;
        driving.phase = Phase::Loop;
        None
    }
}
