//! The client model behind the search's [`Model`] trait: its initial
//! state, the actions possible in a state, and one step.

use super::config::{Config, ReleaseMode};
use super::faults::{self, FaultAction};
use super::job::{Call, Job};
use super::mutation::ClientMutation;
use super::normalize::normalize;
use super::pubsub::Heard;
use super::state::{Broken, Client, State, Thread, WireId, Worker};
use super::{
    acquire, events, holds, properties, pubsub, release, render, replica, server, time, worker,
};
use crate::keyspace::Keyspace;
use crate::search::{fingerprint, Model, Property};

/// The client model of one configuration.
#[derive(Clone, Debug)]
pub struct ClientModel {
    /// What it explores.
    pub cfg: Config,
}

/// What an idle thread begins.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Begin {
    /// `try_lock`: one step, no wait.
    Try,
    /// `lock` / `try_lock_for`: waits (within the configured limit).
    Wait,
    /// Releases one of its holds.
    Release(ReleaseMode),
}

/// One atomic step of a thread, a worker, the server, the subscriber,
/// time, or a fault.
#[allow(missing_docs)] // Each field is named for what the variant's doc says.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// An idle thread begins a call.
    Begin { c: u8, t: u8, what: Begin },
    /// A thread moves on (until it waits for something outside itself).
    Go { c: u8, t: u8 },
    /// The worker starts a round on a lane.
    WorkerStart { c: u8, lane: u8 },
    /// The worker moves on.
    Worker { c: u8 },
    /// The server runs a connection's next request.
    Serve(WireId),
    /// A client's subscriber reads a release message: for each lock on
    /// its channel, one of its parked waiters woken, or the wake-up kept
    /// for the next to park.
    Hear(u8, [Heard; 2]),
    /// A tick passes.
    Tick,
    /// Replication catches up (`replica.rs`).
    Replicate,
    /// A fault.
    Fault(FaultAction),
}

impl ClientModel {
    /// The model of `cfg`.
    pub fn new(cfg: Config) -> ClientModel {
        assert!(
            !cfg.waits || cfg.kind.waits_modelled(),
            "the {:?} kind's waits are not modelled",
            cfg.kind
        );
        assert!(
            cfg.braced.is_empty() || cfg.kind == super::config::Kind::Plain,
            "two locks on one channel are modelled for the plain lock only"
        );
        assert!(
            cfg.owners
                .iter()
                .all(|&(c, n)| (0..n).all(|t| cfg.lock(c, t) == cfg.lock(c, 0))),
            "an owner's threads act on one lock"
        );
        ClientModel { cfg }
    }
}

impl Model for ClientModel {
    type State = State;
    type Action = Action;

    fn init(&self) -> Vec<State> {
        let clients = self
            .cfg
            .clients
            .iter()
            .map(|threads| Client {
                up: true,
                partitioned: false,
                inbox: 0,
                permits: [0; 2],
                last_take: [0; 2],
                subscribed: false,
                threads: threads.iter().map(|_| Thread::new()).collect(),
                worker: Worker::default(),
            })
            .collect();
        vec![State {
            redis: Keyspace::new(),
            replica: replica::modelled(&self.cfg).then(Keyspace::new),
            wires: Vec::new(),
            clients,
            faults_left: self.cfg.fault_budget,
            broken: Broken::default(),
            events: 0,
            next_id: 1,
        }]
    }

