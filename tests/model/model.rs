//! The model a history is judged against: holds, waits, probes, force
//! unlocks, faults and client shutdowns rebuilt from the events, and for
//! every hold the interval in which it was certainly valid.
//!
//! A hold's valid interval is `[acquire returned, end)`, where the end is
//! the earliest of: the release being sent, the lease running out (counted
//! from when the acquire was *called*, since Redis counts from when the
//! script ran, which is later), the library reporting the hold lost (the
//! `on_lock_lost` callback, `guard.is_held()` turning false, `unlock()`
//! returning `LockLost`), the client being shut down, and a `force_unlock`
//! of the lock.
//!
//! A *session* is a stretch in which one thread (or owner) of one client
//! holds a lock at least once (re-entries included, from any of an owner's
//! threads): Redis keeps one hold count for it, so a disturbance anywhere
//! in a session may affect all its holds.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::config::{FAIR_WAIT, FAULT_TAIL, WATCHDOG};
use crate::history::{ActorId, Event, HoldId, Stamped};
use crate::targets::{Kind, Mode};

/// Redis keeps TTLs in whole milliseconds of its own clock, so a key may
/// expire up to a millisecond or so before our monotonic clock says.
const CLOCK_SLOP: Duration = Duration::from_millis(2);

/// Slack added to TTLs when bounding how long a lock may linger in Redis.
const TTL_SLACK: Duration = Duration::from_millis(300);

/// One hold, as the history tells it.
#[derive(Debug, Clone)]
pub(crate) struct Hold {
    pub(crate) id: HoldId,
    pub(crate) actor: ActorId,
    /// The tag of the client set it was taken with.
    pub(crate) client: String,
    pub(crate) kind: Kind,
    pub(crate) names: Vec<String>,
    pub(crate) method: String,
    pub(crate) reentrant: bool,
    pub(crate) lease: Option<Duration>,
    /// The acquire was called (stamp not later than the call).
    pub(crate) call: Instant,
    /// The acquire returned (stamp not earlier than the return).
    pub(crate) enter: Instant,
    /// Fencing token (0 for other kinds).
    pub(crate) token: u64,
    /// The section ended; the release was sent after this.
    pub(crate) exit: Option<Instant>,
    pub(crate) exit_how: String,
    /// `guard.is_held()` just before the exit.
    pub(crate) held_at_exit: Option<bool>,
    /// The release returned, with its result.
    pub(crate) released: Option<Instant>,
    pub(crate) result: String,
    /// `guard.is_held()` was seen false (watched holds).
    pub(crate) held_false: Option<Instant>,
    /// An `on_lock_lost` callback of its client for its lock, confirmed.
    pub(crate) callback: Option<Instant>,
    /// The earliest report of a loss, and how it was reported.
    pub(crate) loss: Option<(Instant, &'static str)>,
    /// Its client set was shut down.
    pub(crate) down: Option<Instant>,
    /// Start of its session (the earliest over its names).
    pub(crate) session_start: Instant,
    /// A restart of one of its servers fell into its session.
    pub(crate) restart: Option<Instant>,
    /// A fault that may legitimately cost a lock (a stall: renewals wait,
    /// and a loaded machine may make them late) touched its session up to
    /// its loss (or end), tail included: `(kind, server, start)`. Killed
    /// connections do not count: a renewal is retried at once, and the
    /// library's own chaos test allows no loss from them.
    pub(crate) faulted: Option<(String, u8, Instant)>,
    /// The first force-unlock that touched its session.
    pub(crate) forced: Option<Instant>,
    /// End of the valid interval (`== enter` when empty).
    pub(crate) valid_end: Instant,
}

impl Hold {
    /// When the lease runs out by the model's (early) reckoning: from the
    /// call, less [`CLOCK_SLOP`].
    pub(crate) fn deadline(&self) -> Option<Instant> {
        self.lease.map(|l| self.call + l.saturating_sub(CLOCK_SLOP))
    }

    /// How it excludes others.
    pub(crate) fn mode(&self) -> Mode {
        self.kind.mode()
    }

