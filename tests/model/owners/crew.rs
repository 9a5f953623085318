//! One owner driven from 2 to 4 threads of one client at once (issue 41).
//!
//! The crew works in rounds. In a round (0.5 to 1.8 s) every thread of
//! the owner acquires, mostly the round's one or two focus locks (so that
//! the owner's calls on one lock from several threads meet on its lane),
//! with every kind and form of acquire (`lock()` and `lock_with_lease`
//! only as re-entries of a lock the thread holds, bounded waits
//! otherwise: `try_lock`, `try_lock_for`, with leases, interruptible),
//! re-enters what it holds, releases (drop or `unlock()`) guards that
//! other threads took, and sends guards to its siblings through channels.
//! Now and then the proxy loses the owner's next request on a lock (an
//! acquire attempt or a release), its reply, or holds either back past
//! the response timeout; in a quarter of the rounds every request (or
//! release) of the owner on a focus lock is held back for a while.
//!
//! At a round's end the threads release their leased guards, gather every
//! guard in one pool, and rest: once every request held back has run,
//! `rest.rs` judges the owner's counts in Redis, a thread of another
//! client tries each lock the owner holds (the mutual exclusion rule
//! judges it), and the pool is dealt out again at random: a guard is taken
//! on one thread and released on another. The last round releases
//! everything and judges that nothing of the owner is left.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Barrier};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use redhold::Owner;

use super::rest::Rest;
use super::{arm, owner_lease, owner_matcher, FaultPlan, OwnerHeld, OwnerLog, Quiet, HELD_BACK_MS};
use crate::actors::{ClientSlot, Helper, Interrupter, HELPER_BASE};
use crate::fault_proxy::{Action, Arming, Rule};
use crate::history::{ActorId, Recorder};
use crate::ops::any_target;
use crate::rng::Rng;
use crate::targets::{self, Kind, Method, Target};

/// The words of a round's note: the schedule's summary counts them.
pub(crate) const OWNER_ROUND: &str = "owner round";

/// The names of the owner's threads in its events.
const THREADS: [&str; 4] = ["t0", "t1", "t2", "t3"];

/// How long a round's threads work (ms).
const ROUND_MS: (u64, u64) = (500, 1_800);

/// The most guards one thread keeps.
const MAX_GUARDS: usize = 4;

/// How long a standing rule of a round holds the owner's requests on its
/// focus lock back (ms), and for how long it stands.
const STANDING_WINDOW_MS: (u64, u64) = (300, 1_000);

/// Waited past the last held-back request's run before a rest: the server
/// has run it and whatever followed it on its connection.
const SETTLE: Duration = Duration::from_millis(300);

/// What the crew is started with.
#[derive(Debug, Clone)]
pub(crate) struct CrewSpec {
    pub(crate) id: ActorId,
    /// `p0.c1.o0`.
    pub(crate) label: String,
    pub(crate) seed: u64,
    /// The client slot its threads use (shared with the slot's actors).
    pub(crate) slot: Arc<ClientSlot>,
    /// The other slots: their threads try the owner's locks at rest.
    pub(crate) others: Vec<Arc<ClientSlot>>,
    pub(crate) recorder: Recorder,
    pub(crate) interrupts: Arc<Interrupter>,
    pub(crate) stop: Arc<AtomicBool>,
    pub(crate) stops_at: Instant,
    pub(crate) proxy: Option<Arming>,
    /// The main server's URL, not through the proxy.
    pub(crate) direct: String,
}

/// Starts the crew; its thread returns how many operations the owner's
/// threads ran.
pub(crate) fn spawn(spec: CrewSpec) -> JoinHandle<u64> {
    thread::Builder::new()
        .name(format!("model-{}", spec.label))
        .spawn(move || run(spec))
        .expect("spawn an owner crew")
}

/// One round, as its threads see it.
#[derive(Debug, Clone)]
struct Round {
    focus: Vec<Target>,
    until: Instant,
    /// The last round: every guard is released, nothing new taken.
    last: bool,
}

