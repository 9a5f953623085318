//! Actors: threads that run the operation mix on their client's locks and
//! record every acquire, hold and release; the client slots they share
//! (shut down and rebuilt by any of their threads); and the interrupter
//! thread that fires the triggers of interruptible waits.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use redhold::{Client, Interrupt};

mod in_flight;
mod partitioned_release;
mod release_in_flight;
mod short_lease_handover;
mod stalled_drop;
mod stalled_member;
mod undo_in_flight;

pub(crate) use in_flight::{IN_FLIGHT_SPAN, LEFT_HELD, TAKEN_AWAY};
pub(crate) use partitioned_release::PARTITIONED;
pub(crate) use release_in_flight::RELEASE_IN_FLIGHT;
pub(crate) use stalled_member::{CASE_SPAN, LATE_MEMBER_KEPT, STALLED_MEMBER};
pub(crate) use undo_in_flight::UNDO_IN_FLIGHT;
mod wiped_reentry;

use crate::config::{
    CONNECT_TIMEOUT, FAIR_WAIT, RESPONSE_TIMEOUT, RETRY_ATTEMPTS, RETRY_DELAY, WATCHDOG,
};
use crate::fault_proxy::{Action, Arming, Matcher, Rule};
use crate::history::{ActorId, Event, HoldId, Recorder};
use crate::ops::{self, Cut, ForkUse, HeldView, Op};
use crate::rng::Rng;
use crate::targets::{self, AnyGuard, ClientSet, Kind, Method, Target};

/// How long before a leaked lease runs out an actor stops releasing it:
/// the release must reach Redis before the lease ends.
const LEAK_MARGIN: Duration = Duration::from_millis(50);

/// How much later than its client's `shutdown()` began an acquire may
/// return a guard before that counts as a guard after shutdown: the
/// library's check and our reading of the clock are not one instant, and
/// a thread may be preempted in between.
pub(crate) const AFTER_SHUTDOWN_MARGIN: Duration = Duration::from_millis(10);

/// The first flag word of a guard returned after its client's shutdown
/// began (the oracle's rule of that name).
pub(crate) const AFTER_SHUTDOWN: &str = "[guard after shutdown]";

/// The first flag word of a `Lock::unlock()` that did not answer `NotHeld`
/// for a lock its thread held only through live guards (the oracle's rule
/// "unlock of a guarded lock").
pub(crate) const UNLOCK_GUARDED: &str = "[unlock of a guarded lock]";

/// How long a forked process's drop of its inherited client is given to
/// break the parent's pub/sub connection (a reconnect takes milliseconds).
const FORK_RECONNECT_WINDOW: Duration = Duration::from_millis(300);

/// Actor ids of the helper threads of a shutdown-during-hand-over start
/// here: `HELPER_BASE + 8 × actor + k`.
pub(crate) const HELPER_BASE: ActorId = 100_000;

/// How long the proxy holds back the reply of a waiter's first try while
/// the holder releases (`Op::SharedChannelWake` with `race_join`): far
/// below the liveness bound, so only a wake-up lost in that window shows.
const JOIN_RACE_DELAY: Duration = Duration::from_millis(150);

/// Fires `Interrupt`s at their due time, from its own thread, as a user's
/// other thread would.
#[derive(Debug, Default)]
pub(crate) struct Interrupter {
    pending: Mutex<Vec<(Instant, Interrupt)>>,
    stopped: AtomicBool,
}

impl Interrupter {
    /// A fresh interrupt that fires `after` from now (at once when the
    /// schedule is stopping).
    pub(crate) fn arm(&self, after: Duration) -> Interrupt {
        let interrupt = Interrupt::new();
        if self.stopped.load(Ordering::SeqCst) {
            interrupt.trigger();
        } else {
            self.pending
                .lock()
                .push((Instant::now() + after, interrupt.clone()));
        }
        interrupt
    }

    /// Fires every pending interrupt and every later one at once.
    pub(crate) fn stop(&self) {
        self.stopped.store(true, Ordering::SeqCst);
        for (_, interrupt) in self.pending.lock().drain(..) {
            interrupt.trigger();
        }
    }

    /// Starts the thread that fires interrupts; it ends after [`stop`](Self::stop).
    pub(crate) fn start(self: &Arc<Self>) -> JoinHandle<()> {
        let me = Arc::clone(self);
        thread::Builder::new()
            .name("model-interrupter".into())
            .spawn(move || {
                while !me.stopped.load(Ordering::SeqCst) {
                    let now = Instant::now();
                    me.pending.lock().retain(|(due, interrupt)| {
                        if *due <= now {
                            interrupt.trigger();
                        }
                        *due > now
                    });
                    thread::sleep(Duration::from_millis(3));
                }
                me.stop();
            })
            .expect("spawn the interrupter")
    }
}

/// The client set of one client slot, rebuilt after a restart. Every
/// thread of the slot uses the current set.
#[derive(Debug)]
pub(crate) struct ClientSlot {
    /// `p0.c1`: the generation number goes after it (`p0.c1#2`).
    base: String,
    urls: Vec<String>,
    prefix: Arc<str>,
    recorder: Recorder,
    current: Mutex<(u32, Arc<ClientSet>)>,
    /// One restart at a time.
    restarting: Mutex<()>,
}

impl ClientSlot {
    /// Builds the first client set of slot `base`.
    ///
    /// # Errors
    ///
    /// When a client cannot be built.
    pub(crate) fn open(
        base: &str,
        urls: &[String],
        prefix: &Arc<str>,
        recorder: &Recorder,
    ) -> redhold::Result<Arc<ClientSlot>> {
        let recorder = recorder.fork();
        let first = build_set(&format!("{base}#0"), urls, prefix, &recorder)?;
        Ok(Arc::new(ClientSlot {
            base: base.to_owned(),
            urls: urls.to_vec(),
            prefix: Arc::clone(prefix),
            recorder,
            current: Mutex::new((0, Arc::new(first))),
            restarting: Mutex::new(()),
        }))
    }

    /// The set threads should use now.
    pub(crate) fn current(&self) -> Arc<ClientSet> {
        Arc::clone(&self.current.lock().1)
    }