    fn actions(&self, s: &State, out: &mut Vec<Action>) {
        let cfg = &self.cfg;
        for (c, client) in s.clients.iter().enumerate() {
            let c = c as u8;
            if !client.up {
                continue;
            }
            for (t, thread) in client.threads.iter().enumerate() {
                let t = t as u8;
                match thread.job {
                    Job::Idle => {
                        // The holds of the field it acts for, and its guards
                        // not taken by a release under way.
                        let h = cfg.holder(c, t);
                        let holds = s.thread(c, h).gen.map_or(0, |g| g.count);
                        let guards =
                            holds::guarded(s, c, h).saturating_sub(release::releasing(s, c, h));
                        if holds < cfg.max_holds {
                            if cfg.tries {
                                out.push(Action::Begin {
                                    c,
                                    t,
                                    what: Begin::Try,
                                });
                            }
                            if cfg.waits {
                                out.push(Action::Begin {
                                    c,
                                    t,
                                    what: Begin::Wait,
                                });
                            }
                        }
                        if guards > 0 {
                            for &mode in &cfg.release_modes {
                                let what = Begin::Release(mode);
                                out.push(Action::Begin { c, t, what });
                            }
                        }
                    }
                    _ if time::runnable(cfg, s, c, t) => out.push(Action::Go { c, t }),
                    _ => {}
                }
            }
            if time::worker_runnable(cfg, s, c) {
                out.push(Action::Worker { c });
            }
            for lane in 0..client.threads.len() as u8 {
                if worker::may_start(s, c, lane) {
                    out.push(Action::WorkerStart { c, lane });
                }
            }
            if client.inbox > 0 && !client.partitioned {
                // For each lock on the channel: which of its parked
                // waiters is the oldest, or none parked.
                let choices = |lock: u8| -> Vec<Heard> {
                    let parked: Vec<Heard> = (0..client.threads.len() as u8)
                        .filter(|&t| cfg.lock(c, t) == lock && super::wait::is_waiting(s, c, t))
                        .map(Heard::To)
                        .collect();
                    if parked.is_empty() {
                        vec![Heard::Kept]
                    } else {
                        parked
                    }
                };
                if cfg.mutated(ClientMutation::MessageWakesOneLock) {
                    for lock in 0..cfg.locks() {
                        for heard in choices(lock) {
                            let mut to = [Heard::Missed; 2];
                            to[usize::from(lock)] = heard;
                            out.push(Action::Hear(c, to));
                        }
                    }
                } else {
                    for first in choices(0) {
                        for second in choices(1) {
                            out.push(Action::Hear(c, [first, second]));
                        }
                    }
                }
            }
        }
        for w in 0..s.wires.len() as WireId {
            if server::may_serve(s, w) {
                out.push(Action::Serve(w));
            }
        }
        if time::can_tick(cfg, s) {
            out.push(Action::Tick);
        }
        if replica::behind(s) {
            out.push(Action::Replicate);
        }
        let mut faults = Vec::new();
        faults::enabled(cfg, s, &mut faults);
        out.extend(faults.into_iter().map(Action::Fault));
    }

    fn step(&self, s: &State, action: &Action) -> Option<State> {
        let cfg = &self.cfg;
        let mut n = s.clone();
        n.events = 0;
        match *action {
            Action::Begin { c, t, what } => match what {
                Begin::Try | Begin::Wait => {
                    let waits = what == Begin::Wait;
                    n.thread_mut(c, t).job = Job::Acquire(Call::new(waits, cfg.wait_ticks));
                    acquire::go(cfg, &mut n, c, t);
                }
                Begin::Release(mode) => release::begin(cfg, &mut n, c, t, mode),
            },
            Action::Go { c, t } => match n.thread(c, t).job {
                Job::Acquire(_) => acquire::go(cfg, &mut n, c, t),
                Job::Release(_) => release::go(cfg, &mut n, c, t),
                Job::Idle | Job::Dead => return None,
            },
            Action::WorkerStart { c, lane } => worker::start(cfg, &mut n, c, lane),
            Action::Worker { c } => worker::go(cfg, &mut n, c),
            Action::Serve(w) => server::serve(cfg, &mut n, w),
            Action::Hear(c, to) => pubsub::hear(cfg, &mut n, c, to),
            Action::Tick => time::tick(cfg, &mut n),
            Action::Fault(fault) => faults::apply(cfg, &mut n, fault),
            Action::Replicate => replica::replicate(&mut n),
        }
        replica::forget_unneeded(&mut n);
        properties::clear_excuses(cfg, &mut n);
        normalize(cfg, &mut n);
        if cfg.kind == super::config::Kind::Fenced {
            super::normalize::rank_tokens(&mut n);
        }
        let unchanged = n.events == 0
            && n.redis == s.redis
            && n.replica == s.replica
            && n.wires == s.wires
            && n.clients == s.clients
            && n.faults_left == s.faults_left
            && n.broken == s.broken;
        (!unchanged).then_some(n)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        properties::all()
    }

    fn fingerprint(&self, s: &State) -> u64 {
        // `State`'s hash leaves its events out.
        fingerprint(s)
    }

    fn events(&self, s: &State) -> u64 {
        u64::from(s.events)
    }

    fn event_names(&self, mask: u64) -> Vec<&'static str> {
        events::names(mask)
    }

    fn describe(&self, before: &State, action: &Action, after: &State) -> String {
        render::describe(&self.cfg, before, action, after)
    }
}