/// What the owner's threads share.
struct Shared {
    owner: Owner,
    log: OwnerLog,
    slot: Arc<ClientSlot>,
    interrupts: Arc<Interrupter>,
    stop: Arc<AtomicBool>,
    proxy: Option<Arming>,
    quiet: Quiet,
    /// The threads and the coordinator: a round's start, its end, the
    /// pool gathered.
    barrier: Barrier,
    round: Mutex<Round>,
    /// Guards dealt to each thread at a round's start.
    dealt: Mutex<Vec<Vec<OwnerHeld>>>,
    /// Every guard, gathered at a round's end.
    pool: Mutex<Vec<OwnerHeld>>,
    /// The locks the round took or released.
    touched: Mutex<Vec<Target>>,
    ops: AtomicU64,
}

impl Shared {
    fn touch(&self, target: &Target) {
        let mut touched = self.touched.lock();
        if !touched.contains(target) {
            touched.push(target.clone());
        }
    }
}

fn run(spec: CrewSpec) -> u64 {
    let owner = Owner::new();
    let log = OwnerLog::start(spec.id, spec.label.clone(), spec.recorder.clone(), owner);
    let mut rng = Rng::stream(spec.seed, 30_000 + u64::from(spec.id));
    let threads = rng.range(2, 4) as usize;
    let shared = Arc::new(Shared {
        owner,
        log: log.clone(),
        slot: Arc::clone(&spec.slot),
        interrupts: Arc::clone(&spec.interrupts),
        stop: Arc::clone(&spec.stop),
        proxy: spec.proxy.clone(),
        quiet: Quiet::default(),
        barrier: Barrier::new(threads + 1),
        round: Mutex::new(Round {
            focus: Vec::new(),
            until: Instant::now(),
            last: false,
        }),
        dealt: Mutex::new((0..threads).map(|_| Vec::new()).collect()),
        pool: Mutex::new(Vec::new()),
        touched: Mutex::new(Vec::new()),
        ops: AtomicU64::new(0),
    });
    let (senders, receivers): (Vec<Sender<OwnerHeld>>, Vec<Receiver<OwnerHeld>>) =
        (0..threads).map(|_| mpsc::channel()).unzip();
    let workers: Vec<JoinHandle<()>> = receivers
        .into_iter()
        .enumerate()
        .map(|(me, inbox)| {
            let worker = Worker {
                shared: Arc::clone(&shared),
                me,
                rng: Rng::stream(spec.seed, 30_100 + 16 * u64::from(spec.id) + me as u64),
                held: Vec::new(),
                inbox,
                siblings: senders.clone(),
            };
            thread::Builder::new()
                .name(format!("model-{}.{}", spec.label, THREADS[me]))
                .spawn(move || worker.run())
                .expect("spawn an owner's thread")
        })
        .collect();
    drop(senders);
    let mut coordinator = Coordinator {
        spec,
        shared,
        rng,
        threads,
        next_helper_op: 0,
    };
    coordinator.run();
    for worker in workers {
        let _ = crate::joins::join_within(worker, Duration::from_secs(10));
    }
    let ops = coordinator.shared.ops.load(Ordering::SeqCst);
    log.record(crate::history::Event::Done { actor: log.id, ops });
    ops
}

/// The crew's own thread: plans rounds, deals the guards out, rests.
struct Coordinator {
    spec: CrewSpec,
    shared: Arc<Shared>,
    rng: Rng,
    threads: usize,
    next_helper_op: u64,
}

impl Coordinator {
    /// Runs rounds until the schedule stops (or none fits before it
    /// does).
    fn run(&mut self) {
        let mut index = 0;
        loop {
            index += 1;
            let now = Instant::now();
            let length = self.rng.millis(ROUND_MS.0, ROUND_MS.1);
            // Only a round that can be judged before the schedule stops.
            let tail = Duration::from_millis(HELD_BACK_MS.1 + STANDING_WINDOW_MS.1) + SETTLE;
            let last = self.shared.stop.load(Ordering::SeqCst)
                || now + length + tail >= self.spec.stops_at;
            let focus: Vec<Target> = (0..self.rng.range(1, 2))
                .map(|_| self.focus_target())
                .collect();
            let generation = self.shared.slot.current().tag.clone();
            *self.shared.round.lock() = Round {
                focus: focus.clone(),
                until: if last { now } else { now + length },
                last,
            };
            self.deal();
            self.shared.touched.lock().clear();
            self.shared.barrier.wait();
            let standing = if last { None } else { self.standing(&focus[0]) };
            if let Some((armed, window)) = standing {
                let until = Instant::now() + window;
                while Instant::now() < until && !self.shared.stop.load(Ordering::SeqCst) {
                    thread::sleep(Duration::from_millis(20));
                }
                armed.disarm();
            }
            self.shared.barrier.wait();
            self.shared.barrier.wait();
            self.rest(index, &generation, last);
            if last {
                return;
            }
        }
    }

