//! An owner driven by tasks (issue 42): one thread polls up to three of
//! the owner's async acquires at once on the checker's own executor
//! (`executor.rs`), every kind and form (`lock_async`,
//! `lock_with_lease_async`, `try_lock_async`, `try_lock_for_async`, with a
//! lease, multi-locks and RedLocks, re-entries), and drops each at a point
//! of its choosing: never, after a few polls, after a while pending, or
//! without polling it at all after its start (its call may have ended
//! inside the client: "done but not polled"). Guards are released by a
//! drop (queued on the client's threads), by `unlock_async()` polled to
//! its end, or by an `unlock_async()` whose future is dropped at once.
//!
//! Now and then a future waits behind a hold of another thread (of the
//! owner's client: the release hands the lock straight to the parked
//! task; or of another client: the release wakes it) and is dropped
//! while parked, or right after the release, before it is polled again.
//!
//! The owner has a client of its own, so at rest (every future ended or
//! dropped, every request held back run) nothing of its may be parked,
//! and `rest.rs` judges its counts in Redis: a dropped future must leave
//! no field of its owner, no fair queue entry and no read-hold key (the
//! rule "dropped future left"), a future that completed gave a guard the
//! oracle judges as any hold.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::Poll;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use redhold::{Owner, UnlockFuture};

use super::executor::Executor;
use super::rest::{Rest, Spot, DROPPED_PARKED, REST_BOUND};
use super::{arm, owner_lease, ArmedFault, FaultPlan, OwnerHeld, OwnerLog, Quiet, HELD_BACK_MS};
use crate::actors::{ClientSlot, Helper, Interrupter, HELPER_BASE};
use crate::fault_proxy::Arming;
use crate::history::{ActorId, Event, HoldId, Recorder};
use crate::ops::{any_target, pick_name};
use crate::rng::Rng;
use crate::targets::{self, AcquireFuture, ClientSet, Kind, Method, Target};

/// The words of a rest's note: the schedule's summary counts them.
pub(crate) const ASYNC_REST: &str = "async rest";

/// Futures in flight at once.
const MAX_PENDING: usize = 3;
/// Guards and futures in flight together.
const MAX_GUARDS: usize = 4;
/// How long an active phase between two rests lasts (ms).
const PHASE_MS: (u64, u64) = (700, 2_000);
/// Waited past the last held-back request's run before a rest.
const SETTLE: Duration = Duration::from_millis(300);

/// What the task actor is started with.
#[derive(Debug, Clone)]
pub(crate) struct TasksSpec {
    pub(crate) id: ActorId,
    /// `p0.a0.o0`.
    pub(crate) label: String,
    pub(crate) seed: u64,
    /// A slot of its own: no other actor uses its client.
    pub(crate) slot: Arc<ClientSlot>,
    /// The schedule's other slots: their threads hold locks its futures
    /// wait behind.
    pub(crate) others: Vec<Arc<ClientSlot>>,
    pub(crate) recorder: Recorder,
    pub(crate) interrupts: Arc<Interrupter>,
    pub(crate) stop: Arc<AtomicBool>,
    pub(crate) stops_at: Instant,
    pub(crate) proxy: Option<Arming>,
    /// The main server's URL, not through the proxy.
    pub(crate) direct: String,
}

/// Starts the task actor; it returns how many operations it ran.
pub(crate) fn spawn(spec: TasksSpec) -> JoinHandle<u64> {
    thread::Builder::new()
        .name(format!("model-{}", spec.label))
        .spawn(move || Tasks::new(spec).run())
        .expect("spawn the task actor")
}

/// When a future in flight is dropped.
#[derive(Debug, Clone, Copy)]
enum DropPlan {
    /// Never: polled until it ends (or the rest comes).
    Finish,
    /// After this many polls.
    AfterPolls(u32),
    /// Polled when woken; dropped this long after its start if pending.
    After(Duration),
    /// Never polled; dropped this long after its start.
    Unpolled(Duration),
}

/// An acquire future in flight.
struct Pending {
    op: u64,
    target: Target,
    method: Method,
    future: AcquireFuture,
    plan: DropPlan,
    called: Instant,
    polls: u32,
    set: Arc<ClientSet>,
    fault: Option<ArmedFault>,
}

/// An `unlock_async()` in flight.
struct Unlocking {
    hold: HoldId,
    future: UnlockFuture,
}

