//! Connections: the requests they carry run on the server (`Pool::run_once`:
//! one request on one connection at a time), and the faults of the proxy.

use super::pubsub;
use super::state::{Job, Req, State, Wire};
use super::{Config, LatchMutation};
use crate::call::{Call, Publish};
use crate::client::config::TICK_MS;
use crate::keyspace::Str;
use crate::names::{Key, Name, Request};
use crate::reply::Reply;
use crate::scripts::{self, Env};

/// The latch's name.
pub const NAME: Name = Name(0);

/// Where a connection is, within a client.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Loc {
    /// The one its thread waits on.
    Own,
    /// One nobody reads any more.
    Trailing(u8),
    /// The attempt of an undo its release worker carries on.
    Worker(u8),
}

/// Reachability events (bits of [`State::events`]).
pub mod event {
    /// A count-down's attempt found its call's latch and replayed it.
    pub const DOWN_REPLAYED: u64 = 1;
    /// A count-down ran after its call had returned (held back, then run
    /// late).
    pub const DOWN_RAN_LATE: u64 = 2;
    /// A parked waiter was woken by the publish at zero.
    pub const WOKEN_BY_PUBLISH: u64 = 4;
    /// A waiter about to park looked again on a wake-up kept for it.
    pub const KEPT_WAKE_UP: u64 = 8;
    /// A reconnect of the subscriber woke a waiter.
    pub const RECONNECT_WOKE: u64 = 16;
    /// The re-check woke a parked waiter.
    pub const RECHECK_WOKE: u64 = 32;
    /// The look after subscribing found the latch open.
    pub const SECOND_LOOK_OPENED: u64 = 64;
    /// A wait returned "opened".
    pub const OPENED: u64 = 128;
    /// A `wait_for` ran out.
    pub const RAN_OUT: u64 = 256;
    /// A wait ended in an error (an outage past its tolerance or its
    /// wait).
    pub const WAIT_FAILED: u64 = 512;
    /// A `try_set_count`'s attempt found its call's latch and replayed it.
    pub const SET_REPLAYED: u64 = 1024;
    /// An undo closed a call none of whose attempts had run.
    pub const UNDO_CLOSED: u64 = 2048;
    /// An undo gave back the count its call's attempt took.
    pub const UNDO_GAVE_BACK: u64 = 4096;
    /// A count-down's attempt found its call closed and counted nothing.
    pub const REPLAYED_CLOSED: u64 = 8192;
    /// A late attempt of a count-down that returned its error, its undo
    /// not confirmed, ran in a later round before any copy of the undo:
    /// the window the undo leaves.
    pub const OUTRAN_UNDO: u64 = 16384;
    /// An undo the release worker carried on ran.
    pub const WORKER_UNDID: u64 = 32768;
    /// The names, in bit order.
    pub const NAMES: [&str; 16] = [
        "a count-down's retry replayed its latch",
        "a count-down ran after its call returned",
        "a parked waiter was woken by the publish",
        "a waiter looked again on a kept wake-up",
        "a reconnect woke a waiter",
        "the re-check woke a parked waiter",
        "the look after subscribing found the latch open",
        "a wait returned opened",
        "a wait_for ran out",
        "a wait failed",
        "a try_set_count's attempt replayed its latch",
        "an undo closed a call none of whose attempts ran",
        "an undo gave a count back",
        "a count-down's attempt found its call closed",
        "a late count-down outran its undo into a later round",
        "an undo the worker carried on ran",
    ];
}

/// `latch_count_down.lua` under request latch `latch`.
pub fn count_down(cfg: &Config, latch: u16) -> Call {
    Call::LatchCountDown {
        name: NAME,
        latch: Request(latch),
        latch_ttl: i64::from(cfg.latch_ticks()) * TICK_MS,
        publish: Publish::Classic,
    }
}