    /// A focus lock: any kind, mostly single locks.
    fn focus_target(&mut self) -> Target {
        loop {
            let target = any_target(&mut self.rng);
            if target.kind.single() || self.rng.chance(30) {
                return target;
            }
        }
    }

    /// Deals the pool out to the threads at random.
    fn deal(&mut self) {
        let mut pool = self.shared.pool.lock();
        let mut dealt = self.shared.dealt.lock();
        for held in pool.drain(..) {
            let to = self.rng.below(self.threads as u64) as usize;
            dealt[to].push(held);
        }
    }

    /// A quarter of the rounds: every request of the owner on `target`'s
    /// lock (or every release, 60 % of those) is held back for a while.
    fn standing(&mut self, target: &Target) -> Option<(crate::fault_proxy::Armed, Duration)> {
        let proxy = self.shared.proxy.as_ref()?;
        if !self.rng.chance(25) {
            return None;
        }
        let set = self.shared.slot.current();
        let releases = self.rng.chance(60);
        let matcher = owner_matcher(&set, target, self.shared.owner, releases)?;
        let delay = self.rng.millis(HELD_BACK_MS.0, HELD_BACK_MS.1);
        let window = self.rng.millis(STANDING_WINDOW_MS.0, STANDING_WINDOW_MS.1);
        let armed = proxy.arm_for(
            Rule {
                matcher,
                action: Action::DelayRequest(delay),
            },
            window,
        );
        self.shared.quiet.extend(Instant::now() + window + delay);
        self.shared.log.note(format!(
            "{}: {} every {} of the owner on {} held back {} ms for {} ms",
            self.spec.label,
            super::OWNER_FAULT,
            if releases { "release" } else { "request" },
            target.joined(),
            delay.as_millis(),
            window.as_millis()
        ));
        Some((armed, window))
    }

    /// The rest after round `index`: waits until every request held back
    /// ran, judges the owner's counts, lets another client try each lock
    /// the owner holds.
    fn rest(&mut self, index: u64, generation: &str, last: bool) {
        if let Some(quiet) = self.shared.quiet.until() {
            let until = quiet + SETTLE;
            let now = Instant::now();
            if until > now {
                thread::sleep(until - now);
            }
        }
        let set = self.shared.slot.current();
        let pool = std::mem::take(&mut *self.shared.pool.lock());
        let touched = self.shared.touched.lock().clone();
        let judged = if set.tag == generation {
            let rest = Rest {
                log: &self.shared.log,
                owner: self.shared.owner,
                set: &set,
                direct: &self.spec.direct,
                case: format!("{OWNER_ROUND} {index}"),
            };
            let guards: Vec<&OwnerHeld> = pool.iter().collect();
            rest.judge(&guards, &touched, &[])
        } else {
            0
        };
        if !last && judged > 0 {
            self.intrude(&pool);
        }
        self.shared.log.note(format!(
            "{}: {OWNER_ROUND} {index} on {} thread(s): {} lock(s) judged at rest, {} guard(s) \
             standing{}",
            self.spec.label,
            self.threads,
            judged,
            pool.len(),
            if set.tag == generation {
                ""
            } else {
                " (its client was restarted: not judged)"
            }
        ));
        *self.shared.pool.lock() = pool;
    }