    /// Shuts the current set down (its holds are abandoned, waiters fail
    /// with `Shutdown`) and builds the next generation, retrying for a
    /// while if the server is away (a restart fault).
    pub(crate) fn restart(&self, recorder: &Recorder) {
        let Some(_one) = self.restarting.try_lock() else {
            return;
        };
        let (generation, old) = {
            let current = self.current.lock();
            (current.0, Arc::clone(&current.1))
        };
        recorder.record(Event::ClientDown {
            client: old.tag.clone(),
        });
        old.shutdown();
        crate::remains::scan_after_shutdown(&old, &self.urls, &self.prefix, recorder);
        let tag = format!("{}#{}", self.base, generation + 1);
        let give_up = Instant::now() + Duration::from_secs(5);
        loop {
            match build_set(&tag, &self.urls, &self.prefix, &self.recorder) {
                Ok(set) => {
                    *self.current.lock() = (generation + 1, Arc::new(set));
                    return;
                }
                Err(e) if Instant::now() < give_up => {
                    let _ = e;
                    thread::sleep(Duration::from_millis(100));
                }
                Err(e) => {
                    recorder.record(Event::Note {
                        text: format!("client slot {} could not be rebuilt: {e}", self.base),
                    });
                    return;
                }
            }
        }
    }

    /// Builds a new generation if the current one is shut down (a restart
    /// whose rebuild failed while a server was away); one try, no wait.
    pub(crate) fn revive(&self) {
        if !self.current().clients[0].is_shut_down() {
            return;
        }
        let Some(_one) = self.restarting.try_lock() else {
            return;
        };
        let generation = self.current.lock().0;
        let tag = format!("{}#{}", self.base, generation + 1);
        // Quietly: the next operation tries again.
        if let Ok(set) = build_set(&tag, &self.urls, &self.prefix, &self.recorder) {
            *self.current.lock() = (generation + 1, Arc::new(set));
        }
    }

    /// The final shutdown at the end of a schedule.
    pub(crate) fn shutdown(&self, recorder: &Recorder) {
        let set = self.current();
        recorder.record(Event::ClientDown {
            client: set.tag.clone(),
        });
        set.shutdown();
        crate::remains::scan_after_shutdown(&set, &self.urls, &self.prefix, recorder);
    }
}

/// Builds one client per server, each reporting lost locks into the
/// history under the set's tag (`/s1`, `/s2` for the other servers).
fn build_set(
    tag: &str,
    urls: &[String],
    prefix: &Arc<str>,
    recorder: &Recorder,
) -> redhold::Result<ClientSet> {
    let mut clients: Vec<Client> = Vec::with_capacity(urls.len());
    for (i, url) in urls.iter().enumerate() {
        let client_tag = if i == 0 {
            tag.to_owned()
        } else {
            format!("{tag}/s{i}")
        };
        let callback_recorder = recorder.clone();
        let built = Client::builder()
            .url(url.as_str())
            .watchdog_timeout(WATCHDOG)
            .connect_timeout(CONNECT_TIMEOUT)
            .response_timeout(RESPONSE_TIMEOUT)
            .retry_attempts(RETRY_ATTEMPTS)
            .retry_delay(RETRY_DELAY)
            .fair_wait_timeout(FAIR_WAIT)
            .on_lock_lost(move |name| {
                callback_recorder.record(Event::Lost {
                    client: client_tag.clone(),
                    name: name.to_owned(),
                })
            })
            .build();
        match built {
            Ok(client) => clients.push(client),
            Err(e) => {
                for client in &clients {
                    let _ = client.shutdown();
                }
                return Err(e);
            }
        }
    }
    let ids = clients
        .iter()
        .map(|c| c.id().to_string())
        .collect::<Vec<_>>()
        .join(",");
    recorder.record(Event::ClientUp {
        client: tag.to_owned(),
        ids,
    });
    Ok(ClientSet {
        tag: tag.to_owned(),
        clients,
        prefix: Arc::clone(prefix),
        shutdown_began: std::sync::OnceLock::new(),
    })
}

/// The fault proxy's matcher for `set`'s main client releasing `target`
/// (its first lock): a script call with the lock's Redis name as a key and
/// the client's unlock-latch key (`redisson_unlock_latch:{…}:<client-id>:n`),
/// which only releases carry.
fn release_matcher(set: &ClientSet, target: &Target) -> Matcher {
    let client = format!(":{}:", set.clients[0].id());
    Matcher::script(
        &set.full(target.names[0]),
        &["redisson_unlock_latch:", client.as_str()],
    )
}

/// A rule armed on a release and what it loses.
#[derive(Debug)]
struct Armed {
    armed: crate::fault_proxy::Armed,
    what: &'static str,
}

/// The flag for a guard that an acquire on `set` returned at `returned`,
/// if that was clearly after the set's shutdown began (red locks, whose
/// other clients shut down later, are left out).
pub(crate) fn after_shutdown(
    set: &ClientSet,
    kind: Kind,
    returned: Instant,
    hold: HoldId,
) -> Option<String> {
    let began = *set.shutdown_began.get()?;
    let late = returned.checked_duration_since(began)?;
    (kind != Kind::Red && late > AFTER_SHUTDOWN_MARGIN).then(|| {
        format!(
            "{AFTER_SHUTDOWN} hold #{}: the acquire on {} returned a guard {:.1} ms after \
             `shutdown()` of its client {} began",
            crate::report::hold_id(hold),
            kind.as_str(),
            late.as_secs_f64() * 1000.0,
            set.tag
        )
    })
}

/// A helper thread of an actor (a shutdown during a hand-over, a fork):
/// one acquire on the target with the given client set (`lock()` or a
/// short `try_lock_for`), recorded like an actor's, and a release at once
/// if it gets the lock.
pub(crate) struct Helper {
    pub(crate) id: ActorId,
    pub(crate) label: String,
    /// Its first op (and hold) number.
    pub(crate) first: u64,
    pub(crate) set: Arc<ClientSet>,
    pub(crate) target: Target,
    pub(crate) method: Method,
    pub(crate) recorder: Recorder,
    pub(crate) interrupts: Arc<Interrupter>,
    /// How long it keeps the lock before it unlocks (past a lease, even).
    pub(crate) hold: Duration,
}

