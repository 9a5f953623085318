//! A synchronizer's waiting call for an async caller: [`WaitOn::until`]'s
//! loop (try, subscribe, try again, park until a message or the safety
//! net's re-check, ride out outages), cut where a thread would park and
//! resumed by events on the client's own threads. Its attempts and its end
//! run on the I/O pool; a parked call is an entry in the channel's line
//! and one in the timer.
//!
//! Dropped before it ended, its future leaves the call to end at its next
//! step with `abandoned`: the call's end gives back what it took (permits
//! taken for nobody) and closes its request in Redis, as a thread's call
//! that ends without permits does.
//!
//! [`WaitOn::until`]: super::wait::WaitOn

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::wait::{Look, WaitCall, RECHECK};
use crate::engine::outage::{outage_cause, Outage};
use crate::engine::Engine;
use crate::error::Result;
use crate::pubsub::{Subscription, Waiter};
use crate::tasks::completion::Completion;
use crate::tasks::timers::TimerId;

/// One waiting call of a synchronizer for an async caller.
pub(super) struct AsyncWait<C: WaitCall> {
    engine: Arc<Engine>,
    name: Arc<str>,
    channel: String,
    /// `Some(ZERO)`: one attempt, no subscription.
    wait: Option<Duration>,
    queued: AtomicBool,
    state: Mutex<WaitState<C>>,
    done: Completion<Result<Option<C::Output>>>,
}

impl<C: WaitCall> std::fmt::Debug for AsyncWait<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AsyncWait")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

struct WaitState<C> {
    /// The call, until it ends.
    call: Option<C>,
    deadline: Option<Instant>,
    outage: Option<Outage>,
    subscription: Option<Subscription>,
    phase: Phase,
}

enum Phase {
    /// Attempt now.
    Attempt,
    Parked {
        waiter: Arc<Waiter>,
        until: Instant,
        timer: Option<TimerId>,
    },
    Done,
}

impl<C: WaitCall> AsyncWait<C> {
    /// Starts `call` on `name` (announced on `channel`), waiting at most
    /// `wait`; its first step is queued at once.
    pub(super) fn start(
        engine: &Arc<Engine>,
        name: &Arc<str>,
        channel: &str,
        call: C,
        wait: Option<Duration>,
    ) -> Arc<AsyncWait<C>> {
        let waiting = Arc::new(AsyncWait {
            engine: Arc::clone(engine),
            name: Arc::clone(name),
            channel: channel.to_owned(),
            wait,
            queued: AtomicBool::new(false),
            state: Mutex::new(WaitState {
                call: Some(call),
                // A wait too long to represent is no wait limit at all.
                deadline: wait.and_then(|w| Instant::now().checked_add(w)),
                outage: None,
                subscription: None,
                phase: Phase::Attempt,
            }),
            done: Completion::default(),
        });
        waiting.schedule();
        waiting
    }

    /// The outcome, once the call has ended.
    pub(super) fn poll(&self, cx: &mut Context<'_>) -> Poll<Result<Option<C::Output>>> {
        self.done.poll(cx)
    }

    /// The future is dropped: the call ends at its next step, giving back
    /// what it took; an output it had reached but not handed over is
    /// dropped on the client's threads (its own drop gives it back).
    pub(super) fn cancel(self: &Arc<Self>) {
        match self.done.abandon() {
            Some(Ok(Some(output))) => {
                let _ = self.engine.tasks().spawn(Box::new(move || drop(output)));
            }
            Some(_) => {}
            None => self.schedule(),
        }
    }

    fn schedule(self: &Arc<Self>) {
        if self.queued.swap(true, Ordering::AcqRel) {
            return;
        }
        let me = Arc::clone(self);
        let step = Box::new(move || {
            me.queued.store(false, Ordering::Release);
            me.step();
        });
        if self.engine.tasks().spawn(step).is_err() {
            self.queued.store(false, Ordering::Release);
            self.step();
        }
    }

    fn callback(self: &Arc<Self>) -> Arc<dyn Fn() + Send + Sync> {
        let me = Arc::clone(self);
        Arc::new(move || me.schedule())
    }

