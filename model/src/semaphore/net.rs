//! Connections: the scripts they carry run on the server in order
//! (`server/pool.rs`, `run_once`: one request on one connection at a
//! time; `late.rs`: a timed-out attempt's connection kept open so that an
//! undo written behind it runs after it), and the faults of the proxy.

use super::state::{Job, State, Wire};
use super::Config;
use crate::call::{Call, Publish};
use crate::client::config::TICK_MS;
use crate::names::{Name, Request};
use crate::reply::Reply;
use crate::scripts::{self, Env};

/// The semaphore's name.
pub const NAME: Name = Name(0);

/// Where a connection is, within a client.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Loc {
    /// The one its thread waits on.
    Own,
    /// A late attempt's, kept by the thread's acquire call.
    Late(u8),
    /// One nobody reads any more.
    Trailing(u8),
    /// A worker give-back's attempt.
    Worker(u8),
}

/// Reachability events (bits of [`State::events`]).
pub mod event {
    /// A retry (or a late attempt) found its call's latch `taken` and
    /// replayed.
    pub const REPLAYED: u64 = 1;
    /// A late attempt found its call ended or passed, and took nothing.
    pub const LATE_TOOK_NOTHING: u64 = 2;
    /// A give-back written behind a late attempt gave a permit back.
    pub const BEHIND_GAVE_BACK: u64 = 4;
    /// A give-back the worker carried on gave a permit back.
    pub const WORKER_GAVE_BACK: u64 = 8;
    /// A give-back on a connection of its own gave a permit back.
    pub const OWN_GAVE_BACK: u64 = 16;
    /// A release's retry replayed its latch.
    pub const RELEASE_REPLAYED: u64 = 32;
    /// The names, in bit order.
    pub const NAMES: [&str; 6] = [
        "a retry replayed a taken latch",
        "a late attempt took nothing",
        "a give-back behind a late attempt gave back",
        "a give-back carried on by the worker gave back",
        "a give-back on its own connection gave back",
        "a release's retry replayed",
    ];
}

/// `semaphore_acquire.lua` for one permit: attempt `attempt` of the call
/// latched at `latch`.
pub fn acquire(cfg: &Config, latch: u16, attempt: u8) -> Call {
    Call::SemaphoreAcquire {
        name: NAME,
        permits: 1,
        latch: Request(latch),
        latch_ttl: i64::from(cfg.acquire_latch_ticks()) * TICK_MS,
        attempt: i64::from(attempt),
    }
}

/// `semaphore_give_back.lua` of one permit for the call latched at `latch`.
pub fn give_back(cfg: &Config, latch: u16) -> Call {
    Call::SemaphoreGiveBack {
        name: NAME,
        permits: 1,
        latch: Request(latch),
        latch_ttl: i64::from(cfg.acquire_latch_ticks()) * TICK_MS,
        publish: Publish::Classic,
    }
}

/// `semaphore_release.lua` of one permit under `latch`.
pub fn release(cfg: &Config, latch: u16) -> Call {
    Call::SemaphoreRelease {
        name: NAME,
        permits: 1,
        latch: Request(latch),
        latch_ttl: i64::from(cfg.release_latch_ticks()) * TICK_MS,
        publish: Publish::Classic,
    }
}

/// The connection at `loc` of client `c`.
pub fn wire_mut(s: &mut State, c: usize, loc: Loc) -> Option<&mut Wire> {
    let client = &mut s.clients[c];
    match loc {
        Loc::Own => client.wire.as_mut(),
        Loc::Late(i) => match &mut client.job {
            Job::Acquire(a) => a.late.get_mut(usize::from(i)),
            _ => None,
        },
        Loc::Trailing(i) => client.trailing.get_mut(usize::from(i)),
        Loc::Worker(i) => client
            .worker
            .get_mut(usize::from(i))
            .and_then(|g| g.wire.as_mut()),
    }
}