impl Helper {
    pub(crate) fn run(self) {
        let (id, set) = (self.id, &self.set);
        self.recorder.record(Event::Actor {
            actor: id,
            label: self.label.clone(),
        });
        let op = (u64::from(id) << 32) | self.first;
        self.recorder.record(Event::Call {
            actor: id,
            op,
            client: set.tag.clone(),
            kind: self.target.kind,
            names: self.target.joined(),
            method: self.method.label(),
            lease_ms: self.method.lease().map_or(0, |l| l.as_millis() as u64),
            wait_ms: self.method.wait().map_or(-1, |w| w.as_millis() as i64),
            reentrant: false,
        });
        let got = catch_unwind(AssertUnwindSafe(|| {
            targets::acquire(set, &self.target, self.method, &self.interrupts)
        }));
        let returned = Instant::now();
        let guard = match got {
            Ok(Ok(Some(guard))) => guard,
            Ok(Ok(None)) => {
                return self.recorder.record(Event::Miss {
                    actor: id,
                    op,
                    outcome: "busy".into(),
                })
            }
            Ok(Err(e)) => {
                return self.recorder.record(Event::Miss {
                    actor: id,
                    op,
                    outcome: targets::error_word(&e),
                })
            }
            Err(_) => {
                return self.recorder.record(Event::Flag {
                    actor: id,
                    text: "a helper's lock() panicked".into(),
                })
            }
        };
        let hold = op;
        self.recorder.record(Event::Enter {
            actor: id,
            op,
            hold,
            token: guard.token().unwrap_or(0),
        });
        if let Some(text) = after_shutdown(set, self.target.kind, returned, hold) {
            self.recorder.record(Event::Flag { actor: id, text });
        }
        thread::sleep(self.hold);
        self.recorder.record(Event::Exit {
            actor: id,
            hold,
            how: "unlock".into(),
            held: guard.is_held(),
        });
        let result = targets::outcome(&guard.unlock());
        self.recorder.record(Event::Released {
            actor: id,
            hold,
            result,
        });
    }
}

/// What an actor is started with.
#[derive(Debug, Clone)]
pub(crate) struct ActorSpec {
    pub(crate) id: ActorId,
    pub(crate) label: String,
    /// The schedule's seed; the actor uses stream `id + 1` of it.
    pub(crate) seed: u64,
    pub(crate) slot: Arc<ClientSlot>,
    pub(crate) recorder: Recorder,
    pub(crate) interrupts: Arc<Interrupter>,
    pub(crate) stop: Arc<AtomicBool>,
    /// When `stop` is due (a little early): a case that cannot end before
    /// then is not begun (it would lengthen the wind-down and be cut short).
    pub(crate) stops_at: Instant,
    /// Arms the fault proxy in front of the main server (`None` in child
    /// processes: the proxy lives in the test process).
    pub(crate) proxy: Option<Arming>,
    /// Whether it may `fork()` (only in child processes: the test process
    /// is the harness's, with threads of its own).
    pub(crate) may_fork: bool,
}

/// Starts an actor thread; it returns how many operations it ran. A panic
/// (of the library or of the actor) is recorded as a flag, so the oracle
/// reports it.
pub(crate) fn spawn(spec: ActorSpec) -> JoinHandle<u64> {
    thread::Builder::new()
        .name(format!("model-{}", spec.label))
        .spawn(move || {
            let (recorder, actor) = (spec.recorder.clone(), spec.id);
            match catch_unwind(AssertUnwindSafe(|| Actor::new(spec).run())) {
                Ok(ops) => ops,
                Err(panic) => {
                    let text = panic
                        .downcast_ref::<String>()
                        .cloned()
                        .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                        .unwrap_or_default();
                    recorder.record(Event::Flag {
                        actor,
                        text: format!("the actor thread panicked: {text}"),
                    });
                    0
                }
            }
        })
        .expect("spawn an actor")
}

/// One guard (or leaked hold) an actor keeps.
#[derive(Debug)]
struct Held {
    hold: HoldId,
    target: Target,
    /// `None` once leaked.
    guard: Option<AnyGuard>,
    set: Arc<ClientSet>,
    lease: Option<Duration>,
    /// When the acquire was called (local clock).
    called: Instant,
    /// When the acquire returned (local clock).
    entered: Instant,
    /// A `HeldFalse` or a flag was recorded already.
    reported: bool,
}

/// One thread of lock operations. Guards are `!Send`, so an actor is built
/// on its own thread and never leaves it.
struct Actor {
    spec: ActorSpec,
    rng: Rng,
    held: Vec<Held>,
    next_op: u64,
    next_hold: u64,
    /// Op and hold numbers of this actor's helper threads.
    next_helper_op: u64,
    /// Client sets of its own built so far (forks, shared-channel wakes).
    next_fork: u64,
    ops: u64,
}

impl Actor {
    fn new(spec: ActorSpec) -> Actor {
        let rng = Rng::stream(spec.seed, u64::from(spec.id) + 1);
        Actor {
            spec,
            rng,
            held: Vec::new(),
            next_op: 0,
            next_hold: 0,
            next_helper_op: 0,
            next_fork: 0,
            ops: 0,
        }
    }

    fn record(&self, event: Event) {
        self.spec.recorder.record(event);
    }

    fn run(mut self) -> u64 {
        self.record(Event::Actor {
            actor: self.spec.id,
            label: self.spec.label.clone(),
        });
        while !self.spec.stop.load(Ordering::SeqCst) {
            self.spec.slot.revive();
            self.watch_guards();
            let mut op_rng = Rng::new(self.rng.next_u64());
            let op = ops::choose(&mut op_rng, &self.view(), self.spec.may_fork);
            self.perform(op);
            self.ops += 1;
        }
        // Wind down: release everything, in a random order.
        while !self.held.is_empty() {
            self.watch_guards();
            let index = self.rng.below(self.held.len() as u64) as usize;
            self.release(index, false, None);
        }
        self.record(Event::Done {
            actor: self.spec.id,
            ops: self.ops,
        });
        self.ops
    }

    fn view(&self) -> Vec<HeldView> {
        self.held
            .iter()
            .map(|h| HeldView {
                target: h.target.clone(),
                leased: h.lease.is_some(),
                has_guard: h.guard.is_some(),
            })
            .collect()
    }