/// `latch_try_set.lua` of the configured count under request latch
/// `latch`.
pub fn try_set(cfg: &Config, latch: u16) -> Call {
    Call::LatchTrySet {
        name: NAME,
        count: cfg.count,
        latch: Request(latch),
        latch_ttl: i64::from(cfg.latch_ticks()) * TICK_MS,
        publish: Publish::Classic,
    }
}

/// `latch_count_down_undo.lua` for the call under request latch `latch`.
pub fn undo(cfg: &Config, latch: u16) -> Call {
    Call::LatchCountDownUndo {
        name: NAME,
        latch: Request(latch),
        latch_ttl: i64::from(cfg.latch_ticks()) * TICK_MS,
    }
}

/// The count in Redis: 0 when there is no key (`read_count`).
pub fn count(s: &State) -> i64 {
    match s.redis.get(Key::Name(NAME)) {
        Ok(Some(Str::Int(n))) => n,
        _ => 0,
    }
}

/// The connection at `loc` of client `c`.
pub fn wire_mut(s: &mut State, c: usize, loc: Loc) -> Option<&mut Wire> {
    let client = &mut s.clients[c];
    match loc {
        Loc::Own => client.wire.as_mut(),
        Loc::Trailing(i) => client.trailing.get_mut(usize::from(i)),
        Loc::Worker(i) => client.worker.get_mut(usize::from(i))?.wire.as_mut(),
    }
}

/// Every connection's location in `s`, with the connection.
pub fn wires(s: &State) -> Vec<(usize, Loc, &Wire)> {
    let mut out = Vec::new();
    for (c, client) in s.clients.iter().enumerate() {
        if let Some(w) = &client.wire {
            out.push((c, Loc::Own, w));
        }
        for (i, w) in client.trailing.iter().enumerate() {
            out.push((c, Loc::Trailing(i as u8), w));
        }
        for (i, g) in client.worker.iter().enumerate() {
            if let Some(w) = &g.wire {
                out.push((c, Loc::Worker(i as u8), w));
            }
        }
    }
    out
}

/// Runs the request of the connection at `loc` on the server: its reply
/// kept for its reader; the publish at zero sent to every subscriber.
pub fn run(s: &mut State, cfg: &Config, c: usize, loc: Loc) -> Option<()> {
    let wire = wire_mut(s, c, loc)?;
    if wire.cut {
        return None;
    }
    let req = wire.req.take()?;
    let answer = match req {
        Req::Get => {
            let n = count(s);
            let early = n == 0 && i64::from(s.called) < cfg.count;
            if let Some(w) = wire_mut(s, c, loc) {
                w.early = early;
            }
            n
        }
        Req::CountDown(latch) => {
            let outcome = scripts::run(&mut s.redis, &count_down(cfg, latch), Env::default());
            let Reply::Int(left) = outcome.reply else {
                panic!("latch script error: {:?}", outcome.reply);
            };
            match outcome.branch {
                "replay" => s.events |= event::DOWN_REPLAYED,
                "replay-closed" => s.events |= event::REPLAYED_CLOSED,
                "opened" => s.opened = true,
                _ => {}
            }
            if !outcome.branch.starts_with("replay") {
                outran(s, cfg, latch);
            }
            let ours = matches!(&s.clients[c].job, Job::Down(d) if d.latch == latch);
            if loc != Loc::Own && !ours && !outcome.branch.starts_with("replay") {
                s.events |= event::DOWN_RAN_LATE;
            }
            if !outcome.published.is_empty() && !cfg.mutated(LatchMutation::NoPublishAtZero) {
                pubsub::published(s);
            }
            left
        }
        Req::TrySet(latch) => {
            let outcome = scripts::run(&mut s.redis, &try_set(cfg, latch), Env::default());
            let Reply::Int(set) = outcome.reply else {
                panic!("latch script error: {:?}", outcome.reply);
            };
            match outcome.branch {
                "replay" => s.events |= event::SET_REPLAYED,
                "set" => {
                    // A new round: the count-downs under way that have not
                    // run yet (no request latch) may count in it.
                    s.sets_run += 1;
                    s.opened = false;
                    let redis = &s.redis;
                    let unrun = |job: &Job| match job {
                        Job::Down(d) if !d.set => !redis.exists(Key::Latch(NAME, Request(d.latch))),
                        _ => false,
                    };
                    s.called = s.clients.iter().filter(|c| unrun(&c.job)).count() as u8;
                }
                _ => {}
            }
            // "A new count": every waiter looks again.
            if !outcome.published.is_empty() {
                pubsub::published(s);
            }
            set
        }
        Req::Undo(latch) => {
            let outcome = scripts::run(&mut s.redis, &undo(cfg, latch), Env::default());
            let Reply::Int(given) = outcome.reply else {
                panic!("latch script error: {:?}", outcome.reply);
            };
            match outcome.branch {
                "none-ran" => s.events |= event::UNDO_CLOSED,
                "given-back" => s.events |= event::UNDO_GAVE_BACK,
                _ => {}
            }
            if matches!(loc, Loc::Worker(_)) {
                s.events |= event::WORKER_UNDID;
            }
            s.undos.retain(|&(id, _)| id != latch);
            given
        }
    };
    let wire = wire_mut(s, c, loc)?;
    if wire.awaited {
        wire.answer = Some(answer);
    }
    // The undo written behind it runs next.
    wire.req = wire.then.take();
    Some(())
}