    /// The TTL Redis gives it.
    pub(crate) fn ttl(&self) -> Duration {
        self.lease.unwrap_or(WATCHDOG)
    }

    /// The latest moment it may still be in Redis.
    pub(crate) fn lingers_until(&self, end: Instant) -> Instant {
        match (self.released, self.result.as_str()) {
            (Some(at), "ok" | "lost" | "not-held") => at,
            (Some(at), _) => at + self.ttl() + TTL_SLACK,
            (None, _) => {
                let from = match (self.exit, self.down) {
                    (Some(e), Some(d)) => e.max(d),
                    (Some(t), None) | (None, Some(t)) => t,
                    (None, None) => return end + self.ttl(),
                };
                from + self.ttl() + TTL_SLACK
            }
        }
    }

    /// Whether it was released only after its lease may have run out: the
    /// release may have been refused (leaving a phantom count that the
    /// session's other holds keep renewing) or may have taken another hold.
    pub(crate) fn stale_release(&self) -> bool {
        matches!((self.deadline(), self.exit), (Some(d), Some(e)) if e >= d)
    }

    /// Whether another hold's holder is a different thread or client.
    pub(crate) fn other_holder(&self, other: &Hold) -> bool {
        self.actor != other.actor || self.client != other.client
    }
}

/// An acquire that could wait, from call to return.
#[derive(Debug, Clone)]
pub(crate) struct Wait {
    pub(crate) actor: ActorId,
    pub(crate) client: String,
    pub(crate) kind: Kind,
    pub(crate) names: Vec<String>,
    pub(crate) method: String,
    pub(crate) start: Instant,
    pub(crate) end: Instant,
    pub(crate) outcome: String,
}

/// A `hold_count()` or `is_held_by_current_thread()` answer.
#[derive(Debug, Clone)]
pub(crate) struct Probe {
    pub(crate) actor: ActorId,
    pub(crate) client: String,
    pub(crate) kind: Kind,
    pub(crate) name: String,
    pub(crate) what: String,
    pub(crate) start: Instant,
    pub(crate) at: Instant,
    pub(crate) observed: u32,
}

/// A `force_unlock` call.
#[derive(Debug, Clone)]
pub(crate) struct Force {
    pub(crate) kind: Kind,
    pub(crate) names: Vec<String>,
    pub(crate) start: Instant,
    pub(crate) end: Instant,
    /// Whether it deleted a lock (`force_unlock` answered true), or may
    /// have (no answer). A read-write lock's side deletes only a lock held
    /// in its own mode.
    pub(crate) deleted: bool,
}

/// A fault on one server.
#[derive(Debug, Clone)]
pub(crate) struct Fault {
    pub(crate) server: u8,
    pub(crate) kind: String,
    pub(crate) start: Instant,
    pub(crate) end: Instant,
}

impl Fault {
    /// Whether the fault may make a client lose a lock without a bug: a
    /// stall (`DEBUG SLEEP`) can delay renewals past the TTL on a loaded
    /// machine; a restart wipes everything. Connection kills cannot: the
    /// command is retried at once.
    pub(crate) fn may_lose_locks(&self) -> bool {
        self.kind.starts_with("sleep") || self.kind == "restart"
    }