    /// Asks every guard whether it believes it still holds its lock: a
    /// watched guard that turns false reports a loss; a leased guard that
    /// still says true after its lease ran out (by our clock, which started
    /// after the library's) is wrong.
    fn watch_guards(&mut self) {
        let now = Instant::now();
        let mut events = Vec::new();
        for h in &mut self.held {
            let Some(guard) = &h.guard else { continue };
            if h.reported {
                continue;
            }
            let held = guard.is_held();
            match h.lease {
                None if !held => {
                    h.reported = true;
                    events.push(Event::HeldFalse {
                        actor: self.spec.id,
                        hold: h.hold,
                    });
                }
                Some(lease) if held && now > h.entered + lease + Duration::from_millis(1) => {
                    h.reported = true;
                    events.push(Event::Flag {
                        actor: self.spec.id,
                        text: format!(
                            "guard.is_held() is true {} ms after the {} ms lease of hold #{} \
                             ran out (counted from when its acquire returned)",
                            (now - h.entered - lease).as_millis(),
                            lease.as_millis(),
                            h.hold
                        ),
                    });
                }
                _ => {}
            }
        }
        for event in events {
            self.record(event);
        }
    }

    fn perform(&mut self, op: Op) {
        match op {
            Op::Acquire {
                target,
                method,
                reentrant,
            } => self.acquire(target, method, reentrant),
            Op::MixedMulti { members, method } => self.mixed_multi(members, method),
            Op::Release { index, drop, cut } => self.release(index, drop, cut),
            Op::Leak { index } => {
                if let Some(guard) = self.held[index].guard.take() {
                    if let Err(guard) = guard.leak() {
                        self.held[index].guard = Some(guard);
                    }
                }
            }
            Op::StaleLease {
                index,
                reacquire,
                extra,
                cut,
            } => self.stale_lease(index, reacquire, extra, cut),
            Op::StalledDrop {
                index,
                delay,
                reacquire,
                restart,
            } => self.stalled_drop(index, delay, reacquire, restart),
            Op::Work(pause) => self.pause(pause),
            Op::ForceUnlock(target) => {
                self.force_unlock(&target);
            }
            Op::Check {
                kind,
                name,
                as_bool,
            } => self.check(kind, name, as_bool),
            Op::Peek { kind, name } => {
                let _ = targets::peek(&self.spec.slot.current(), kind, name);
            }
            Op::RestartClient => self.spec.slot.restart(&self.spec.recorder),
            Op::ShutdownHandover {
                target,
                waiters,
                delay,
            } => self.shutdown_handover(target, waiters, delay),
            Op::Fork {
                what: ForkUse::Drop,
                target,
            } => self.fork_drop(&target),
            Op::Fork { what, target } => self.fork(what, &target),
            Op::LongLease {
                target,
                lease,
                hold,
            } => self.long_lease(target, lease, hold),
            Op::UnlockGuarded { index } => self.unlock_guarded(index),
            Op::PartitionedRelease { target, partition } => {
                self.partitioned_release(target, partition);
            }
            Op::ShortLeaseHandover {
                target,
                lease,
                short,
                overrun,
            } => self.short_lease_handover(target, lease, short, overrun),
            Op::SharedChannelWake {
                first,
                then,
                lease,
                hold,
                race_join,
            } => self.shared_channel_wake(first, then, lease, hold, race_join),
            Op::WipedReentry { target, spoil } => self.wiped_reentry(target, spoil),
            Op::StalledMember {
                target,
                stalled,
                stall,
                wait,
                lease,
            } => self.stalled_member(target, stalled, stall, wait, lease),
            Op::ReleaseInFlight(case) => self.release_in_flight(case),
            Op::UndoInFlight(case) => self.undo_in_flight(case),
        }
    }

    /// `force_unlock` of `target` with the actor's current client set,
    /// recorded; whether it deleted anything.
    fn force_unlock(&mut self, target: &Target) -> bool {
        let set = self.spec.slot.current();
        self.record(Event::ForceStart {
            actor: self.spec.id,
            kind: target.kind,
            names: target.joined(),
        });
        let outcome = targets::force_unlock(&set, target);
        let result = match &outcome {
            Ok(deleted) => deleted.to_string(),
            Err(e) => targets::error_word(e),
        };
        self.record(Event::ForceEnd {
            actor: self.spec.id,
            result,
        });
        matches!(outcome, Ok(true))
    }

    /// A helper thread `k` (0..8) of this actor doing one acquire of
    /// `target` with `method` on `set`; returns its thread.
    fn helper(
        &mut self,
        k: ActorId,
        tag: &str,
        set: &Arc<ClientSet>,
        target: &Target,
        method: Method,
    ) -> Option<JoinHandle<()>> {
        self.helper_holding(k, tag, set, target, method, Duration::ZERO)
    }

    /// [`helper`](Self::helper) that keeps the lock `hold` before it
    /// unlocks.
    fn helper_holding(
        &mut self,
        k: ActorId,
        tag: &str,
        set: &Arc<ClientSet>,
        target: &Target,
        method: Method,
        hold: Duration,
    ) -> Option<JoinHandle<()>> {
        let first = self.next_helper_op;
        self.next_helper_op += 4;
        let helper = Helper {
            id: HELPER_BASE + 8 * self.spec.id + k,
            label: format!("{}.{tag}", self.spec.label),
            first,
            set: Arc::clone(set),
            target: target.clone(),
            method,
            recorder: self.spec.recorder.fork(),
            interrupts: Arc::clone(&self.spec.interrupts),
            hold,
        };
        thread::Builder::new()
            .name(format!("model-{}", helper.label))
            .spawn(move || helper.run())
            .ok()
    }