/// How a blocked case's future ends.
#[derive(Debug, Clone, Copy)]
enum Blocked {
    /// Dropped while it waits behind the hold.
    WhileParked,
    /// Dropped right after the hold was released, before it is polled
    /// again (the lock may have been handed to it, or be on its way).
    AfterRelease,
    /// Polled until it gets the lock.
    Finish,
}

struct Tasks {
    spec: TasksSpec,
    owner: Owner,
    log: OwnerLog,
    exec: Executor,
    rng: Rng,
    held: Vec<OwnerHeld>,
    pending: Vec<Pending>,
    unlocking: Vec<Unlocking>,
    /// The locks touched, and those futures were dropped on, since the
    /// last rest.
    touched: Vec<Target>,
    dropped_on: Vec<&'static str>,
    quiet: Quiet,
    ops: u64,
    rests: u64,
    next_helper_op: u64,
}

impl Tasks {
    fn new(spec: TasksSpec) -> Tasks {
        let owner = Owner::new();
        let log = OwnerLog::start(spec.id, spec.label.clone(), spec.recorder.clone(), owner);
        let rng = Rng::stream(spec.seed, 40_000 + u64::from(spec.id));
        Tasks {
            spec,
            owner,
            log,
            exec: Executor::new(),
            rng,
            held: Vec::new(),
            pending: Vec::new(),
            unlocking: Vec::new(),
            touched: Vec::new(),
            dropped_on: Vec::new(),
            quiet: Quiet::default(),
            ops: 0,
            rests: 0,
            next_helper_op: 0,
        }
    }

    fn stopped(&self) -> bool {
        self.spec.stop.load(Ordering::SeqCst)
    }

    fn run(mut self) -> u64 {
        let tail = Duration::from_millis(HELD_BACK_MS.1) + SETTLE;
        while !self.stopped() {
            let phase = self.rng.millis(PHASE_MS.0, PHASE_MS.1);
            // Only a phase whose rest is judged before the schedule stops.
            if Instant::now() + phase + tail >= self.spec.stops_at {
                break;
            }
            self.active(Instant::now() + phase);
            self.rest(false);
        }
        self.rest(true);
        self.log.record(Event::Done {
            actor: self.log.id,
            ops: self.ops,
        });
        self.ops
    }

    /// Starts, polls and drops futures and releases guards until `until`.
    fn active(&mut self, until: Instant) {
        while Instant::now() < until && !self.stopped() {
            self.ops += 1;
            let in_flight = self.pending.len();
            let room = in_flight < MAX_PENDING && self.held.len() + in_flight < MAX_GUARDS;
            match self.rng.below(100) {
                0..=39 if room => self.start(),
                40..=45 if in_flight == 0 && self.unlocking.is_empty() && room => {
                    self.blocked();
                }
                46..=70 if !self.held.is_empty() => {
                    let index = self.rng.below(self.held.len() as u64) as usize;
                    self.release(index);
                }
                _ => {}
            }
            self.poll_all();
            let nap = Instant::now() + self.rng.millis(2, 40);
            let due = self.next_due().map_or(nap, |d| d.min(nap));
            self.exec.park_until(due);
            self.poll_all();
        }
    }

    fn set(&self) -> Option<Arc<ClientSet>> {
        let set = self.spec.slot.current();
        (!set.clients[0].is_shut_down()).then_some(set)
    }

    fn touch(&mut self, target: &Target) {
        if !self.touched.contains(target) {
            self.touched.push(target.clone());
        }
    }

    /// An acquire's target and async form: a re-entry of a held lock, or
    /// any lock.
    fn draw(&mut self) -> (Target, Method) {
        let rng = &mut self.rng;
        let target = if !self.held.is_empty() && rng.chance(40) {
            rng.pick(&self.held).target.clone()
        } else {
            any_target(rng)
        };
        let method = match rng.below(100) {
            0..=14 => Method::Lock,
            15..=24 => Method::LockLease(owner_lease(rng)),
            25..=44 => Method::TryLock,
            45..=74 => Method::TryFor(rng.millis(1, 500)),
            _ => Method::TryForLease(rng.millis(0, 500), owner_lease(rng)),
        };
        (target, method)
    }

