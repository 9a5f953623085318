//! The latch model as a [`Model`]: its actions, its steps (each followed
//! by the canonical form) and its properties.

use super::net::{self, event, Loc, NAME};
use super::normalize::{canonical, normalize};
use super::state::{Client, Job, Phase, State, Sub};
use super::{down, pubsub, wait, worker, Config};
use crate::client::Fault;
use crate::keyspace::{Keyspace, Str};
use crate::names::Key;
use crate::search::{Model, Property};

/// One atomic step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// Client `c`'s thread calls `count_down`.
    CountDown(u8),
    /// Client `c`'s thread arms the open latch again (`try_set_count`).
    Set(u8),
    /// Client `c`'s thread calls `wait` (no limit).
    Wait(u8),
    /// Client `c`'s thread calls `wait_for` (the configured ticks).
    WaitFor(u8),
    /// Client `c`'s thread makes its local step (a look).
    Step(u8),
    /// Client `c`'s thread reads its connection.
    Read(u8),
    /// Client `c`'s parked waiter wakes on the re-check.
    Recheck(u8),
    /// Client `c`'s subscriber hears the publish.
    Hear(u8),
    /// Client `c`'s subscriber reconnects after a drop.
    Reconnect(u8),
    /// The server runs a connection's request.
    Run(u8, Loc),
    /// A connection is cut.
    Cut(u8, Loc),
    /// A connection's reply is held back past the response timeout.
    Hold(u8, Loc),
    /// Client `c`'s pub/sub connection drops.
    Drop(u8),
    /// Client `c`'s release worker sends undo `i`.
    WorkerSend(u8, u8),
    /// Client `c`'s release worker reads undo `i`'s connection.
    WorkerRead(u8, u8),
    /// A tick (one response timeout) passes.
    Tick,
}

/// The model of one [`Config`].
#[derive(Debug)]
pub struct LatchModel {
    /// Its configuration.
    pub cfg: Config,
}

/// Whether client `c` has something to do before time moves: its
/// thread's look, a message to hear, a reconnect.
fn busy(client: &Client) -> bool {
    matches!(&client.job, Job::Wait(w) if w.phase == Phase::Look)
        || client.inbox
        || client.sub == Sub::Reconnecting
}

impl Model for LatchModel {
    type State = State;
    type Action = Action;

    fn init(&self) -> Vec<State> {
        let mut redis = Keyspace::new();
        if !self.cfg.set_call {
            // `try_set_count` ran before the threads start.
            redis.set(Key::Name(NAME), Str::Int(self.cfg.count), None);
        }
        let client = Client {
            downs_left: self.cfg.downs,
            waits_left: self.cfg.waits,
            sets_left: 0,
            job: Job::Idle,
            wire: None,
            trailing: Vec::new(),
            sub: Sub::Off,
            inbox: false,
            permits: 0,
            worker: Vec::new(),
        };
        let mut s = State {
            redis,
            clients: vec![client; usize::from(self.cfg.clients)],
            faults_left: self.cfg.fault_budget,
            called: 0,
            opened_early: false,
            overslept: false,
            armed: !self.cfg.set_call,
            opened: false,
            set_calls: 0,
            sets_run: 0,
            undos: Vec::new(),
            next_id: 0,
            events: 0,
        };
        s.clients[0].sets_left = self.cfg.rearms;
        if self.cfg.set_call {
            down::begin_set(&mut s, &self.cfg, 0, false);
        }
        vec![s]
    }