/// A count-down's attempt of call `latch` counted: when the call returned
/// its error in an earlier round, its undo not confirmed and no copy of it
/// run yet, it outran its undo into this round (the window the undo
/// leaves); excused, it counts as a call of this round.
fn outran(s: &mut State, cfg: &Config, latch: u16) {
    let Some(&(_, round)) = s.undos.iter().find(|&&(id, _)| id == latch) else {
        return;
    };
    if round != s.sets_run {
        s.events |= event::OUTRAN_UNDO;
        if cfg.excuse_outrun {
            s.called += 1;
        }
    }
}

/// A fault on a connection: cut (its request lost if not run, its reply
/// if it ran), or its reply held back past the response timeout (its
/// request still runs, within the next tick).
pub fn fault(s: &mut State, c: usize, loc: Loc, hold: bool) -> Option<()> {
    if s.faults_left == 0 {
        return None;
    }
    let wire = wire_mut(s, c, loc)?;
    let pending = wire.req.is_some() || (wire.awaited && wire.answer.is_some());
    if wire.cut || !pending || (hold && (wire.held || !wire.awaited)) {
        return None;
    }
    if hold {
        wire.held = true;
    } else {
        wire.cut = true;
        wire.req = None;
        wire.then = None;
        wire.answer = None;
    }
    s.faults_left -= 1;
    Some(())
}

/// Whether the tick may pass for the connections: every request not held
/// back ran, every held one that aged ran, every reply its reader may read
/// was read.
pub fn settled_for_tick(s: &State) -> bool {
    wires(s).iter().all(|&(_, loc, w)| {
        let must_run = w.req.is_some() && !w.cut && (!w.held || w.aged);
        let must_read = matches!(loc, Loc::Own | Loc::Worker(_)) && w.readable();
        !must_run && !must_read
    })
}

/// A tick passes for every connection: the held ones age, and the
/// server's clock moves on (kept at 0: expiries move back).
pub fn age(s: &mut State) {
    for client in &mut s.clients {
        let workers = client.worker.iter_mut().filter_map(|g| g.wire.as_mut());
        for w in client
            .trailing
            .iter_mut()
            .chain(client.wire.iter_mut())
            .chain(workers)
        {
            w.aged |= w.held;
        }
    }
    s.redis.advance(TICK_MS);
    s.redis.now = 0;
    for entry in s.redis.keys.values_mut() {
        if let Some(at) = &mut entry.expires_at {
            *at -= TICK_MS;
        }
    }
}