    /// Starts an acquire future with a drop plan.
    fn start(&mut self) {
        let Some(set) = self.set() else { return };
        let (target, method) = self.draw();
        let plan = match self.rng.below(100) {
            0..=34 => DropPlan::Finish,
            35..=54 => DropPlan::AfterPolls(self.rng.range(0, 2) as u32),
            55..=79 => DropPlan::After(self.rng.millis(0, 400)),
            _ => DropPlan::Unpolled(self.rng.millis(0, 300)),
        };
        let reentrant = self.held.iter().any(|h| h.target == target);
        let op = self
            .log
            .call(&set, &target, method, method.async_label(), reentrant);
        let fault = match (FaultPlan::draw(&mut self.rng), self.spec.proxy.as_ref()) {
            (Some(plan), Some(proxy)) => arm(proxy, &set, &target, self.owner, false, plan),
            _ => None,
        };
        let called = Instant::now();
        let future = targets::acquire_async(&set, &target, method, self.owner);
        self.touch(&target);
        self.pending.push(Pending {
            op,
            target,
            method,
            future,
            plan,
            called,
            polls: 0,
            set,
            fault,
        });
    }

    /// When the next future is due to be dropped.
    fn next_due(&self) -> Option<Instant> {
        self.pending
            .iter()
            .filter_map(|p| match p.plan {
                DropPlan::After(d) | DropPlan::Unpolled(d) => Some(p.called + d),
                _ => None,
            })
            .min()
    }

    /// Polls every future in flight, ends those that are ready and drops
    /// those whose time came.
    fn poll_all(&mut self) {
        let now = Instant::now();
        let mut i = 0;
        while i < self.pending.len() {
            let (plan, called, polls) = {
                let p = &self.pending[i];
                (p.plan, p.called, p.polls)
            };
            let drop_now = match plan {
                DropPlan::Unpolled(d) if now >= called + d => Some("dropped-unpolled"),
                DropPlan::Unpolled(_) => {
                    i += 1;
                    continue;
                }
                DropPlan::AfterPolls(0) => Some("dropped-unpolled"),
                DropPlan::AfterPolls(n) if polls >= n => Some("dropped-pending"),
                _ => None,
            };
            if let Some(how) = drop_now {
                let p = self.pending.swap_remove(i);
                self.dropped(p, how);
                continue;
            }
            let p = &mut self.pending[i];
            p.polls += 1;
            let polled = self.exec.poll(p.future.as_mut());
            match polled {
                Poll::Ready(outcome) => {
                    let p = self.pending.swap_remove(i);
                    self.ended(p, outcome);
                }
                Poll::Pending if matches!(plan, DropPlan::After(d) if now >= called + d) => {
                    let p = self.pending.swap_remove(i);
                    self.dropped(p, "dropped-pending");
                }
                Poll::Pending => i += 1,
            }
        }
        let mut i = 0;
        while i < self.unlocking.len() {
            let polled = self
                .exec
                .poll(std::pin::Pin::new(&mut self.unlocking[i].future));
            match polled {
                Poll::Ready(result) => {
                    let u = self.unlocking.swap_remove(i);
                    self.log.record(Event::Released {
                        actor: self.log.id,
                        hold: u.hold,
                        result: targets::outcome(&result),
                    });
                }
                Poll::Pending => i += 1,
            }
        }
    }

    /// A future in flight is dropped (`how`: at which point).
    fn dropped(&mut self, p: Pending, how: &str) {
        let Pending {
            op,
            target,
            future,
            fault,
            ..
        } = p;
        drop(future);
        self.log.miss(op, how.to_owned());
        if let Some(fault) = fault {
            fault.settle(&self.log, &self.quiet, "a future that was dropped");
        }
        for spot in Spot::of(&target) {
            if !self.dropped_on.contains(&spot.name) {
                self.dropped_on.push(spot.name);
            }
        }
    }

    /// A future ended with `outcome`.
    fn ended(&mut self, p: Pending, outcome: redhold::Result<Option<targets::AnyGuard<Owner>>>) {
        let entered = Instant::now();
        if let Some(fault) = p.fault {
            fault.settle(&self.log, &self.quiet, &p.method.async_label());
        }
        match outcome {
            Ok(Some(guard)) => {
                let hold = self.log.enter(&p.set, p.target.kind, p.op, &guard, entered);
                self.held.push(OwnerHeld {
                    hold,
                    target: p.target,
                    guard,
                    set: p.set,
                    lease: p.method.lease(),
                    called: p.called,
                    taken_on: "task",
                    reported: false,
                });
            }
            Ok(None) => self.log.miss(p.op, "busy".into()),
            Err(e) => self.log.miss(p.op, targets::error_word(&e)),
        }
    }

