//! An acquire for an async caller: the same steps as a thread's
//! (`wait.rs`: a first attempt, then subscribe, try again, park until a
//! release is announced or the lock's TTL runs out, ride out outages), but
//! driven by events on the client's own threads instead of a parked
//! thread. Each step runs on the I/O pool (`tasks/pool.rs`): attempts,
//! subscriptions and the call's end do their Redis I/O there. A waiting
//! call is an entry in the channel's line, woken by the subscriber thread
//! through a callback, and a timer for its park's end: no thread.
//!
//! | phase | waits for | then |
//! |---|---|---|
//! | `Start` | its first step | the first attempt, the subscription |
//! | `Loop` | nothing (within one step) | a courtesy pause, an attempt, a park |
//! | `Parked` | a wake-up, a hand-over, or its timer | `Loop`, or the end |
//! | `Sleeping` | its timer (a backoff or a courtesy slice) | `Loop` |
//! | `Done` | - | - |
//!
//! Its future only polls the outcome (`tasks/completion.rs`). Dropped, the
//! future leaves the call to end on its own at its next step: a parked
//! waiter leaves the line (passing on a wake-up it was handed), a hold it
//! was handed or took is given back, and the call's end runs as for a
//! thread's (a fair queue left, the undos behind late attempts written).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::finish::Acquired;
use super::outage::Outage;
use super::{CallState, CountedCall, Engine, LockRef, Mode};
use crate::holding::Holder;
use crate::kind::sealed::KindOps;
use crate::pubsub::{Offer, Subscription, Waiter};
use crate::tasks::completion::Completion;
use crate::tasks::timers::TimerId;

mod advance;
mod round;

/// One async acquire call of a lock, shared by its future, its steps and
/// the callbacks that schedule them.
pub(crate) struct AsyncAcquire<K: KindOps> {
    engine: Arc<Engine>,
    name: Arc<str>,
    kind: K,
    /// `Some(ZERO)`: one try, no queue.
    wait: Option<Duration>,
    /// A step is queued: wake-ups meanwhile are seen by it.
    queued: AtomicBool,
    state: Mutex<Driving>,
    done: Completion<Acquired<K::Grant>>,
}

impl<K: KindOps> std::fmt::Debug for AsyncAcquire<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AsyncAcquire")
            .field("name", &self.name)
            .field("kind", &K::DESCRIPTION)
            .finish_non_exhaustive()
    }
}

/// What the call keeps between its steps: a thread's locals in `wait.rs`.
struct Driving {
    call: CallState,
    counted: Option<CountedCall>,
    phase: Phase,
    /// When the wait ends (`None`: never).
    deadline: Option<Instant>,
    subscription: Option<Subscription>,
    offer: Option<Offer>,
    outage: Option<Outage>,
    /// The first try's answer, while it still stands (see `FirstBusy`).
    busy_still: Option<i64>,
    /// The first attempt found Redis away: sleep a backoff first.
    pause_first: bool,
    failures: u32,
    /// A release reserved this waiter and left the hand-over unconfirmed.
    maybe_handed: bool,
    /// The last park ended with a wake-up handed to this waiter.
    handed_wake_up: bool,
    /// A courtesy pause is under way (counted once), or was before the
    /// attempt being made.
    in_courtesy: bool,
}

enum Phase {
    Start,
    Loop,
    Parked {
        waiter: Arc<Waiter>,
        until: Option<Instant>,
        timer: Option<TimerId>,
    },
    Sleeping {
        until: Instant,
        timer: Option<TimerId>,
        /// Counted as parked (a spin lock's backoff, as a thread's is;
        /// not a courtesy slice).
        parked: bool,
    },
    Done,
}

impl Engine {
    /// Starts an async acquire of the lock `name` of kind `kind` for
    /// `holder` (an owner), waiting at most `wait` (forever: `None`), with
    /// `lease` or renewed by the watchdog. Its first step is queued at once.
    pub(crate) fn acquire_async<K: KindOps>(
        self: &Arc<Self>,
        name: Arc<str>,
        kind: K,
        holder: Holder,
        lease: Option<Duration>,
        wait: Option<Duration>,
    ) -> crate::error::Result<Arc<AsyncAcquire<K>>> {
        let call = self.begin_call(
            LockRef {
                name: &name,
                kind: &kind,
            },
            holder,
            lease,
        )?;
        let driver = Arc::new(AsyncAcquire {
            engine: Arc::clone(self),
            name,
            kind,
            wait,
            queued: AtomicBool::new(false),
            state: Mutex::new(Driving {
                call,
                // Counted until it ends, so that shutdown waits for it to
                // leave its queue and give back what it took.
                counted: Some(self.count_call()),
                phase: Phase::Start,
                // A wait too long to represent is no wait limit at all.
                deadline: wait.and_then(|w| Instant::now().checked_add(w)),
                subscription: None,
                offer: None,
                outage: None,
                busy_still: None,
                pause_first: false,
                failures: 0,
                maybe_handed: false,
                handed_wake_up: false,
                in_courtesy: false,
            }),
            done: Completion::default(),
        });
        driver.schedule();
        Ok(driver)
    }
}

impl<K: KindOps> AsyncAcquire<K> {
    /// The outcome, once the call has ended.
    pub(crate) fn poll(&self, cx: &mut Context<'_>) -> Poll<Acquired<K::Grant>> {
        self.done.poll(cx)
    }

    /// The future is dropped: the call ends at its next step, giving back
    /// what it holds; an outcome it had reached but not handed over is
    /// given back now, from the client's threads.
    pub(crate) fn cancel(self: &Arc<Self>) {
        match self.done.abandon() {
            Some(Ok(Some((hold, _)))) => {
                let me = Arc::clone(self);
                let give_back = move || {
                    let lock = LockRef {
                        name: &me.name,
                        kind: &me.kind,
                    };
                    // A release like a guard's drop: logged if it fails.
                    if let Err(e) = me.engine.release(lock, &hold, Mode::Drop) {
                        log::warn!(
                            "redhold: giving back {:?}, taken for a dropped future, failed: {}",
                            crate::names::shorten(&me.name),
                            e.report()
                        );
                    }
                };
                if let Err(e) = self.engine.tasks().spawn(Box::new(give_back)) {
                    log::warn!(
                        "redhold: a hold taken for a dropped future of {:?} is left to its \
                         lease: {}",
                        crate::names::shorten(&self.name),
                        e.report()
                    );
                }
            }
            Some(_) => {}
            // Not ended yet: its next step sees the future gone.
            None => self.schedule(),
        }
    }

    /// Queues one step on the client's I/O pool, unless one is queued
    /// already (it will see what happened). Once the pool is shut down the
    /// step runs here: every Redis call fails fast then.
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

    /// What a waiter's wake-up or a timer runs: schedules the next step.
    fn callback(self: &Arc<Self>) -> Arc<dyn Fn() + Send + Sync> {
        let me = Arc::clone(self);
        Arc::new(move || me.schedule())
    }

    /// One step: moves the call on as far as it can without waiting, and
    /// ends it when it is over.
    fn step(self: &Arc<Self>) {
        let mut driving = self.state.lock();
        if matches!(driving.phase, Phase::Done) {
            return;
        }
        if let Some(outcome) = self.advance(&mut driving) {
            self.end(&mut driving, outcome);
        }
    }
}
