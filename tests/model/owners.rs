//! Holders that are not threads (issues 41 and 42): an [`Owner`] driven
//! from several threads at once (`owners/crew.rs`), and an owner driven by
//! tasks whose futures are dropped at random await points
//! (`owners/tasks.rs`, on a tiny executor of its own, `owners/executor.rs`).
//!
//! An owner is one holder, whichever thread or task acts for it: Redis
//! counts its holds in one field (`<client-uuid>:<owner-id>`). So the
//! history records all of an owner's events under one actor id (with op
//! and hold numbers it shares between its threads, [`OwnerLog`]), and the
//! oracle's rules apply to it as to a thread: mutual exclusion against
//! every other holder (threads, and the other owner, of any client), the
//! hold count (its probes are made at rest, when none of its threads or
//! tasks is in a call), losses, shutdowns (its owner id is its "thread
//! number", [`Event::Tid`]), liveness and the end state.
//!
//! At rest, once every request the fault proxy held back has run, the
//! owner's field is looked up in Redis itself ([`rest`]): its count must
//! equal the owner's live guards of the lock (more: the rule "left held",
//! or "dropped future left" when a future of the owner's was dropped on
//! that lock since the last rest; fewer: "hold taken away"), and a dropped
//! future must leave no fair queue entry and no read-hold key; then
//! `hold_count()` is asked (a probe the hold count rule judges).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use redhold::Owner;

use crate::fault_proxy::{Action, Armed, Arming, Matcher, Rule};
use crate::history::{ActorId, Event, HoldId, Recorder};
use crate::rng::Rng;
use crate::targets::{self, AnyGuard, ClientSet, Kind, Method, Target};

mod crew;
mod executor;
mod rest;
mod tasks;

pub(crate) use crew::{spawn as spawn_crew, CrewSpec, OWNER_ROUND};
pub(crate) use rest::{DROPPED_LEFT, DROPPED_PARKED, REST_BOUND};
pub(crate) use tasks::{spawn as spawn_tasks, TasksSpec, ASYNC_REST};

/// The actor id of the owner driven from threads (one per schedule).
pub(crate) const CREW_ACTOR: ActorId = 1_000;
/// The actor id of the owner driven by tasks (one per schedule).
pub(crate) const TASKS_ACTOR: ActorId = 2_000;

/// The lease of an owner's leased hold (ms): longer than a round and the
/// rest after it, so that a guard is released (at a round's end at the
/// latest) before its lease runs out, and the count at rest is exact.
const OWNER_LEASE_MS: (u64, u64) = (2_500, 6_000);

/// The longest the fault proxy holds one of an owner's requests back
/// (ms): past the response timeout (600 ms), so the call gives up on the
/// attempt (a retry, an undo behind it, a release carried on by the
/// worker) and the request still runs later.
const HELD_BACK_MS: (u64, u64) = (700, 1_500);

/// Percent of an owner's acquires and releases whose next request on the
/// lock meets a fault of the proxy (lost request, lost reply, held back).
const FAULT_PERCENT: u64 = 12;

/// Records an owner's events under its one actor id, from any of its
/// threads: every thread's acquires, holds and releases are the owner's.
#[derive(Debug, Clone)]
pub(crate) struct OwnerLog {
    pub(crate) id: ActorId,
    /// `p0.c1.o0`: the process and client part name them like a thread.
    pub(crate) label: String,
    recorder: Recorder,
    /// Op and hold numbers, shared by the owner's threads.
    next: Arc<AtomicU64>,
}

impl OwnerLog {
    /// Names the owner in the history and gives its owner id as its
    /// "thread number" (its holder fields end with it).
    pub(crate) fn start(id: ActorId, label: String, recorder: Recorder, owner: Owner) -> OwnerLog {
        recorder.record(Event::Actor {
            actor: id,
            label: label.clone(),
        });
        recorder.record(Event::Tid {
            actor: id,
            tid: owner.id(),
        });
        OwnerLog {
            id,
            label,
            recorder,
            next: Arc::new(AtomicU64::new(0)),
        }
    }

    pub(crate) fn recorder(&self) -> &Recorder {
        &self.recorder
    }

    pub(crate) fn record(&self, event: Event) {
        self.recorder.record(event);
    }

    fn number(&self) -> u64 {
        (u64::from(self.id) << 32) | self.next.fetch_add(1, Ordering::Relaxed)
    }

