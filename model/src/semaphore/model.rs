//! The semaphore model as a [`Model`]: its actions, its steps (each
//! followed by the canonical form) and its properties.

use super::call;
use super::net::{self, event, Loc, NAME};
use super::normalize::normalize;
use super::state::{Client, Job, Phase, State};
use super::worker;
use super::Config;
use crate::client::Fault;
use crate::keyspace::{Keyspace, Str};
use crate::names::Key;
use crate::search::{Model, Property};

/// One atomic step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// Client `c`'s thread calls `try_acquire`.
    Try(u8),
    /// Client `c`'s thread calls `try_acquire_for` (the configured wait).
    Wait(u8),
    /// Client `c`'s thread gives its permit back.
    Release(u8),
    /// Client `c`'s thread makes its local step (a look, the call's end).
    Step(u8),
    /// Client `c`'s thread reads its connection.
    Read(u8),
    /// Client `c`'s parked waiter wakes.
    Wake(u8),
    /// The server runs a connection's next request.
    Run(u8, Loc),
    /// A connection is cut.
    Cut(u8, Loc),
    /// A connection's reply is held back past the response timeout.
    Hold(u8, Loc),
    /// Client `c`'s worker sends give-back `i`.
    WorkerSend(u8, u8),
    /// Client `c`'s worker reads give-back `i`'s connection.
    WorkerRead(u8, u8),
    /// A tick (one response timeout) passes.
    Tick,
}

/// The model of one [`Config`].
#[derive(Debug)]
pub struct SemaphoreModel {
    /// Its configuration.
    pub cfg: Config,
}

/// Whether client `c`'s thread has a local step to make before time moves.
fn busy(client: &Client) -> bool {
    matches!(&client.job, Job::Acquire(a) if matches!(a.phase, Phase::Look | Phase::End(_)))
}

/// Permits available in Redis.
pub fn available(s: &State) -> i64 {
    match s.redis.get(Key::Name(NAME)) {
        Ok(Some(Str::Int(n))) => n,
        _ => 0,
    }
}

/// Whether nothing is on its way: every thread idle, no request left to
/// run, no give-back left to the worker.
pub fn at_rest(s: &State) -> bool {
    net::wires(s).iter().all(|(_, _, w)| w.reqs.is_empty())
        && s.clients
            .iter()
            .all(|c| c.job == Job::Idle && c.worker.is_empty())
}

impl Model for SemaphoreModel {
    type State = State;
    type Action = Action;

    fn init(&self) -> Vec<State> {
        let mut redis = Keyspace::new();
        redis.set(Key::Name(NAME), Str::Int(self.cfg.permits), None);
        let client = Client {
            held: 0,
            job: Job::Idle,
            wire: None,
            trailing: Vec::new(),
            worker: Vec::new(),
        };
        vec![State {
            redis,
            clients: vec![client; usize::from(self.cfg.clients)],
            faults_left: self.cfg.fault_budget,
            failed_releases: Vec::new(),
            lost_releases: 0,
            false_grant: false,
            next_id: 0,
            events: 0,
        }]
    }

    fn actions(&self, s: &State, out: &mut Vec<Action>) {
        let cfg = &self.cfg;
        for (c, client) in s.clients.iter().enumerate() {
            let c8 = c as u8;
            match &client.job {
                Job::Idle if client.held == 0 => {
                    if cfg.tries {
                        out.push(Action::Try(c8));
                    }
                    if cfg.wait_ticks.is_some() {
                        out.push(Action::Wait(c8));
                    }
                }
                Job::Idle => out.push(Action::Release(c8)),
                Job::Acquire(a) if a.phase == Phase::Parked => out.push(Action::Wake(c8)),
                _ if busy(client) => out.push(Action::Step(c8)),
                _ => {}
            }
            if client.wire.as_ref().is_some_and(|w| w.readable()) {
                out.push(Action::Read(c8));
            }
            for (i, g) in client.worker.iter().enumerate() {
                match &g.wire {
                    None if g.until > 1 => out.push(Action::WorkerSend(c8, i as u8)),
                    Some(w) if w.readable() => out.push(Action::WorkerRead(c8, i as u8)),
                    _ => {}
                }
            }
        }
        for (c, loc, w) in net::wires(s) {
            if !w.cut && !w.reqs.is_empty() {
                out.push(Action::Run(c as u8, loc));
            }
            if s.faults_left > 0 && !w.cut {
                if cfg.allows(Fault::Cut) {
                    out.push(Action::Cut(c as u8, loc));
                }
                if cfg.allows(Fault::HoldBack) {
                    out.push(Action::Hold(c as u8, loc));
                }
            }
        }
        if !s.clients.iter().any(busy) && net::settled_for_tick(s) && worker::rounds_made(s) {
            out.push(Action::Tick);
        }
    }

