//! One turn of an async acquire's loop (`acquire_slow`'s in `wait.rs`):
//! a courtesy pause, an attempt, then a park or a sleep until an event
//! resumes it; and the call's end.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{AsyncAcquire, Driving, Phase};
use crate::engine::finish::Acquired;
use crate::engine::outage::{outage_cause, Outage};
use crate::engine::{Mode, Taken};
use crate::error::Error;
use crate::kind::sealed::KindOps;
use crate::stats::Counters;

/// The longest slice of a courtesy pause, as a thread's (`wait.rs`).
const COURTESY_SLICE: Duration = Duration::from_micros(500);

impl<K: KindOps> AsyncAcquire<K> {
    /// One turn of `acquire_slow`'s loop: a courtesy pause, an attempt (or
    /// a park on the first try's answer), then a park or the end.
    pub(super) fn round(self: &Arc<Self>, driving: &mut Driving) -> Option<Acquired<K::Grant>> {
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
                    self.sleep(driving, slice, false);
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
            // A spin lock's backoff: counted as parked, as a thread's is.
            self.engine.counters.parked.fetch_add(1, Ordering::Relaxed);
            self.sleep(driving, park, true);
            None
        }
    }

    /// Parks this waiter in the channel's line for at most `park`, woken
    /// by a release's announcement, a hand-over or the timer; a wake-up
    /// kept for it ends the park at once.
    pub(super) fn park(
        self: &Arc<Self>,
        driving: &mut Driving,
        park: Duration,
    ) -> Option<Acquired<K::Grant>> {
        let subscription = driving.subscription.as_ref()?;
        let until = Instant::now().checked_add(park);
        match subscription.park_async(driving.offer.clone(), until, self.callback()) {
            Err(woke) => {
                // A wake-up was kept for us: as a park that ended with it.
                self.woke(driving, woke, false)
            }
            Ok(waiter) => {
                // Counted as parked (`Stats::parked_waiters`) until it wakes.
                self.engine.counters.parked.fetch_add(1, Ordering::Relaxed);
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

    /// Sleeps `pause` without a line to wait in (a spin lock's backoff,
    /// counted as `parked`, or a courtesy slice): the timer ends it.
    fn sleep(self: &Arc<Self>, driving: &mut Driving, pause: Duration, parked: bool) {
        let until = crate::config::deadline_after(Instant::now(), pause);
        let timer = self.timer(until);
        driving.phase = Phase::Sleeping {
            until,
            timer,
            parked,
        };
    }

    /// A timer at `until` that schedules the next step; `None` when the
    /// timer is gone (shutdown: the next step is scheduled now).
    pub(super) fn timer(self: &Arc<Self>, until: Instant) -> Option<crate::tasks::timers::TimerId> {
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
        if let (Ok(Some(_)), Some(subscription)) = (&outcome, &driving.subscription) {
            self.call(&driving.call).bound_waiters_left(subscription);
        }
        let outcome = self.call(&driving.call).finish(outcome, waited);
        driving.phase = Phase::Done;
        driving.subscription = None;
        driving.counted = None;
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