    /// See [`Op::SharedChannelWake`]. The waiter's wait is judged by the
    /// liveness rule: a lost wake-up keeps it parked for the PTTL it saw,
    /// most of a lease longer than the bound.
    fn shared_channel_wake(
        &mut self,
        first: &'static str,
        then: &'static str,
        lease: Duration,
        hold: Duration,
        race_join: bool,
    ) {
        if !self.held.is_empty() {
            return;
        }
        let Some(other) = self.other_client("w") else {
            return;
        };
        let first = Target {
            kind: Kind::Plain,
            names: vec![first],
        };
        let then = Target {
            kind: Kind::Plain,
            names: vec![then],
        };
        let method = Method::TryFor(Duration::from_millis(300));
        self.acquire(first.clone(), method, false);
        if let Some(index) = self.held.iter().position(|h| h.target == first) {
            // The other client waits on `first` a moment: its channel now
            // has `first`'s waiters (their entry lingers with the channel).
            let wait = Method::TryFor(Duration::from_millis(40));
            if let Some(t) = self.helper(5, "wf", &other, &first, wait) {
                let _ = crate::joins::join_within(t, Duration::from_secs(5));
            }
            self.release(index, false, None);
            self.acquire(
                then.clone(),
                Method::TryForLease(Duration::from_millis(300), lease),
                false,
            );
            if let Some(index) = self.held.iter().position(|h| h.target == then) {
                // The waiter's first try of `then`: the only request of
                // `other` naming it before it holds it.
                let race = self.spec.proxy.as_ref().filter(|_| race_join).map(|proxy| {
                    proxy.arm(Rule {
                        matcher: Matcher::script(
                            &other.full(then.names[0]),
                            &[&format!("{}:", other.clients[0].id())],
                        ),
                        action: Action::DelayReply(JOIN_RACE_DELAY),
                    })
                });
                let waiter = self.helper(6, "wt", &other, &then, Method::Lock);
                match race {
                    // Its try has reached Redis; its reply, and so its
                    // joining the waiters, comes later: release now.
                    Some(armed) if armed.wait_fired(Duration::from_secs(2)) => {
                        self.pause(Duration::from_millis(2));
                        self.record(Event::Note {
                            text: format!(
                                "{}: releasing {} while {}'s first try's reply is held back",
                                self.spec.label, then.names[0], other.tag
                            ),
                        });
                    }
                    Some(armed) => {
                        armed.disarm();
                        self.pause(hold);
                    }
                    None => self.pause(hold),
                }
                self.release(index, false, None);
                if let Some(t) = waiter {
                    // Past the lease, the waiter is done either way (the
                    // liveness rule judges how long it took).
                    let _ = crate::joins::join_within(t, lease + Duration::from_secs(3));
                }
            }
        }
        self.end_other_client(&other);
    }

    /// A client of its own on the main server (tagged `<label>.<letter><n>`)
    /// for a case that needs a second process's view.
    fn other_client(&mut self, letter: &str) -> Option<Arc<ClientSet>> {
        let slot = Arc::clone(&self.spec.slot);
        let tag = format!("{}.{letter}{}", self.spec.label, self.next_fork);
        self.next_fork += 1;
        build_set(&tag, &slot.urls[..1], &slot.prefix, &slot.recorder)
            .ok()
            .map(Arc::new)
    }

    /// Shuts down a client of [`other_client`](Self::other_client) and
    /// scans Redis for what it left.
    fn end_other_client(&self, other: &Arc<ClientSet>) {
        let slot = &self.spec.slot;
        self.spec.recorder.record(Event::ClientDown {
            client: other.tag.clone(),
        });
        other.shutdown();
        crate::remains::scan_after_shutdown(
            other,
            &slot.urls[..1],
            &slot.prefix,
            &self.spec.recorder,
        );
    }

    /// Takes `target` with a long lease, keeps it `hold` (much less), and
    /// releases it: waiters parked for the PTTL they saw must be woken by
    /// the release.
    fn long_lease(&mut self, target: Target, lease: Duration, hold: Duration) {
        if !self.held.is_empty() {
            return;
        }
        let wait = Duration::from_millis(self.rng.range(0, 300));
        self.acquire(target.clone(), Method::TryForLease(wait, lease), false);
        if let Some(index) = self.held.iter().position(|h| h.target == target) {
            self.pause(hold);
            self.release(index, false, None);
        }
    }

    /// `Lock::unlock()` on the lock of held guard `index` while the thread
    /// holds it only through live guards: the answer must be `NotHeld`
    /// (`Shutdown` once its client is shut down), and the hold stays (the
    /// other rules see a second holder enter otherwise). A guard that no
    /// longer believes it holds is not judged: its hold is gone anyway.
    fn unlock_guarded(&mut self, index: usize) {
        let h = &self.held[index];
        let Some(guard) = &h.guard else { return };
        let before = guard.is_held();
        let result = targets::unlock_leaked(&h.set, h.target.kind, h.target.names[0]);
        let after = guard.is_held();
        let word = targets::outcome(&result);
        let fine = match word.as_str() {
            "not-held" | "shutdown" => true,
            // The watchdog found the hold lost meanwhile.
            "lost" => !after,
            _ => false,
        };
        if before && !fine {
            let text = format!(
                "{UNLOCK_GUARDED} Lock::unlock() on {} {} by a thread holding it only through \
                 live guards (hold #{} among them) returned {word} (is_held() before {before}, \
                 after {after}); it must answer NotHeld and release nothing",
                h.target.kind.as_str(),
                h.target.names[0],
                crate::report::hold_id(h.hold)
            );
            self.record(Event::Flag {
                actor: self.spec.id,
                text,
            });
        }
    }