    /// Until when the fault may still have effects.
    pub(crate) fn tail(&self) -> Instant {
        self.end + FAULT_TAIL
    }
}

/// One session of one holder on one name: when it may be in Redis.
#[derive(Debug, Clone)]
pub(crate) struct Session {
    pub(crate) actor: ActorId,
    pub(crate) client: String,
    pub(crate) mode: Mode,
    pub(crate) start: Instant,
    /// The latest moment its holds may linger in Redis.
    pub(crate) busy_until: Instant,
    /// The first release of a leased hold past its lease in the session:
    /// from then on Redis may count a phantom hold (a refused release) that
    /// the session's later holds keep alive.
    pub(crate) phantom_since: Option<Instant>,
}

/// Everything rebuilt from one history.
#[derive(Debug)]
pub(crate) struct Model {
    pub(crate) t0: Instant,
    pub(crate) end: Instant,
    pub(crate) holds: Vec<Hold>,
    pub(crate) by_id: HashMap<HoldId, usize>,
    /// Hold indexes per actor, in acquire order.
    pub(crate) by_actor: HashMap<ActorId, Vec<usize>>,
    pub(crate) waits: Vec<Wait>,
    pub(crate) probes: Vec<Probe>,
    pub(crate) forces: Vec<Force>,
    pub(crate) faults: Vec<Fault>,
    pub(crate) downs: HashMap<String, Instant>,
    /// Sessions per short name.
    pub(crate) sessions: HashMap<String, Vec<Session>>,
    pub(crate) labels: HashMap<ActorId, String>,
    /// Problems actors found themselves: `(at, actor, text)`.
    pub(crate) flags: Vec<(Instant, ActorId, String)>,
    pub(crate) notes: Vec<(Instant, String)>,
    /// `on_lock_lost` callbacks: `(at, client tag, short name)`.
    pub(crate) callbacks: Vec<(Instant, String, String)>,
    /// Operations the actors reported when done.
    pub(crate) ops: u64,
    /// Acquire calls, and how their misses ended (`busy`, `error:…`).
    pub(crate) calls: u64,
    pub(crate) misses: HashMap<String, u64>,
    /// What each acquire op was on, for excerpts.
    pub(crate) op_targets: HashMap<u64, (Kind, Vec<String>)>,
    /// Acquires that failed with an error (the hold may exist in Redis
    /// all the same): `(at, actor, client, names)`.
    pub(crate) failed: Vec<(Instant, ActorId, String, Vec<String>)>,
    /// Until when requests of an actor through a client on a name were
    /// held back at the proxy, or what follows them on its way
    /// (`Event::HeldBack`).
    pub(crate) held_back: Vec<(Instant, ActorId, String, String)>,
    /// When each client set's `shutdown()` first returned.
    pub(crate) gone: HashMap<String, Instant>,
    /// What the scans after shutdowns found (see `remains.rs`).
    pub(crate) remains: Vec<Remain>,
    /// Each actor's library thread number, where it was learned.
    pub(crate) tids: HashMap<ActorId, u64>,
    /// Multi-lock and red-lock acquires, from call to return: `(actor,
    /// client, names, call, return)`. Their parts are separate locks with
    /// guards of their own while the call runs.
    pub(crate) composite_calls: Vec<(ActorId, String, Vec<String>, Instant, Instant)>,
}

/// A lock hash a client set had fields in right after its shutdown.
#[derive(Debug, Clone)]
pub(crate) struct Remain {
    /// The client set's tag.
    pub(crate) client: String,
    pub(crate) server: u8,
    /// Short lock name.
    pub(crate) name: String,
    /// The thread numbers of its fields.
    pub(crate) tids: Vec<u64>,
    /// When the scan started (`shutdown()` had returned) and found it.
    pub(crate) scan: Instant,
    pub(crate) at: Instant,
}

/// The process part of an actor label or client tag (`p1` of `p1.c0.t2`):
/// thread numbers are unique within a process only.
pub(crate) fn process_of(label: &str) -> &str {
    label.split('.').next().unwrap_or(label)
}

/// The fields of a `Call` waiting for its `Enter` or `Miss`.
#[derive(Debug, Clone)]
struct Call {
    actor: ActorId,
    client: String,
    kind: Kind,
    names: Vec<String>,
    method: String,
    lease_ms: u64,
    wait_ms: i64,
    reentrant: bool,
    at: Instant,
}

fn split_names(names: &str) -> Vec<String> {
    names.split('+').map(str::to_owned).collect()
}

impl Model {
    /// Rebuilds the model from `events` (in stamp order); `prefix` is the
    /// run's key prefix, stripped from names the callbacks report.
    pub(crate) fn build(events: &[Stamped], t0: Instant, prefix: &str) -> Model {
        let end = events.last().map_or(t0, |e| e.at);
        let mut m = Model {
            t0,
            end,
            holds: Vec::new(),
            by_id: HashMap::new(),
            by_actor: HashMap::new(),
            waits: Vec::new(),
            probes: Vec::new(),
            forces: Vec::new(),
            faults: Vec::new(),
            downs: HashMap::new(),
            sessions: HashMap::new(),
            labels: HashMap::new(),
            flags: Vec::new(),
            notes: Vec::new(),
            callbacks: Vec::new(),
            ops: 0,
            calls: 0,
            misses: HashMap::new(),
            op_targets: HashMap::new(),
            failed: Vec::new(),
            held_back: Vec::new(),
            gone: HashMap::new(),
            remains: Vec::new(),
            tids: HashMap::new(),
            composite_calls: Vec::new(),
        };
        let mut scans: HashMap<String, Instant> = HashMap::new();
        let mut calls: HashMap<u64, Call> = HashMap::new();
        let mut forces: HashMap<ActorId, (Kind, Vec<String>, Instant)> = HashMap::new();
        let mut probes: HashMap<ActorId, Instant> = HashMap::new();
        let mut faults: HashMap<(u8, String), Instant> = HashMap::new();
        for Stamped { at, event } in events {
            let at = *at;
            match event {
                Event::Actor { actor, label } => {
                    m.labels.insert(*actor, label.clone());
                }
                Event::Call {
                    actor,
                    op,
                    client,
                    kind,
                    names,
                    method,
                    lease_ms,
                    wait_ms,
                    reentrant,
                } => {
                    m.calls += 1;
                    m.op_targets.insert(*op, (*kind, split_names(names)));
                    calls.insert(
                        *op,
                        Call {
                            actor: *actor,
                            client: client.clone(),
                            kind: *kind,
                            names: split_names(names),
                            method: method.clone(),
                            lease_ms: *lease_ms,
                            wait_ms: *wait_ms,
                            reentrant: *reentrant,
                            at,
                        },
                    );
                }
                Event::Enter {
                    actor,
                    op,
                    hold,
                    token,
                } => {
                    let Some(call) = calls.remove(op) else {
                        m.notes.push((at, format!("enter of unknown op {op}")));
                        continue;
                    };
                    m.push_wait(&call, at, "acquired");
                    m.push_composite(&call, at);
                    let index = m.holds.len();
                    m.holds.push(Hold {
                        id: *hold,
                        actor: *actor,
                        client: call.client,
                        kind: call.kind,
                        names: call.names,
                        method: call.method,
                        reentrant: call.reentrant,
                        lease: (call.lease_ms > 0).then(|| Duration::from_millis(call.lease_ms)),
                        call: call.at,
                        enter: at,
                        token: *token,
                        exit: None,
                        exit_how: String::new(),
                        held_at_exit: None,
                        released: None,
                        result: String::new(),
                        held_false: None,
                        callback: None,
                        loss: None,
                        down: None,
                        session_start: call.at,
                        restart: None,
                        faulted: None,
                        forced: None,
                        valid_end: at,
                    });
                    m.by_id.insert(*hold, index);
                    m.by_actor.entry(*actor).or_default().push(index);
                }
                Event::Miss { op, outcome, .. } => {
                    let word = outcome.split(':').next().unwrap_or("").to_owned();
                    *m.misses.entry(word).or_default() += 1;
                    if let Some(call) = calls.remove(op) {
                        if outcome.starts_with("error") {
                            m.failed.push((
                                at,
                                call.actor,
                                call.client.clone(),
                                call.names.clone(),
                            ));
                        }
                        m.push_wait(&call, at, outcome);
                        m.push_composite(&call, at);
                    }
                }
                Event::Exit {
                    hold, how, held, ..
                } => {
                    if let Some(&i) = m.by_id.get(hold) {
                        let h = &mut m.holds[i];
                        h.exit = Some(at);
                        h.exit_how = how.clone();
                        // A leaked guard is gone: nobody could ask its
                        // `is_held()`, so the exit says nothing about it.
                        h.held_at_exit = (!how.contains("leaked")).then_some(*held);
                    }
                }
                Event::Released { hold, result, .. } => {
                    if let Some(&i) = m.by_id.get(hold) {
                        let h = &mut m.holds[i];
                        h.released = Some(at);
                        h.result = result.clone();
                    }
                }
                Event::HeldFalse { hold, .. } => {
                    if let Some(&i) = m.by_id.get(hold) {
                        m.holds[i].held_false.get_or_insert(at);
                    }
                }
                Event::Flag { actor, text } => m.flags.push((at, *actor, text.clone())),
                Event::Probe { actor } => {
                    probes.insert(*actor, at);
                }
                Event::Count {
                    actor,
                    client,
                    kind,
                    name,
                    what,
                    observed,
                } => {
                    if let Some(start) = probes.remove(actor) {
                        m.probes.push(Probe {
                            actor: *actor,
                            client: client.clone(),
                            kind: *kind,
                            name: name.clone(),
                            what: what.clone(),
                            start,
                            at,
                            observed: *observed,
                        });
                    }
                }
                Event::Lost { client, name } => {
                    let short = crate::targets::short_name(prefix, name)
                        .map_or_else(|| name.clone(), |s| s.into_owned());
                    let set = client.split('/').next().unwrap_or(client);
                    m.callbacks.push((at, set.to_owned(), short));
                }
                Event::ForceStart { actor, kind, names } => {
                    forces.insert(*actor, (*kind, split_names(names), at));
                }
                Event::ForceEnd { actor, result } => {
                    if let Some((kind, names, start)) = forces.remove(actor) {
                        m.forces.push(Force {
                            kind,
                            names,
                            start,
                            end: at,
                            deleted: result != "false",
                        });
                    }
                }
                Event::ClientDown { client } => {
                    m.downs.entry(client.clone()).or_insert(at);
                }
                Event::ClientUp { .. } => {}
                Event::ClientGone { client } => {
                    m.gone.entry(client.clone()).or_insert(at);
                    scans.insert(client.clone(), at);
                }
                Event::Remains {
                    client,
                    server,
                    name,
                    tids,
                } => m.remains.push(Remain {
                    client: client.clone(),
                    server: *server,
                    name: name.clone(),
                    tids: tids.split(',').filter_map(|t| t.parse().ok()).collect(),
                    scan: scans.get(client).copied().unwrap_or(at),
                    at,
                }),
                Event::Tid { actor, tid } => {
                    m.tids.insert(*actor, *tid);
                }
                Event::HeldBack {
                    actor,
                    client,
                    name,
                    for_ms,
                } => m.held_back.push((
                    at + Duration::from_millis(*for_ms),
                    *actor,
                    client.clone(),
                    name.clone(),
                )),
                Event::FaultStart { server, kind } => {
                    faults.insert((*server, kind.clone()), at);
                }
                Event::FaultEnd { server, kind } => {
                    if let Some(start) = faults.remove(&(*server, kind.clone())) {
                        m.faults.push(Fault {
                            server: *server,
                            kind: kind.clone(),
                            start,
                            end: at,
                        });
                    }
                }
                Event::Done { ops, .. } => m.ops += ops,
                Event::Note { text } => m.notes.push((at, text.clone())),
            }
        }
        // Calls that never returned: waits until the end (a hang).
        for call in calls.into_values() {
            m.push_wait(&call, end, "unfinished");
        }
        // Forces and faults that never ended count until the end.
        for (kind, names, start) in forces.into_values() {
            m.forces.push(Force {
                kind,
                names,
                start,
                end,
                deleted: true,
            });
        }
        for ((server, kind), start) in faults {
            m.faults.push(Fault {
                server,
                kind,
                start,
                end,
            });
        }
        m.derive();
        m
    }