    /// Records an acquire of `target` about to be called (`label`: the
    /// call as code); returns its op number.
    pub(crate) fn call(
        &self,
        set: &ClientSet,
        target: &Target,
        method: Method,
        label: String,
        reentrant: bool,
    ) -> u64 {
        let op = self.number();
        self.record(Event::Call {
            actor: self.id,
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

    /// Records that call `op` returned `guard` at `entered` (and flags a
    /// guard returned after its client's shutdown began); its hold number.
    pub(crate) fn enter(
        &self,
        set: &ClientSet,
        kind: Kind,
        op: u64,
        guard: &AnyGuard<Owner>,
        entered: Instant,
    ) -> HoldId {
        let hold = self.number();
        self.record(Event::Enter {
            actor: self.id,
            op,
            hold,
            token: guard.token().unwrap_or(0),
        });
        if let Some(text) = crate::actors::after_shutdown(set, kind, entered, hold) {
            self.flag(text);
        }
        hold
    }

    pub(crate) fn miss(&self, op: u64, outcome: String) {
        self.record(Event::Miss {
            actor: self.id,
            op,
            outcome,
        });
    }

    pub(crate) fn note(&self, text: String) {
        self.record(Event::Note { text });
    }

    pub(crate) fn flag(&self, text: String) {
        self.record(Event::Flag {
            actor: self.id,
            text,
        });
    }
}

/// One guard of an owner, on whichever thread (or task) has it now.
#[derive(Debug)]
pub(crate) struct OwnerHeld {
    pub(crate) hold: HoldId,
    pub(crate) target: Target,
    pub(crate) guard: AnyGuard<Owner>,
    pub(crate) set: Arc<ClientSet>,
    pub(crate) lease: Option<Duration>,
    /// When the acquire was called (local clock).
    pub(crate) called: Instant,
    /// Where it was taken: `t2`, or `task`.
    pub(crate) taken_on: &'static str,
    /// A `HeldFalse` was recorded already.
    pub(crate) reported: bool,
}

impl OwnerHeld {
    /// Whether its lease (if any) may run out before `at`.
    pub(crate) fn lease_ends_before(&self, at: Instant) -> bool {
        self.lease.is_some_and(|l| self.called + l <= at)
    }

    /// Records a watched guard that stopped believing it holds.
    pub(crate) fn watch(&mut self, log: &OwnerLog) {
        if self.reported || self.lease.is_some() || self.guard.is_held() {
            return;
        }
        self.reported = true;
        log.record(Event::HeldFalse {
            actor: log.id,
            hold: self.hold,
        });
    }

    /// Ends the section and releases the hold on this thread (`on`): a
    /// drop, or `unlock()` and its outcome. `fault`: a fault armed (with
    /// [`arm`]) on the owner's next release request of the lock.
    pub(crate) fn release(
        self,
        log: &OwnerLog,
        on: &str,
        drop_it: bool,
        fault: Option<ArmedFault>,
        quiet: &Quiet,
    ) {
        let how = format!(
            "{} on {on} (taken on {})",
            if drop_it { "drop" } else { "unlock" },
            self.taken_on
        );
        log.record(Event::Exit {
            actor: log.id,
            hold: self.hold,
            how,
            held: self.guard.is_held(),
        });
        let result = if drop_it {
            drop(self.guard);
            "dropped".to_owned()
        } else {
            targets::outcome(&self.guard.unlock())
        };
        if let Some(fault) = fault {
            let during = format!("the release of hold #{}", crate::report::hold_id(self.hold));
            fault.settle(log, quiet, &during);
        }
        log.record(Event::Released {
            actor: log.id,
            hold: self.hold,
            result,
        });
    }
}

/// When every request of an owner's that the fault proxy held back has
/// run: its rest waits for that.
#[derive(Debug, Default)]
pub(crate) struct Quiet {
    until: Mutex<Option<Instant>>,
}

impl Quiet {
    /// A request held back runs no later than `at`.
    pub(crate) fn extend(&self, at: Instant) {
        let mut until = self.until.lock();
        *until = Some(until.map_or(at, |u| u.max(at)));
    }

    /// When the last one runs (`None`: none held back).
    pub(crate) fn until(&self) -> Option<Instant> {
        *self.until.lock()
    }
}

/// A fault of the proxy on an owner's next request naming a lock.
#[derive(Debug, Clone, Copy)]
pub(crate) enum FaultPlan {
    LoseRequest,
    LoseReply,
    /// Held back this long before it is forwarded (it runs late).
    DelayRequest(Duration),
    /// Run at once, its reply held back this long.
    DelayReply(Duration),
}

impl FaultPlan {
    /// A fault, `FAULT_PERCENT` of the time.
    pub(crate) fn draw(rng: &mut Rng) -> Option<FaultPlan> {
        rng.chance(FAULT_PERCENT).then(|| match rng.below(4) {
            0 => FaultPlan::LoseRequest,
            1 => FaultPlan::LoseReply,
            2 => FaultPlan::DelayRequest(rng.millis(HELD_BACK_MS.0, HELD_BACK_MS.1)),
            _ => FaultPlan::DelayReply(rng.millis(HELD_BACK_MS.0, HELD_BACK_MS.1)),
        })
    }

    fn action(self) -> Action {
        match self {
            FaultPlan::LoseRequest => Action::LoseRequest,
            FaultPlan::LoseReply => Action::LoseReply,
            FaultPlan::DelayRequest(d) => Action::DelayRequest(d),
            FaultPlan::DelayReply(d) => Action::DelayReply(d),
        }
    }

    fn words(self) -> String {
        match self {
            FaultPlan::LoseRequest => "lost its request".into(),
            FaultPlan::LoseReply => "lost its reply".into(),
            FaultPlan::DelayRequest(d) => format!("held its request back {} ms", d.as_millis()),
            FaultPlan::DelayReply(d) => format!("held its reply back {} ms", d.as_millis()),
        }
    }

    fn delay(self) -> Duration {
        match self {
            FaultPlan::DelayRequest(d) | FaultPlan::DelayReply(d) => d,
            _ => Duration::ZERO,
        }
    }
}

/// The lock on the main server whose requests a rule on `target` matches,
/// and the kind whose field names the owner there (`None` for a RedLock,
/// whose locks the proxy does not see alone).
pub(crate) fn main_lock(target: &Target) -> Option<(&'static str, Kind)> {
    match target.kind {
        Kind::Red => None,
        Kind::Multi => Some((target.names[0], Kind::Plain)),
        kind => Some((target.names[0], kind)),
    }
}

/// The proxy's matcher for `owner`'s requests naming `target`'s lock on
/// the main server (its releases only with `releases`: they carry the
/// unlock latch's key).
pub(crate) fn owner_matcher(
    set: &ClientSet,
    target: &Target,
    owner: Owner,
    releases: bool,
) -> Option<Matcher> {
    let (name, kind) = main_lock(target)?;
    let field = targets::owner_holder_id(set, kind, name, owner);
    let mut containing = vec![field.as_str()];
    if releases {
        containing.push("redisson_unlock_latch:");
    }
    // Never the watchdog's renewal batch (`lua/renew.lua`): it renews
    // every watched hold of the client, so holding it back stalls them
    // all, a fault of the client's path, not one on the owner's requests.
    let renew = redis::Script::new(include_str!("../../lua/renew.lua"));
    Some(Matcher::script(&set.full(name), &containing).excluding(&[renew.get_hash()]))
}

/// A fault armed on an owner's requests.
#[derive(Debug)]
pub(crate) struct ArmedFault {
    armed: Armed,
    plan: FaultPlan,
    what: String,
}

/// Arms `plan` on `owner`'s next request naming `target`'s lock (its next
/// release with `releases`): whichever thread or task of the owner sends
/// it meets the fault.
pub(crate) fn arm(
    proxy: &Arming,
    set: &ClientSet,
    target: &Target,
    owner: Owner,
    releases: bool,
    plan: FaultPlan,
) -> Option<ArmedFault> {
    let matcher = owner_matcher(set, target, owner, releases)?;
    let armed = proxy.arm(Rule {
        matcher,
        action: plan.action(),
    });
    Some(ArmedFault {
        armed,
        plan,
        what: format!(
            "{} {}",
            if releases { "release" } else { "request" },
            target.joined()
        ),
    })
}

impl ArmedFault {
    /// Takes the rule back; if it fired, notes it and moves the owner's
    /// quiet point past the request it held back.
    pub(crate) fn settle(self, log: &OwnerLog, quiet: &Quiet, during: &str) {
        if self.armed.disarm() {
            // Armed before the request was sent: it runs before this.
            quiet.extend(Instant::now() + self.plan.delay());
            log.note(format!(
                "{}: {OWNER_FAULT} the proxy {} (the owner's next {}, during {during})",
                log.label,
                self.plan.words(),
                self.what
            ));
        }
    }
}

/// The words of a note on a fault the proxy did to an owner's request.
pub(crate) const OWNER_FAULT: &str = "owner fault:";

/// A lease for an owner's leased acquire.
pub(crate) fn owner_lease(rng: &mut Rng) -> Duration {
    rng.millis(OWNER_LEASE_MS.0, OWNER_LEASE_MS.1)
}