    /// `fork()` where the forked process drops the *last* handle of a
    /// client it inherited, so that the client's own drop runs there. The
    /// actor's client set cannot be used for that: its other threads
    /// (copied into the forked process, but not running there) keep
    /// handles the forked process cannot reach. So a client set of this
    /// thread's own is built, takes `target` (recorded as a hold like any
    /// other), gets its pub/sub connection subscribed (a helper thread
    /// waits on the lock a moment), and is then inherited by the fork with
    /// its guard: the forked process drops all of it, the actor's own
    /// guards and a handle of its client. In the parent the pub/sub
    /// connection must not have been reconnected (a child that shuts the
    /// shared socket down ends it for the parent too), and the hold must
    /// still be there (its release is judged by the other rules).
    fn fork_drop(&mut self, target: &Target) {
        let target = match target.kind {
            Kind::Multi => Target {
                kind: Kind::Plain,
                names: vec![target.names[0]],
            },
            Kind::Red => Target {
                kind: Kind::Plain,
                names: vec!["p2"],
            },
            _ => target.clone(),
        };
        let slot = Arc::clone(&self.spec.slot);
        let tag = format!("{}.f{}", self.spec.label, self.next_fork);
        self.next_fork += 1;
        let Ok(own) = build_set(&tag, &slot.urls[..1], &slot.prefix, &slot.recorder) else {
            return;
        };
        let own = Arc::new(own);
        self.acquire_with(
            Arc::clone(&own),
            target.clone(),
            Method::TryFor(Duration::from_millis(200)),
            false,
            None,
        );
        let kept = self
            .held
            .iter()
            .position(|h| Arc::ptr_eq(&h.set, &own))
            .map(|i| self.held.remove(i));
        // A thread of the same client waits on the lock (held by us, or by
        // another): the channel is subscribed, and lingers so.
        let wait = Method::TryFor(Duration::from_millis(40));
        if let Some(t) = self.helper(7, "fh", &own, &target, wait) {
            // Ended, so that no thread keeps a handle at the fork.
            let _ = crate::joins::join_within(t, Duration::from_secs(5));
        }
        let reconnects = own.clients[0].stats().pubsub_reconnects;
        let set = slot.current();
        let held = &mut self.held;
        let mut inherited = Some((own, kept));
        let in_the_fork = || -> Result<(), String> {
            // The last handles of the client of our own: its set (with the
            // client) and the hold with its guard; then the actor's guards
            // and a handle of the slot's client, as a user would.
            drop(inherited.take());
            held.clear();
            drop(set.clients[0].clone());
            Ok(())
        };
        let forked = crate::forks::fork_and_wait(in_the_fork);
        let (own, kept) = inherited.take().expect("the parent keeps its own");
        if let Err(text) = forked {
            self.record(Event::Flag {
                actor: self.spec.id,
                text: format!(
                    "{} a forked process that was to drop every handle of its inherited \
                     client: {text}",
                    crate::forks::FORK
                ),
            });
        }
        let until = Instant::now() + FORK_RECONNECT_WINDOW;
        let mut now = own.clients[0].stats().pubsub_reconnects;
        while now == reconnects && Instant::now() < until {
            thread::sleep(Duration::from_millis(10));
            now = own.clients[0].stats().pubsub_reconnects;
        }
        if now != reconnects {
            self.record(Event::Flag {
                actor: self.spec.id,
                text: format!(
                    "{} the pub/sub connection of client {} was reconnected {} time(s) after \
                     a forked process dropped every handle of it it inherited (it shut the \
                     shared socket down)",
                    crate::forks::FORK_PUBSUB,
                    own.tag,
                    now - reconnects
                ),
            });
        }
        if let Some(kept) = kept {
            self.held.push(kept);
            self.release(self.held.len() - 1, false, None);
        }
        self.spec.recorder.record(Event::ClientDown {
            client: own.tag.clone(),
        });
        own.shutdown();
        crate::remains::scan_after_shutdown(
            &own,
            &slot.urls[..1],
            &slot.prefix,
            &self.spec.recorder,
        );
    }

    fn acquire(&mut self, target: Target, method: Method, reentrant: bool) {
        let set = self.spec.slot.current();
        self.acquire_with(set, target, method, reentrant, None);
    }

    /// Acquires `target` with the client set `set`, records it, and keeps
    /// the guard in `held`. Its reply is spoiled now and then at random,
    /// or with `spoil` (see [`crate::spoiled::arm`]).
    fn acquire_with(
        &mut self,
        set: Arc<ClientSet>,
        target: Target,
        method: Method,
        reentrant: bool,
        spoil: Option<u8>,
    ) {
        let method = targets::effective(target.kind, method);
        let op = self.record_call(&set, &target, method, method.label(), reentrant);
        let spoiled = crate::spoiled::arm(
            &mut self.rng,
            self.spec.proxy.as_ref(),
            &set,
            &target,
            spoil,
        );
        let called = Instant::now();
        let outcome = targets::acquire(&set, &target, method, &self.spec.interrupts);
        if let Some(spoiled) = spoiled {
            let took = matches!(outcome, Ok(Some(_)));
            let guards = self
                .held
                .iter()
                .filter(|h| h.target == target && Arc::ptr_eq(&h.set, &set))
                .count();
            let guards = u32::try_from(guards).unwrap_or(u32::MAX);
            spoiled.judge(&set, took, guards, self.spec.id, &self.spec.recorder);
        }
        match outcome {
            Ok(Some(guard)) => {
                let entered = Instant::now();
                let hold = self.record_enter(&set, target.kind, op, &guard, entered);
                if matches!(
                    target.kind,
                    Kind::Plain | Kind::Fair | Kind::Fenced | Kind::Spin | Kind::Write
                ) {
                    // Held alone: the one field of this client is ours.
                    crate::remains::learn_tid(
                        &set,
                        &self.spec.slot.urls[0],
                        &set.full(target.names[0]),
                        self.spec.id,
                        &self.spec.recorder,
                        || guard.is_held(),
                    );
                }
                self.held.push(Held {
                    hold,
                    target,
                    guard: Some(guard),
                    set,
                    lease: method.lease(),
                    called,
                    entered,
                    reported: false,
                });
            }
            Ok(None) => self.record(Event::Miss {
                actor: self.spec.id,
                op,
                outcome: "busy".into(),
            }),
            Err(e) => self.record(Event::Miss {
                actor: self.spec.id,
                op,
                outcome: targets::error_word(&e),
            }),
        }
    }

    /// Records an acquire call of `target` about to be made with
    /// `method` (labelled `label`); returns its op number.
    fn record_call(
        &mut self,
        set: &ClientSet,
        target: &Target,
        method: Method,
        label: String,
        reentrant: bool,
    ) -> u64 {
        let op = (u64::from(self.spec.id) << 32) | self.next_op;
        self.next_op += 1;
        self.record(Event::Call {
            actor: self.spec.id,
            op,
            client: set.tag.clone(),
            kind: target.kind,
            names: target.joined(),
            method: label,
            lease_ms: method.lease().map_or(0, |l| l.as_millis() as u64),
            wait_ms: method.wait().map_or(-1, |w| w.as_millis() as i64),
            reentrant,
        });
        op
    }