    fn actions(&self, s: &State, out: &mut Vec<Action>) {
        let cfg = &self.cfg;
        for (c, client) in s.clients.iter().enumerate() {
            let c8 = c as u8;
            match &client.job {
                Job::Idle if !s.armed => {}
                Job::Idle => {
                    if client.downs_left > 0 {
                        out.push(Action::CountDown(c8));
                    }
                    if client.waits_left > 0 && cfg.forever {
                        out.push(Action::Wait(c8));
                    }
                    if client.waits_left > 0 && cfg.wait_ticks.is_some() {
                        out.push(Action::WaitFor(c8));
                    }
                    if client.sets_left > 0 && s.opened {
                        out.push(Action::Set(c8));
                    }
                }
                Job::Wait(w) => match w.phase {
                    Phase::Look => out.push(Action::Step(c8)),
                    Phase::Parked { ticks } if ticks >= 1 => out.push(Action::Recheck(c8)),
                    _ => {}
                },
                Job::Down(_) => {}
            }
            if client.wire.as_ref().is_some_and(|w| w.readable()) {
                out.push(Action::Read(c8));
            }
            if client.inbox {
                out.push(Action::Hear(c8));
            }
            if client.sub == Sub::Reconnecting {
                out.push(Action::Reconnect(c8));
            }
            if s.faults_left > 0 && cfg.allows(Fault::PubSubDrop) && client.sub == Sub::On {
                out.push(Action::Drop(c8));
            }
            for (i, g) in client.worker.iter().enumerate() {
                match &g.wire {
                    None if !g.tried && g.until > 1 => out.push(Action::WorkerSend(c8, i as u8)),
                    Some(w) if w.readable() => out.push(Action::WorkerRead(c8, i as u8)),
                    _ => {}
                }
            }
        }
        for (c, loc, w) in net::wires(s) {
            if !w.cut && w.req.is_some() {
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
            Action::CountDown(c) => down::begin(&mut n, cfg, c.into()),
            Action::Set(c) => down::begin_set(&mut n, cfg, c.into(), true),
            Action::Wait(c) => wait::begin(&mut n, cfg, c.into(), None),
            Action::WaitFor(c) => wait::begin(&mut n, cfg, c.into(), cfg.wait_ticks),
            Action::Step(c) => wait::step(&mut n, cfg, c.into()),
            Action::Read(c) => match n.clients[usize::from(c)].job {
                Job::Down(_) => down::read(&mut n, cfg, c.into()),
                Job::Wait(_) => wait::read(&mut n, cfg, c.into()),
                Job::Idle => unreachable!("an idle thread reads nothing"),
            },
            Action::Recheck(c) => wait::recheck(&mut n, cfg, c.into()),
            Action::Hear(c) => pubsub::hear(&mut n, cfg.mutation, c.into()),
            Action::Reconnect(c) => pubsub::reconnect(&mut n, cfg.mutation, c.into()),
            Action::Run(c, loc) => net::run(&mut n, cfg, c.into(), loc)?,
            Action::Cut(c, loc) => net::fault(&mut n, c.into(), loc, false)?,
            Action::Hold(c, loc) => net::fault(&mut n, c.into(), loc, true)?,
            Action::Drop(c) => {
                n.faults_left -= 1;
                pubsub::drop_connection(&mut n, cfg.mutation, c.into());
            }
            Action::WorkerSend(c, i) => worker::send(&mut n, c.into(), i.into())?,
            Action::WorkerRead(c, i) => worker::read(&mut n, c.into(), i.into())?,
            Action::Tick => {
                net::age(&mut n);
                for c in 0..n.clients.len() {
                    // The worker first: an undo handed to it in this
                    // tick has its whole time ahead.
                    worker::tick(&mut n, c);
                    down::tick(&mut n, cfg, c);
                    wait::tick(&mut n, cfg, c);
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
                name: NOT_EARLY,
                holds: |_, s| !s.opened_early,
            },
            Property {
                name: REDIS_COUNT,
                holds: |m, s| {
                    !m.cfg.check_redis_count
                        || !s.armed
                        || net::count(s) + i64::from(s.called) >= m.cfg.count
                },
            },
            Property {
                name: SET_ONCE,
                holds: |_, s| s.sets_run <= s.set_calls,
            },
            Property {
                name: NOT_OVERSLEPT,
                holds: |_, s| !s.overslept,
            },
            Property {
                name: TTLS,
                holds: |m, s| {
                    let longest = down::latch_ttl_ms(&m.cfg);
                    s.redis.keys.keys().all(|&key| match key {
                        Key::Name(_) => s.redis.pttl(key) == -1,
                        Key::Latch(..) => (1..=longest).contains(&s.redis.pttl(key)),
                        _ => false,
                    })
                },
            },
        ]
    }

    fn canonical(&self, state: &State) -> State {
        canonical(state)
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

/// No wait returns "opened" before `count_down` was called as many times
/// as the count set.
pub const NOT_EARLY: &str = "no wait opens before count_down was called count times";
/// Redis never counts more count-downs than were called.
pub const REDIS_COUNT: &str = "Redis counts no more count-downs than were called";
/// No `try_set_count` call sets the count twice (a late attempt arming
/// the latch again after it opened).
pub const SET_ONCE: &str = "no try_set_count call sets the count twice";
/// No waiter stays parked past a tick on the open latch with nothing on
/// its way to wake it.
pub const NOT_OVERSLEPT: &str = "no waiter parked on the open latch with nothing on its way";
/// The latch has no TTL (Redisson's layout); each request latch one no
/// longer than a count-down's.
pub const TTLS: &str = "the latch has no TTL, each request latch a bounded one";