    /// Releases guard `index`: a drop (the release is queued on the
    /// client's threads), `unlock_async()` polled to its end, or an
    /// `unlock_async()` whose future is dropped at once (the release goes
    /// on).
    fn release(&mut self, index: usize) {
        let h = self.held.swap_remove(index);
        self.touch(&h.target);
        let how = self.rng.below(100);
        let word = match how {
            0..=39 => "drop",
            40..=79 => "unlock_async",
            _ => "unlock_async, its future dropped",
        };
        self.log.record(Event::Exit {
            actor: self.log.id,
            hold: h.hold,
            how: format!("{word} on the task thread"),
            held: h.guard.is_held(),
        });
        let fault = match (FaultPlan::draw(&mut self.rng), self.spec.proxy.as_ref()) {
            (Some(plan), Some(proxy)) => arm(proxy, &h.set, &h.target, self.owner, true, plan),
            _ => None,
        };
        let result = if how < 40 {
            drop(h.guard);
            Some("queued".to_owned())
        } else {
            match h.guard.unlock_async() {
                Ok(future) if how < 80 => {
                    self.unlocking.push(Unlocking {
                        hold: h.hold,
                        future,
                    });
                    None
                }
                Ok(future) => {
                    drop(future);
                    Some("queued".to_owned())
                }
                // A multi-lock's guard: its own unlock.
                Err(guard) => Some(targets::outcome(&guard.unlock())),
            }
        };
        if let Some(fault) = fault {
            fault.settle(&self.log, &self.quiet, "a release of the task thread");
        }
        if let Some(result) = result {
            self.log.record(Event::Released {
                actor: self.log.id,
                hold: h.hold,
                result,
            });
        }
    }

    /// A future that waits behind another thread's hold (of the owner's
    /// client or another) and is dropped while parked, right after the
    /// release, or polled until it gets the lock.
    fn blocked(&mut self) {
        let Some(set) = self.set() else { return };
        let kind = *self.rng.pick(&[
            Kind::Plain,
            Kind::Fair,
            Kind::Fenced,
            Kind::Spin,
            Kind::Read,
        ]);
        let name = pick_name(&mut self.rng, kind);
        let target = Target {
            kind,
            names: vec![name],
        };
        // A reader waits for a writer.
        let blocker_target = Target {
            kind: if kind == Kind::Read {
                Kind::Write
            } else {
                kind
            },
            names: vec![name],
        };
        let same_client = self.rng.chance(50) || self.spec.others.is_empty();
        let blocker_set = if same_client {
            Arc::clone(&set)
        } else {
            let at = self.rng.below(self.spec.others.len() as u64) as usize;
            self.spec.others[at].current()
        };
        let hold = self.rng.millis(300, 900);
        let first = self.next_helper_op;
        self.next_helper_op += 4;
        let helper = Helper {
            id: HELPER_BASE + 8 * self.spec.id,
            label: format!("{}.b", self.spec.label),
            first,
            set: blocker_set,
            target: blocker_target,
            method: Method::TryFor(Duration::from_millis(300)),
            recorder: self.log.recorder().clone(),
            interrupts: Arc::clone(&self.spec.interrupts),
            hold,
        };
        let Ok(blocker) = thread::Builder::new()
            .name(format!("model-{}", helper.label))
            .spawn(move || helper.run())
        else {
            return;
        };
        thread::sleep(Duration::from_millis(60));
        let method = match self.rng.below(4) {
            0 => Method::Lock,
            1 => Method::LockLease(owner_lease(&mut self.rng)),
            2 => Method::TryFor(self.rng.millis(2_000, 4_000)),
            _ => Method::TryForLease(self.rng.millis(2_000, 4_000), owner_lease(&mut self.rng)),
        };
        let end = match self.rng.below(100) {
            0..=34 => Blocked::WhileParked,
            35..=79 => Blocked::AfterRelease,
            _ => Blocked::Finish,
        };
        let reentrant = self.held.iter().any(|h| h.target == target);
        let op = self
            .log
            .call(&set, &target, method, method.async_label(), reentrant);
        let called = Instant::now();
        let mut future = targets::acquire_async(&set, &target, method, self.owner);
        self.touch(&target);
        let mut outcome = match self.exec.poll(future.as_mut()) {
            Poll::Ready(outcome) => Some(outcome),
            Poll::Pending => None,
        };
        if outcome.is_none() {
            match end {
                Blocked::WhileParked => {
                    let parked = hold.saturating_sub(Duration::from_millis(120));
                    thread::sleep(self.rng.millis(20, parked.as_millis().max(21) as u64));
                }
                Blocked::AfterRelease => {
                    // The blocker ends right after its release returned.
                    let limit = Instant::now() + Duration::from_secs(5);
                    while !blocker.is_finished() && Instant::now() < limit {
                        thread::sleep(Duration::from_millis(1));
                    }
                    thread::sleep(self.rng.millis(0, 15));
                }
                Blocked::Finish => {
                    outcome = self.exec.block_on(&mut future, Duration::from_secs(5));
                }
            }
        }
        let pending = Pending {
            op,
            target,
            method,
            future,
            plan: DropPlan::Finish,
            called,
            polls: 1,
            set,
            fault: None,
        };
        match outcome {
            Some(outcome) => self.ended(pending, outcome),
            None => self.dropped(
                pending,
                match end {
                    Blocked::WhileParked => "dropped-parked",
                    _ => "dropped-after-release",
                },
            ),
        }
        let _ = crate::joins::join_within(blocker, Duration::from_secs(5));
    }

