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
use crate::engine::{Call, CallState, LockRef, Mode, Taken};
use crate::error::Error;
use crate::kind::sealed::KindOps;
use crate::kind::Handover;
use crate::pubsub::{Offer, Wake};
use crate::stats::Counters;

/// The longest slice of a courtesy pause, as a thread's (`wait.rs`).
const COURTESY_SLICE: Duration = Duration::from_micros(500);

impl<K: KindOps> AsyncAcquire<K> {
    fn lock(&self) -> LockRef<'_, K> {
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
                Phase::Sleeping { until, timer } => {
                    if abandoned {
                        if let Some(timer) = timer {
                            self.engine.tasks().timers().cancel(timer);
                        }
                        self.call(&driving.call)
                            .leave_unsettled(driving.maybe_handed);
                        return Some(Ok(None));
                    }
                    if Instant::now() < until {
                        driving.phase = Phase::Sleeping { until, timer };
                        return None;
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

    fn call<'a>(&'a self, state: &'a CallState) -> Call<'a, K> {
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
            token_key: match handover {
                Handover::Field => None,
                Handover::Token { token_key } => Some(Arc::from(token_key)),
            },
        });
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
    fn woke(
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

    /// One turn of `acquire_slow`'s loop: a courtesy pause, an attempt (or
    /// a park on the first try's answer), then a park or the end.
    fn round(self: &Arc<Self>, driving: &mut Driving) -> Option<Acquired<K::Grant>> {
        let engine = &self.engine;
        let left = |now: Instant| driving.deadline.map(|d| d.saturating_duration_since(now));
        // Woken by an announcement another process heard too: let its
        // waiter have this turn, in slices.
        if driving.handed_wake_up {
            let courtesy = driving
                .subscription
                .as_ref()
                .and_then(|s| s.courtesy_left());
            if let Some(courtesy) = courtesy {
                if !driving.in_courtesy {
                    Counters::bump(&engine.counters.courtesy_pauses);
                    driving.in_courtesy = true;
                }
                let slice = left(Instant::now())
                    .map_or(courtesy, |l| l.min(courtesy))
                    .min(COURTESY_SLICE);
                if !slice.is_zero() {
                    self.sleep(driving, slice);
                    return None;
                }
            }
        }
        let call = self.call(&driving.call);
        let tolerance = call.outage_tolerance();
        let ttl_park = if std::mem::take(&mut driving.pause_first) {
            None
        } else if let Some(ttl) = driving.busy_still.take() {
            Counters::bump(&engine.counters.second_tries_skipped);
            Some(call.ttl_park(ttl, driving.failures))
        } else {
            let started = Instant::now();
            let attempt = match &driving.outage {
                Some(outage) => {
                    let until = match (driving.deadline, outage.gives_up_at(tolerance)) {
                        (Some(d), Some(g)) => Some(d.min(g)),
                        (d, g) => d.or(g),
                    };
                    match until {
                        Some(until) if until <= Instant::now() => {
                            Err(Error::Redis(outage.last_cause()))
                        }
                        until => match call.answers(until) {
                            Err(cause) => Err(Error::Redis(cause)),
                            Ok(()) => call.try_acquire(true),
                        },
                    }
                }
                None => call.try_acquire(true),
            };
            if attempt.is_err() && driving.handed_wake_up {
                if let Some(subscription) = &driving.subscription {
                    subscription.pass_on();
                }
            }
            match &attempt {
                Err(Error::Shutdown) => call.leave_unsettled(driving.maybe_handed),
                Ok(_) => driving.maybe_handed = false,
                Err(_) => {}
            }
            if let (true, Some(subscription)) = (driving.handed_wake_up, &driving.subscription) {
                subscription.handoff_done();
                if driving.in_courtesy {
                    subscription.courtesy_ended(matches!(attempt, Ok(Taken::Busy(_))));
                }
            }
            match attempt {
                Ok(Taken::Held(held)) => {
                    if driving.handed_wake_up {
                        Counters::bump(&engine.counters.local_handoffs);
                    }
                    return Some(Ok(Some(held)));
                }
                Ok(Taken::Busy(ttl)) => {
                    driving.outage = None;
                    Some(call.ttl_park(ttl, driving.failures))
                }
                Err(e) => {
                    let cause = match outage_cause(e) {
                        Ok(cause) => cause,
                        Err(e) => return Some(Err(e)),
                    };
                    let going_on = match driving.outage.take() {
                        Some(mut going_on) => {
                            going_on.failed_again(cause);
                            going_on
                        }
                        None => Outage::began(started, cause),
                    };
                    if going_on.exceeds(tolerance) {
                        call.leave_unsettled(driving.maybe_handed);
                        return Some(Err(going_on.give_up(&self.name, tolerance)));
                    }
                    driving.outage = Some(going_on);
                    None
                }
            }
        };
        driving.in_courtesy = false;
        driving.failures = driving.failures.saturating_add(1);
        let mut park = match (ttl_park, &mut driving.outage) {
            (Some(park), _) => park,
            (None, Some(outage)) => outage.next_pause(tolerance),
            (None, None) => Duration::ZERO,
        };
        if let Some(left) = left(Instant::now()) {
            if left.is_zero() {
                return Some(match driving.outage.take() {
                    Some(outage) => {
                        self.call(&driving.call)
                            .leave_unsettled(driving.maybe_handed);
                        Err(outage.give_up(&self.name, None))
                    }
                    None => Ok(None),
                });
            }
            park = park.min(left);
        }
        driving.handed_wake_up = false;
        if driving.subscription.is_some() {
            self.park(driving, park)
        } else {
            self.sleep(driving, park);
            None
        }
    }

    /// Parks this waiter in the channel's line for at most `park`, woken
    /// by a release's announcement, a hand-over or the timer; a wake-up
    /// kept for it ends the park at once.
    fn park(self: &Arc<Self>, driving: &mut Driving, park: Duration) -> Option<Acquired<K::Grant>> {
        let subscription = driving.subscription.as_ref()?;
        match subscription.park_async(driving.offer.clone(), self.callback()) {
            Err(woke) => {
                // A wake-up was kept for us: as a park that ended with it.
                self.woke(driving, woke, false)
            }
            Ok(waiter) => {
                // Counted as parked (`Stats::parked_waiters`) until it wakes.
                self.engine.counters.parked.fetch_add(1, Ordering::Relaxed);
                let until = Instant::now().checked_add(park);
                let timer = until.and_then(|until| self.timer(until));
                driving.phase = Phase::Parked {
                    waiter,
                    until,
                    timer,
                };
                None
            }
        }
    }

    /// Sleeps `pause` without a line to wait in (a spin lock's backoff, a
    /// courtesy slice): the timer ends it.
    fn sleep(self: &Arc<Self>, driving: &mut Driving, pause: Duration) {
        let until = Instant::now()
            .checked_add(pause)
            .unwrap_or_else(Instant::now);
        let timer = self.timer(until);
        driving.phase = Phase::Sleeping { until, timer };
    }

    /// A timer at `until` that schedules the next step; `None` when the
    /// timer is gone (shutdown: the next step is scheduled now).
    fn timer(self: &Arc<Self>, until: Instant) -> Option<crate::tasks::timers::TimerId> {
        let callback = self.callback();
        match self
            .engine
            .tasks()
            .timers()
            .at(until, Box::new(move || callback()))
        {
            Ok(timer) => Some(timer),
            Err(_) => {
                self.schedule();
                None
            }
        }
    }

    /// Ends the call with `outcome`: its last requests (`finish.rs`), then
    /// the outcome to the future, or, when the future is gone, the hold
    /// given back.
    pub(super) fn end(&self, driving: &mut Driving, outcome: Acquired<K::Grant>) {
        let waited = self.wait != Some(Duration::ZERO);
        let outcome = self.call(&driving.call).finish(outcome, waited);
        driving.phase = Phase::Done;
        driving.subscription = None;
        self.engine.waiting.count_out();
        if let Err(Ok(Some((hold, _)))) = self.done.complete(outcome) {
            if let Err(e) = self.engine.release(self.lock(), &hold, Mode::Drop) {
                log::warn!(
                    "redhold: giving back {:?}, taken for a dropped future, failed: {}",
                    crate::names::shorten(&self.name),
                    e.report()
                );
            }
        }
    }
}