    fn push_composite(&mut self, call: &Call, end: Instant) {
        if matches!(call.kind, Kind::Multi | Kind::Red)
            || crate::targets::is_member_call(&call.method)
        {
            self.composite_calls.push((
                call.actor,
                call.client.clone(),
                call.names.clone(),
                call.at,
                end,
            ));
        }
    }

    fn push_wait(&mut self, call: &Call, end: Instant, outcome: &str) {
        // A member of a multi-lock waits for the whole set, not for itself.
        if call.wait_ms == 0 || crate::targets::is_member_call(&call.method) {
            return;
        }
        self.waits.push(Wait {
            actor: call.actor,
            client: call.client.clone(),
            kind: call.kind,
            names: call.names.clone(),
            method: call.method.clone(),
            start: call.at,
            end,
            outcome: outcome.to_owned(),
        });
    }

    /// Computes losses, sessions, disturbances and valid intervals.
    fn derive(&mut self) {
        let end = self.end;
        for h in &mut self.holds {
            // A set's shutdown is recorded before its clients shut down one
            // by one (each letting its waiters leave their queues first), so
            // a hold can be taken on a client of a set already recorded
            // down: its client went down all the same, as it was taken.
            h.down = self.downs.get(&h.client).map(|d| (*d).max(h.call));
        }
        self.attribute_callbacks();
        for h in &mut self.holds {
            h.loss = loss_of(h);
        }
        self.build_sessions();
        let faults = self.faults.clone();
        let forces = self.forces.clone();
        for h in &mut self.holds {
            let raw_end = raw_end(h, end);
            let servers = h.kind.servers();
            h.restart = faults
                .iter()
                .filter(|f| f.kind == "restart" && servers.contains(&f.server))
                .filter(|f| {
                    f.start < raw_end && f.end + Duration::from_millis(100) > h.session_start
                })
                .map(|f| f.start)
                .min();
            let upto = h.loss.map_or(raw_end, |(at, _)| at);
            h.faulted = faults
                .iter()
                .filter(|f| f.may_lose_locks() && servers.contains(&f.server))
                .filter(|f| f.start < upto && f.tail() > h.session_start)
                .min_by_key(|f| f.start)
                .map(|f| (f.kind.clone(), f.server, f.start));
            h.forced = forces
                .iter()
                .filter(|f| f.kind.family() == h.kind.family())
                .filter(|f| f.names.iter().any(|n| h.names.contains(n)))
                .filter(|f| f.start < raw_end && f.end > h.session_start)
                .map(|f| f.start)
                .min();
            let cut = h.forced.map_or(raw_end, |f| raw_end.min(f.max(h.enter)));
            h.valid_end = cut.max(h.enter);
        }
    }