    /// The rest (`last`: the wind-down's, after every guard is released):
    /// every future still in flight is dropped, every `unlock_async()`
    /// polled to its end, the leased guards released; once every request
    /// held back ran, nothing of the client may be parked and `rest.rs`
    /// judges the owner's counts.
    fn rest(&mut self, last: bool) {
        self.rests += 1;
        for p in std::mem::take(&mut self.pending) {
            self.dropped(p, "dropped-at-rest");
        }
        let mut i = 0;
        while i < self.held.len() {
            if last || self.held[i].lease.is_some() || self.rng.chance(10) {
                self.release(i);
            } else {
                i += 1;
            }
        }
        for u in std::mem::take(&mut self.unlocking) {
            let result = self
                .exec
                .block_on(u.future, REST_BOUND)
                .map_or_else(|| "queued".to_owned(), |r| targets::outcome(&r));
            self.log.record(Event::Released {
                actor: self.log.id,
                hold: u.hold,
                result,
            });
        }
        if let Some(quiet) = self.quiet.until() {
            let until = quiet + SETTLE;
            let now = Instant::now();
            if until > now {
                thread::sleep(until - now);
            }
        }
        let Some(set) = self.set() else { return };
        self.parked_at_rest(&set);
        let rest = Rest {
            log: &self.log,
            owner: self.owner,
            set: &set,
            direct: &self.spec.direct,
            case: format!("{ASYNC_REST} {}", self.rests),
        };
        let guards: Vec<&OwnerHeld> = self.held.iter().collect();
        let judged = rest.judge(&guards, &self.touched, &self.dropped_on);
        self.log.note(format!(
            "{}: {ASYNC_REST} {}: {judged} lock(s) judged, {} guard(s) standing, futures dropped \
             on {:?} since the last rest",
            self.spec.label,
            self.rests,
            self.held.len(),
            self.dropped_on
        ));
        self.touched.clear();
        self.dropped_on.clear();
    }

    /// No call of the owner's is under way: nothing of its client may be
    /// parked (a dropped future that never left its line).
    fn parked_at_rest(&self, set: &ClientSet) {
        let parked = || -> usize { set.clients.iter().map(|c| c.stats().parked_waiters).sum() };
        let deadline = Instant::now() + REST_BOUND;
        let mut now = parked();
        while now > 0 && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(25));
            now = parked();
        }
        if now > 0 && set.shutdown_began.get().is_none() {
            self.log.flag(format!(
                "{DROPPED_PARKED} {now} waiter(s) of client {} still parked {} ms into a rest of \
                 its task thread ({ASYNC_REST} {}), with none of its futures in flight",
                set.tag,
                REST_BOUND.as_millis(),
                self.rests
            ));
        }
    }
}