    fn timer(self: &Arc<Self>, until: Instant) -> Option<TimerId> {
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

    /// One step: on as far as it goes without waiting; the end when over.
    fn step(self: &Arc<Self>) {
        let mut state = self.state.lock();
        if matches!(state.phase, Phase::Done) {
            return;
        }
        let abandoned = self.done.is_abandoned();
        if let Some(outcome) = self.advance(&mut state, abandoned) {
            state.phase = Phase::Done;
            state.subscription = None;
            let Some(call) = state.call.take() else {
                return;
            };
            drop(state);
            let output = call.end(outcome, abandoned);
            if let Err(Ok(Some(output))) = self.done.complete(output) {
                // Nobody takes it: its own drop gives it back, here.
                drop(output);
            }
        }
    }

    /// `WaitOn::until`'s loop from the phase the call is in.
    fn advance(
        self: &Arc<Self>,
        state: &mut WaitState<C>,
        abandoned: bool,
    ) -> Option<Result<Option<C::Found>>> {
        let timers = self.engine.tasks().timers();
        let tolerance = self.engine.server().config().outage_tolerance;
        loop {
            match std::mem::replace(&mut state.phase, Phase::Attempt) {
                Phase::Done => {
                    state.phase = Phase::Done;
                    return None;
                }
                Phase::Parked {
                    waiter,
                    until,
                    timer,
                } => {
                    let over = abandoned || Instant::now() >= until;
                    let woke = match waiter.outcome() {
                        Some(woke) => Some(woke),
                        None if over => state
                            .subscription
                            .as_ref()
                            .and_then(|s| s.leave_async(&waiter)),
                        None => None,
                    };
                    if woke.is_none() {
                        state.phase = Phase::Parked {
                            waiter,
                            until,
                            timer,
                        };
                        return None;
                    }
                    if let Some(timer) = timer {
                        timers.cancel(timer);
                    }
                    self.engine
                        .counters()
                        .parked
                        .fetch_sub(1, Ordering::Relaxed);
                }
                Phase::Attempt => {}
            }
            if abandoned {
                return Some(Ok(None));
            }
            let call = state.call.as_mut()?;
            let started = Instant::now();
            let mut look_within = None;
            match call.attempt() {
                Ok(Look::Done(found)) => return Some(Ok(Some(found))),
                Ok(Look::Again { within }) => {
                    state.outage = None;
                    look_within = within;
                }
                Err(e) => {
                    let cause = match outage_cause(e) {
                        Ok(cause) => cause,
                        Err(e) => return Some(Err(e)),
                    };
                    let going_on = match state.outage.take() {
                        Some(mut going_on) => {
                            going_on.failed_again(cause);
                            going_on
                        }
                        None => Outage::began(started, cause),
                    };
                    if going_on.exceeds(tolerance) {
                        return Some(Err(going_on.give_up(&self.name, tolerance)));
                    }
                    state.outage = Some(going_on);
                }
            }
            let mut pause = match &mut state.outage {
                Some(outage) => outage.next_pause(tolerance),
                None => look_within.map_or(RECHECK, |within| within.min(RECHECK)),
            };
            if let Some(deadline) = state.deadline {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Some(match state.outage.take() {
                        // Its own wait ran out while Redis was away.
                        Some(outage) => Err(outage.give_up(&self.name, None)),
                        None => Ok(None),
                    });
                }
                pause = pause.min(left);
            }
            if self.wait == Some(Duration::ZERO) {
                return Some(Ok(None));
            }
            if state.subscription.is_none() {
                let confirm_for = state.deadline.map_or(Duration::MAX, |d| {
                    d.saturating_duration_since(Instant::now())
                });
                state.subscription = Some(self.engine.pubsub().subscribe(
                    &self.channel,
                    &self.name,
                    confirm_for,
                ));
                if state.outage.is_none() {
                    // A message sent before the subscription went unheard:
                    // look again before parking.
                    continue;
                }
            }
            let until = crate::config::deadline_after(Instant::now(), pause);
            let subscription = state.subscription.as_ref()?;
            match subscription.park_async(None, Some(until), self.callback()) {
                // A wake-up was kept for it: look again now.
                Err(_) => continue,
                Ok(waiter) => {
                    self.engine
                        .counters()
                        .parked
                        .fetch_add(1, Ordering::Relaxed);
                    let timer = self.timer(until);
                    state.phase = Phase::Parked {
                        waiter,
                        until,
                        timer,
                    };
                    return None;
                }
            }
        }
    }
}