    /// Attributes each `on_lock_lost` callback to the watched holds of
    /// that client and lock alive at the time whose guard later confirmed
    /// the loss (`is_held()` false or `LockLost`): the callback names the
    /// lock, not the thread.
    fn attribute_callbacks(&mut self) {
        let end = self.end;
        for (at, client, name) in &self.callbacks {
            let live = |h: &Hold| {
                h.lease.is_none()
                    && &h.client == client
                    && h.names.contains(name)
                    && h.enter <= *at
                    && h.exit.unwrap_or(end) >= *at
            };
            // The callback names the lock, not the thread: with watched
            // holds of several threads of this client on it, whose record
            // was lost is unknown, so it is attributed to none of them
            // (their losses are still judged by `is_held` and releases).
            let mut actors: Vec<ActorId> = self
                .holds
                .iter()
                .filter(|h| live(h))
                .map(|h| h.actor)
                .collect();
            actors.sort_unstable();
            actors.dedup();
            if actors.len() > 1 {
                continue;
            }
            for h in &mut self.holds {
                let confirmed = h.held_false.is_some() || h.result == "lost";
                if confirmed && live(h) {
                    h.callback = Some(h.callback.map_or(*at, |t| t.min(*at)));
                }
            }
        }
    }

    /// Groups holds into sessions per (actor, client, name, mode): a hold
    /// called while an earlier one may still be counted in Redis (not
    /// released, or released with an unknown outcome and not yet expired)
    /// joins its session.
    fn build_sessions(&mut self) {
        let end = self.end;
        let mut groups: HashMap<(ActorId, String, String, Mode), Vec<usize>> = HashMap::new();
        for (i, h) in self.holds.iter().enumerate() {
            for name in &h.names {
                groups
                    .entry((h.actor, h.client.clone(), name.clone(), h.mode()))
                    .or_default()
                    .push(i);
            }
        }
        for ((actor, client, name, mode), mut members) in groups {
            members.sort_by_key(|&i| self.holds[i].call);
            let mut sessions: Vec<Session> = Vec::new();
            for i in members {
                let h = &self.holds[i];
                let mut until = h.lingers_until(end);
                let stale = h.stale_release().then(|| h.exit.unwrap_or(end));
                let joins = sessions.last().is_some_and(|s| h.call <= s.busy_until);
                if !joins {
                    sessions.push(Session {
                        actor,
                        client: client.clone(),
                        mode,
                        start: h.call,
                        busy_until: until,
                        phantom_since: None,
                    });
                }
                let s = sessions.last_mut().expect("a session was just ensured");
                if let Some(at) = stale {
                    s.phantom_since = Some(s.phantom_since.map_or(at, |p| p.min(at)));
                }
                // A phantom count outlives every later release by up to a
                // watchdog timeout.
                if s.phantom_since.is_some() {
                    until = until.max(h.released.unwrap_or(end) + WATCHDOG + TTL_SLACK);
                }
                s.busy_until = s.busy_until.max(until);
                let start = sessions.last().map_or(h.call, |s| s.start);
                let h = &mut self.holds[i];
                h.session_start = h.session_start.min(start);
            }
            self.sessions.entry(name).or_default().extend(sessions);
        }
    }