    /// Records that call `op` returned `guard` (of a `kind` lock) at
    /// `entered`, and flags a guard returned after its client's shutdown
    /// began; returns the new hold's number.
    fn record_enter(
        &mut self,
        set: &ClientSet,
        kind: Kind,
        op: u64,
        guard: &AnyGuard,
        entered: Instant,
    ) -> HoldId {
        let hold = (u64::from(self.spec.id) << 32) | self.next_hold;
        self.next_hold += 1;
        self.record(Event::Enter {
            actor: self.spec.id,
            op,
            hold,
            token: guard.token().unwrap_or(0),
        });
        if let Some(text) = after_shutdown(set, kind, entered, hold) {
            self.record(Event::Flag {
                actor: self.spec.id,
                text,
            });
        }
        hold
    }

    /// A multi-lock over single locks of several kinds ([`Op::MixedMulti`]):
    /// each member is recorded as a call of its own kind and, once taken,
    /// as a hold of its own, released on its own later.
    fn mixed_multi(&mut self, members: Vec<Target>, method: Method) {
        let set = self.spec.slot.current();
        let method = targets::effective(Kind::Multi, method);
        let mut ops = Vec::with_capacity(members.len());
        for target in &members {
            let label = format!("{}{}", targets::MEMBER_CALL, method.label());
            let reentrant = self.held.iter().any(|h| h.target == *target);
            ops.push(self.record_call(&set, target, method, label, reentrant));
        }
        let called = Instant::now();
        let outcome = targets::acquire_mixed(&set, &members, method, &self.spec.interrupts);
        let guards = match outcome {
            Ok(Some(guards)) => guards,
            other => {
                let outcome = match other {
                    Err(e) => targets::error_word(&e),
                    _ => "busy".into(),
                };
                for op in ops {
                    self.record(Event::Miss {
                        actor: self.spec.id,
                        op,
                        outcome: outcome.clone(),
                    });
                }
                return;
            }
        };
        let entered = Instant::now();
        for ((target, op), guard) in members.into_iter().zip(ops).zip(guards) {
            let hold = self.record_enter(&set, target.kind, op, &guard, entered);
            self.held.push(Held {
                hold,
                target,
                guard: Some(guard),
                set: Arc::clone(&set),
                lease: method.lease(),
                called,
                entered,
                reported: false,
            });
        }
    }

    /// Arms the fault proxy to lose the first attempt of this client's
    /// next release of `target` (its request or its reply), when the run
    /// has a proxy and the lock lives behind it.
    fn arm_cut(&self, set: &ClientSet, target: &Target, cut: Option<Cut>) -> Option<Armed> {
        let (cut, proxy) = (cut?, self.spec.proxy.as_ref()?);
        if target.kind == Kind::Red {
            return None;
        }
        let action = match cut {
            Cut::Request => Action::LoseRequest,
            Cut::Reply => Action::LoseReply,
            // `:1\r\n` ends after 3 pauses: past the response timeout.
            Cut::Trickle => Action::TrickleReply(RESPONSE_TIMEOUT * 2 / 5),
        };
        let armed = proxy.arm(Rule {
            matcher: release_matcher(set, target),
            action,
        });
        Some(Armed {
            armed,
            what: match cut {
                Cut::Request => "request",
                Cut::Reply => "reply",
                Cut::Trickle => "trickled reply",
            },
        })
    }

    /// Ends the section of held guard `index` and releases it; with `cut`,
    /// the release's first attempt is lost.
    fn release(&mut self, index: usize, drop_it: bool, cut: Option<Cut>) {
        let h = self.held.remove(index);
        let actor = self.spec.id;
        match h.guard {
            Some(guard) => {
                self.record(Event::Exit {
                    actor,
                    hold: h.hold,
                    how: if drop_it { "drop" } else { "unlock" }.into(),
                    held: guard.is_held(),
                });
                let armed = self.arm_cut(&h.set, &h.target, cut);
                let result = if drop_it {
                    drop(guard);
                    "dropped".to_owned()
                } else {
                    targets::outcome(&guard.unlock())
                };
                if let Some(armed) = armed {
                    if armed.armed.disarm() {
                        self.record(Event::Note {
                            text: format!(
                                "{}: the fault proxy lost the first {} of the release of hold #{}",
                                self.spec.label,
                                armed.what,
                                crate::report::hold_id(h.hold)
                            ),
                        });
                    }
                }
                self.record(Event::Released {
                    actor,
                    hold: h.hold,
                    result,
                });
            }
            // `Lock::unlock()` releases *a* hold of the thread: once a leaked
            // lease may have run out, it could only hit another hold, so a
            // careful caller (this one) does not call it then.
            None if h
                .lease
                .is_some_and(|l| Instant::now() + LEAK_MARGIN >= h.called + l) =>
            {
                self.record(Event::Exit {
                    actor,
                    hold: h.hold,
                    how: "leaked lease ran out (not unlocked)".into(),
                    held: false,
                });
                self.record(Event::Released {
                    actor,
                    hold: h.hold,
                    result: "skipped".into(),
                });
            }
            None => {
                self.record(Event::Exit {
                    actor,
                    hold: h.hold,
                    how: "Lock::unlock (leaked guard)".into(),
                    held: true,
                });
                let result = targets::unlock_leaked(&h.set, h.target.kind, h.target.names[0]);
                self.record(Event::Released {
                    actor,
                    hold: h.hold,
                    result: targets::outcome(&result),
                });
            }
        }
    }