    /// A thread of another client tries each lock the owner holds through
    /// the current client (a reader's lock as a writer): the oracle's
    /// mutual exclusion rule judges what it gets.
    fn intrude(&mut self, pool: &[OwnerHeld]) {
        let current = self.shared.slot.current();
        let mut tried: Vec<Target> = Vec::new();
        for held in pool.iter().filter(|h| Arc::ptr_eq(&h.set, &current)) {
            let target = match held.target.kind {
                Kind::Red => continue,
                Kind::Read => Target {
                    kind: Kind::Write,
                    names: held.target.names.clone(),
                },
                _ => held.target.clone(),
            };
            if tried.contains(&target) || tried.len() >= 3 {
                continue;
            }
            tried.push(target.clone());
            let Some(other) = self
                .spec
                .others
                .get(self.rng.below(self.spec.others.len().max(1) as u64) as usize)
            else {
                return;
            };
            let k = tried.len() as ActorId - 1;
            let first = self.next_helper_op;
            self.next_helper_op += 4;
            let helper = Helper {
                id: HELPER_BASE + 8 * self.spec.id + k,
                label: format!("{}.x{k}", self.spec.label),
                first,
                set: other.current(),
                target,
                method: Method::TryLock,
                recorder: self.spec.recorder.clone(),
                interrupts: Arc::clone(&self.spec.interrupts),
                hold: Duration::ZERO,
            };
            if let Ok(t) = thread::Builder::new()
                .name(format!("model-{}", helper.label))
                .spawn(move || helper.run())
            {
                let _ = crate::joins::join_within(t, Duration::from_secs(5));
            }
        }
    }
}

/// One thread of the owner.
struct Worker {
    shared: Arc<Shared>,
    me: usize,
    rng: Rng,
    held: Vec<OwnerHeld>,
    inbox: Receiver<OwnerHeld>,
    siblings: Vec<Sender<OwnerHeld>>,
}

#[derive(Debug, Clone, Copy)]
enum Choice {
    Acquire,
    Release,
    Send,
    Work,
}