    /// Every hold of `actor`, in history order.
    pub(crate) fn holds_of(&self, actor: ActorId) -> impl Iterator<Item = &Hold> {
        self.by_actor
            .get(&actor)
            .into_iter()
            .flatten()
            .map(|&i| &self.holds[i])
    }

    /// The actor's label, or its number.
    pub(crate) fn label(&self, actor: ActorId) -> String {
        self.labels
            .get(&actor)
            .cloned()
            .unwrap_or_else(|| format!("actor{actor}"))
    }

    /// Seconds since the schedule started, e.g. `3.214s`.
    pub(crate) fn time(&self, at: Instant) -> String {
        format!(
            "{:.3}s",
            at.saturating_duration_since(self.t0).as_secs_f64()
        )
    }

    /// How long after a disturbance a fair lock may stay blocked by a dead
    /// waiter's queue entry.
    pub(crate) fn fair_tail(kind: Kind) -> Duration {
        if kind == Kind::Fair {
            FAIR_WAIT + WATCHDOG
        } else {
            Duration::ZERO
        }
    }
}

/// The earliest reported loss of a hold.
fn loss_of(h: &Hold) -> Option<(Instant, &'static str)> {
    let mut best: Option<(Instant, &'static str)> = None;
    let mut consider = |at: Instant, how: &'static str| {
        if best.is_none_or(|(b, _)| at < b) {
            best = Some((at, how));
        }
    };
    match h.deadline() {
        None => {
            if let Some(at) = h.held_false {
                consider(at, "guard.is_held() turned false");
            }
            if let Some(at) = h.callback {
                consider(at, "on_lock_lost callback");
            }
            if h.result == "lost" {
                if let Some(at) = h.released {
                    consider(at, "unlock() returned LockLost");
                }
            }
        }
        Some(deadline) => {
            if h.result == "lost" {
                if let Some(at) = h.released.filter(|at| *at < deadline) {
                    consider(at, "unlock() returned LockLost before the lease ran out");
                }
            }
        }
    }
    best
}

/// The end of a hold's valid interval before force-unlocks are applied.
fn raw_end(h: &Hold, end: Instant) -> Instant {
    let mut until = h.exit.unwrap_or(end);
    for t in [h.deadline(), h.loss.map(|(at, _)| at), h.down]
        .into_iter()
        .flatten()
    {
        until = until.min(t);
    }
    until.max(h.enter)
}