    fn step(&self, s: &State, action: &Action) -> Option<State> {
        let cfg = &self.cfg;
        let mut n = s.clone();
        n.events = 0;
        match *action {
            Action::Try(c) => call::begin_acquire(&mut n, cfg, c.into(), Some(0)),
            Action::Wait(c) => call::begin_acquire(&mut n, cfg, c.into(), cfg.wait_ticks),
            Action::Release(c) => call::begin_release(&mut n, cfg, c.into()),
            Action::Step(c) => call::step(&mut n, cfg, c.into()),
            Action::Read(c) => call::read(&mut n, cfg, c.into()),
            Action::Wake(c) => call::wake(&mut n, cfg, c.into()),
            Action::Run(c, loc) => net::run(&mut n, c.into(), loc)?,
            Action::Cut(c, loc) => net::fault(&mut n, c.into(), loc, false)?,
            Action::Hold(c, loc) => net::fault(&mut n, c.into(), loc, true)?,
            Action::WorkerSend(c, i) => worker::send(&mut n, cfg, c.into(), i.into())?,
            Action::WorkerRead(c, i) => worker::read(&mut n, c.into(), i.into())?,
            Action::Tick => {
                net::age(&mut n);
                for c in 0..n.clients.len() {
                    worker::tick(&mut n, c);
                    call::tick(&mut n, cfg, c);
                }
            }
        }
        let events = n.events;
        normalize(&mut n);
        n.events = events;
        Some(n)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property {
                name: NEVER_MORE,
                holds: |m, s| {
                    // A permit whose release ran is no longer in use.
                    let owned: i64 = s
                        .clients
                        .iter()
                        .map(|c| {
                            let back = matches!(&c.job, Job::Release(r) if r.ran);
                            i64::from(c.held) - i64::from(back)
                        })
                        .sum();
                    available(s) >= 0 && available(s) + owned <= m.cfg.permits
                },
            },
            Property {
                name: NO_FALSE_GRANT,
                holds: |_, s| !s.false_grant,
            },
            Property {
                name: AT_REST,
                holds: |m, s| {
                    !at_rest(s) || {
                        let held: i64 = s.clients.iter().map(|c| i64::from(c.held)).sum();
                        let lost = s.failed_releases.len() as i64 + i64::from(s.lost_releases);
                        available(s) + held + lost == m.cfg.permits
                    }
                },
            },
        ]
    }

    fn canonical(&self, state: &State) -> State {
        state.clone()
    }

    fn events(&self, state: &State) -> u64 {
        state.events
    }

    fn event_names(&self, mask: u64) -> Vec<&'static str> {
        (0..event::NAMES.len())
            .filter(|i| mask & (1 << i) != 0)
            .map(|i| event::NAMES[i])
            .collect()
    }
}

/// Never more permits in use than set.
pub const NEVER_MORE: &str = "never more permits in use than set";
/// No acquire told it has a permit that Redis did not give it.
pub const NO_FALSE_GRANT: &str = "no acquire told it has a permit Redis did not give it";
/// At rest, available plus held (plus releases that failed before they
/// ran) equals the permits set.
pub const AT_REST: &str = "at rest, available plus held equals set";