/// Every connection's location in `s`, with the connection.
pub fn wires(s: &State) -> Vec<(usize, Loc, &Wire)> {
    let mut out = Vec::new();
    for (c, client) in s.clients.iter().enumerate() {
        if let Some(w) = &client.wire {
            out.push((c, Loc::Own, w));
        }
        if let Job::Acquire(a) = &client.job {
            for (i, w) in a.late.iter().enumerate() {
                out.push((c, Loc::Late(i as u8), w));
            }
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

/// Runs the first request of the connection at `loc` on the server: its
/// reply kept for its reader.
pub fn run(s: &mut State, c: usize, loc: Loc) -> Option<()> {
    let wire = wire_mut(s, c, loc)?;
    if wire.cut || wire.reqs.is_empty() {
        return None;
    }
    let call = wire.reqs.remove(0);
    let outcome = scripts::run(&mut s.redis, &call, Env::default());
    let Reply::Int(n) = outcome.reply else {
        panic!("semaphore script error: {:?}", outcome.reply);
    };
    let wire = wire_mut(s, c, loc)?;
    if wire.awaited && wire.answer.is_none() {
        wire.answer = Some(n);
    }
    match (call, outcome.branch) {
        (Call::SemaphoreRelease { latch, .. }, "released") => {
            s.failed_releases.retain(|&id| id != latch.0);
            for client in &mut s.clients {
                if let Job::Release(r) = &mut client.job {
                    if r.latch == latch.0 {
                        r.ran = true;
                    }
                }
            }
        }
        (Call::SemaphoreRelease { .. }, "replay") => s.events |= event::RELEASE_REPLAYED,
        (_, "replay-taken") => s.events |= event::REPLAYED,
        (_, "late") => s.events |= event::LATE_TOOK_NOTHING,
        (_, "given-back") => {
            s.events |= match loc {
                Loc::Worker(_) => event::WORKER_GAVE_BACK,
                Loc::Own => event::OWN_GAVE_BACK,
                _ => event::BEHIND_GAVE_BACK,
            }
        }
        _ => {}
    }
    Some(())
}

/// A fault: the connection at `loc` cut (its requests lost if not run, its
/// reply if they ran), or its reply held back past the response timeout
/// (its request still runs, within the next tick).
pub fn fault(s: &mut State, c: usize, loc: Loc, hold: bool) -> Option<()> {
    if s.faults_left == 0 {
        return None;
    }
    let wire = wire_mut(s, c, loc)?;
    let pending = !wire.reqs.is_empty() || (wire.awaited && wire.answer.is_some());
    if wire.cut || !pending || (hold && (wire.held || !wire.awaited)) {
        return None;
    }
    if hold {
        wire.held = true;
    } else {
        wire.cut = true;
        wire.reqs.clear();
        wire.answer = None;
    }
    s.faults_left -= 1;
    Some(())
}

/// Whether the tick may pass for the connections: every request not held
/// back ran, every held one that aged ran, every reply a reader may read
/// was read.
pub fn settled_for_tick(s: &State) -> bool {
    wires(s).iter().all(|&(_, loc, w)| {
        let must_run = !w.reqs.is_empty() && !w.cut && (!w.held || w.aged);
        let must_read = matches!(loc, Loc::Own | Loc::Worker(_)) && w.readable();
        !must_run && !must_read
    })
}

/// A tick passes for every connection left: the held ones age, and the
/// server's clock moves on (kept at 0: expiries move back).
pub fn age(s: &mut State) {
    for client in &mut s.clients {
        let mut all: Vec<&mut Wire> = client.trailing.iter_mut().collect();
        all.extend(client.wire.iter_mut());
        all.extend(client.worker.iter_mut().filter_map(|g| g.wire.as_mut()));
        if let Job::Acquire(a) = &mut client.job {
            all.extend(a.late.iter_mut());
        }
        for w in all {
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