impl Worker {
    fn name(&self) -> &'static str {
        THREADS[self.me]
    }

    fn run(mut self) {
        loop {
            self.shared.barrier.wait();
            let dealt = std::mem::take(&mut self.shared.dealt.lock()[self.me]);
            self.held.extend(dealt);
            let round = self.shared.round.lock().clone();
            while !round.last
                && Instant::now() < round.until
                && !self.shared.stop.load(Ordering::SeqCst)
            {
                self.receive();
                for held in &mut self.held {
                    held.watch(&self.shared.log);
                }
                let step = catch_unwind(AssertUnwindSafe(|| self.step(&round)));
                if let Err(panic) = step {
                    let text = panic
                        .downcast_ref::<String>()
                        .cloned()
                        .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                        .unwrap_or_default();
                    self.shared.log.flag(format!(
                        "an owner's thread {} panicked: {text}",
                        self.name()
                    ));
                }
                self.shared.ops.fetch_add(1, Ordering::Relaxed);
            }
            self.settle_for_rest(round.last);
            self.shared.barrier.wait();
            // Guards a sibling sent before the barrier are in the inbox.
            self.receive();
            self.settle_for_rest(round.last);
            self.shared.pool.lock().append(&mut self.held);
            self.shared.barrier.wait();
            if round.last {
                return;
            }
        }
    }

    /// Takes the guards siblings sent.
    fn receive(&mut self) {
        while let Ok(held) = self.inbox.try_recv() {
            self.held.push(held);
        }
    }

    /// Before a rest: releases the leased guards (their leases must not
    /// run out at rest) and, in the last round, every guard.
    fn settle_for_rest(&mut self, all: bool) {
        let mut i = 0;
        while i < self.held.len() {
            if all || self.held[i].lease.is_some() {
                let drop_it = self.rng.chance(50);
                self.release(i, drop_it, None);
            } else {
                i += 1;
            }
        }
    }

    fn step(&mut self, round: &Round) {
        let holding = !self.held.is_empty();
        let choice = self.rng.weighted(&[
            (
                if self.held.len() < MAX_GUARDS { 45 } else { 0 },
                Choice::Acquire,
            ),
            (if holding { 30 } else { 0 }, Choice::Release),
            (
                if holding && self.siblings.len() > 1 {
                    12
                } else {
                    0
                },
                Choice::Send,
            ),
            (8, Choice::Work),
        ]);
        match choice {
            Choice::Acquire => self.acquire(round),
            Choice::Release => {
                let index = self.rng.below(self.held.len() as u64) as usize;
                let drop_it = self.rng.chance(55);
                let fault = FaultPlan::draw(&mut self.rng);
                self.release(index, drop_it, fault);
            }
            Choice::Send => {
                let index = self.rng.below(self.held.len() as u64) as usize;
                let held = self.held.swap_remove(index);
                self.send(held);
            }
            Choice::Work => thread::sleep(self.rng.millis(0, 30)),
        }
    }

    /// Sends a guard to a random sibling (kept if it cannot be sent).
    fn send(&mut self, held: OwnerHeld) {
        let others = self.siblings.len() as u64 - 1;
        let pick = self.rng.below(others) as usize;
        let to = if pick >= self.me { pick + 1 } else { pick };
        if let Err(back) = self.siblings[to].send(held) {
            self.held.push(back.0);
        }
    }

    fn release(&mut self, index: usize, drop_it: bool, fault: Option<FaultPlan>) {
        let held = self.held.swap_remove(index);
        self.shared.touch(&held.target);
        let shared = &self.shared;
        let armed = match (fault, shared.proxy.as_ref()) {
            (Some(plan), Some(proxy)) => {
                arm(proxy, &held.set, &held.target, shared.owner, true, plan)
            }
            _ => None,
        };
        held.release(&shared.log, self.name(), drop_it, armed, &shared.quiet);
    }

    /// An acquire: a re-entry of a lock this thread holds (the only place
    /// for an unbounded `lock()`), a focus lock, or any lock.
    fn acquire(&mut self, round: &Round) {
        let set = self.shared.slot.current();
        // Between a restart's shutdown and its rebuild.
        if set.clients[0].is_shut_down() {
            return;
        }
        let rng = &mut self.rng;
        let (target, method) = if !self.held.is_empty() && rng.chance(45) {
            let target = rng.pick(&self.held).target.clone();
            let method = match rng.below(6) {
                0 => Method::Lock,
                1 => Method::LockLease(owner_lease(rng)),
                2 => Method::TryLock,
                3 => Method::TryFor(rng.millis(0, 300)),
                4 => Method::TryForLease(rng.millis(0, 300), owner_lease(rng)),
                _ => Method::Interruptibly(rng.millis(5, 300)),
            };
            (target, method)
        } else {
            let target = if rng.chance(80) && !round.focus.is_empty() {
                rng.pick(&round.focus).clone()
            } else {
                any_target(rng)
            };
            let method = match rng.below(6) {
                0 => Method::TryLock,
                1 | 2 => Method::TryFor(rng.millis(1, 400)),
                3 => Method::TryForLease(rng.millis(0, 400), owner_lease(rng)),
                4 => Method::Interruptibly(rng.millis(5, 300)),
                _ => Method::InterruptiblyLease(rng.millis(5, 300), owner_lease(rng)),
            };
            (target, method)
        };
        let method = targets::effective(target.kind, method);
        let reentrant = self
            .held
            .iter()
            .any(|h| h.target == target && Arc::ptr_eq(&h.set, &set));
        let shared = Arc::clone(&self.shared);
        let log = &shared.log;
        let op = log.call(&set, &target, method, method.label(), reentrant);
        let armed = match (FaultPlan::draw(&mut self.rng), shared.proxy.as_ref()) {
            (Some(plan), Some(proxy)) => arm(proxy, &set, &target, shared.owner, false, plan),
            _ => None,
        };
        let called = Instant::now();
        let outcome = targets::acquire_as(&set, &target, method, &shared.interrupts, shared.owner);
        let entered = Instant::now();
        if let Some(armed) = armed {
            armed.settle(
                log,
                &shared.quiet,
                &format!("{} of {}", method.label(), target.joined()),
            );
        }
        shared.touch(&target);
        match outcome {
            Ok(Some(guard)) => {
                let hold = log.enter(&set, target.kind, op, &guard, entered);
                let held = OwnerHeld {
                    hold,
                    target,
                    guard,
                    set,
                    lease: method.lease(),
                    called,
                    taken_on: self.name(),
                    reported: false,
                };
                if self.siblings.len() > 1 && self.rng.chance(30) {
                    self.send(held);
                } else {
                    self.held.push(held);
                }
            }
            Ok(None) => log.miss(op, "busy".into()),
            Err(e) => log.miss(op, targets::error_word(&e)),
        }
    }
}