    /// Sleeps for `pause`, or until the schedule stops (a long section
    /// must not delay the wind-down).
    fn pause(&self, pause: Duration) {
        let until = Instant::now() + pause;
        while !self.spec.stop.load(Ordering::SeqCst) {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return;
            }
            thread::sleep(left.min(Duration::from_millis(50)));
        }
    }

    /// Keeps a leased guard past its lease, maybe takes the lock again,
    /// then unlocks the stale guard.
    fn stale_lease(
        &mut self,
        index: usize,
        reacquire: Option<Method>,
        extra: Duration,
        cut: Option<Cut>,
    ) {
        let (hold, target, due) = {
            let h = &self.held[index];
            let lease = h.lease.unwrap_or_default();
            (h.hold, h.target.clone(), h.entered + lease + extra)
        };
        thread::sleep(due.saturating_duration_since(Instant::now()));
        if let Some(method) = reacquire {
            self.acquire(target, method, true);
        }
        if let Some(index) = self.held.iter().position(|h| h.hold == hold) {
            self.release(index, false, cut);
        }
    }

    /// Forks; the forked process does `what` with the inherited client
    /// (see [`ForkUse`]) and exits with what it found; a failure is
    /// flagged. The parent's holds and waiters go on; the other rules see
    /// whether the forked process disturbed them.
    fn fork(&mut self, what: ForkUse, target: &Target) {
        let set = self.spec.slot.current();
        let held = &mut self.held;
        let in_the_fork = move || -> Result<(), String> {
            let forked =
                |r: &redhold::Result<()>| matches!(r, Err(redhold::Error::ForkedProcess { .. }));
            match what {
                ForkUse::Use => {
                    let got =
                        targets::acquire(&set, target, Method::TryLock, &Interrupter::default());
                    if !matches!(got, Err(redhold::Error::ForkedProcess { .. })) {
                        return Err(format!(
                            "try_lock on {} {} in a forked process gave {}",
                            target.kind.as_str(),
                            target.joined(),
                            match got {
                                Ok(Some(_)) => "a guard".into(),
                                Ok(None) => "busy".into(),
                                Err(e) => targets::error_word(&e),
                            }
                        ));
                    }
                    if let Some(h) = held.iter().find(|h| h.target.kind.single()) {
                        let r = targets::unlock_leaked(&h.set, h.target.kind, h.target.names[0]);
                        if !forked(&r) {
                            return Err(format!(
                                "Lock::unlock of an inherited hold in a forked process gave {}",
                                targets::outcome(&r)
                            ));
                        }
                    }
                }
                // See `fork_drop`.
                ForkUse::Drop => {}
                ForkUse::Shutdown => {
                    let _ = set.clients[0].shutdown();
                }
            }
            Ok(())
        };
        if let Err(text) = crate::forks::fork_and_wait(in_the_fork) {
            self.record(Event::Flag {
                actor: self.spec.id,
                text: format!(
                    "{} a forked process that was to {what:?} its inherited client: {text}",
                    crate::forks::FORK
                ),
            });
        }
    }

    /// Shutdown in the middle of a hand-over: takes `target`, lets
    /// `waiters` helper threads of the same client park on it, then
    /// releases it while another thread shuts the client down. With the
    /// fault proxy the release's reply is held back `delay` and the
    /// shutdown starts once the server has the release, so the release's
    /// direct hand-over to a parked thread is surely in flight; without
    /// it the two race. No helper may get a guard after the shutdown began
    /// (checked by each, see [`after_shutdown`]); every helper must return.
    fn shutdown_handover(&mut self, target: Target, waiters: usize, delay: Duration) {
        if !self.held.is_empty() {
            return;
        }
        self.acquire(
            target.clone(),
            Method::TryFor(Duration::from_millis(300)),
            false,
        );
        let Some(index) = self.held.iter().position(|h| h.target == target) else {
            return;
        };
        let set = Arc::clone(&self.held[index].set);
        let mut helpers = Vec::new();
        for k in 0..waiters {
            let id = HELPER_BASE + 8 * self.spec.id + k as ActorId;
            let first = self.next_helper_op;
            self.next_helper_op += 4;
            let helper = Helper {
                id,
                label: format!("{}.h{k}", self.spec.label),
                first,
                set: Arc::clone(&set),
                target: target.clone(),
                method: Method::Lock,
                recorder: self.spec.recorder.fork(),
                interrupts: Arc::clone(&self.spec.interrupts),
                hold: Duration::ZERO,
            };
            if let Ok(t) = thread::Builder::new()
                .name(format!("model-{}", helper.label))
                .spawn(move || helper.run())
            {
                helpers.push(t);
            }
        }
        // Let them park (a thread that comes late takes the lock after
        // the release or fails with `Shutdown`: both fine).
        self.pause(Duration::from_millis(30));
        let armed = self.spec.proxy.as_ref().map(|proxy| {
            proxy.arm(Rule {
                matcher: release_matcher(&set, &target),
                action: Action::DelayReply(delay),
            })
        });
        let (slot, recorder) = (Arc::clone(&self.spec.slot), self.spec.recorder.fork());
        let jitter = Duration::from_micros(self.rng.below(1000));
        let closer = thread::Builder::new()
            .name(format!("model-{}.closer", self.spec.label))
            .spawn(move || {
                let in_flight = armed.map(|a| {
                    let fired = a.wait_fired(Duration::from_secs(2));
                    a.disarm();
                    fired
                });
                // Into the held-back reply's window, or a race.
                thread::sleep(match in_flight {
                    Some(true) => delay / 4,
                    _ => jitter,
                });
                slot.restart(&recorder);
            });
        self.release(index, false, None);
        if let Ok(closer) = closer {
            let _ = crate::joins::join_within(closer, Duration::from_secs(20));
        }
        let unfinished = crate::joins::wait_for(helpers, Duration::from_secs(5));
        if !unfinished.is_empty() {
            self.record(Event::Flag {
                actor: self.spec.id,
                text: format!(
                    "{} helper thread(s) of a shutdown during a hand-over on {} {} still \
                     waiting 5 s after their client was shut down",
                    unfinished.len(),
                    target.kind.as_str(),
                    target.joined()
                ),
            });
            // They end with the schedule's final shutdown at the latest.
        }
    }

    fn check(&mut self, kind: Kind, name: &'static str, as_bool: bool) {
        let set = self.spec.slot.current();
        self.record(Event::Probe {
            actor: self.spec.id,
        });
        if let Ok(observed) = targets::hold_count(&set, kind, name, as_bool) {
            self.record(Event::Count {
                actor: self.spec.id,
                client: set.tag.clone(),
                kind,
                name: name.to_owned(),
                what: if as_bool {
                    "is_held_by_current_thread"
                } else {
                    "hold_count"
                }
                .into(),
                observed,
            });
        }
    }
}
