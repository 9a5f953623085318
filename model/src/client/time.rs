//! Time: a tick passes only once every thread and worker waits for
//! something outside itself and every request not held back has run and
//! been read (local work and a prompt round trip take less than a tick).
//! A tick expires keys, times out every reply still awaited (each request
//! waits one response timeout), counts down leases, parks, latches and
//! keep times, and runs the watchdog's renewal of every watched hold of a
//! client that can reach the server.

use super::config::{Config, Kind, TICK_MS};
use super::holds;
use super::job::{CallAt, Job, RelAt, Send, Settle, Wake};
use super::requests::{field, name};
use super::state::{Entry, State, Wire};
use crate::call::{Call, Renewal};
use crate::keyspace::Entry as KeyEntry;
use crate::reply::Reply;
use crate::scripts::{self, Env};

/// Whether `wire`'s replies may be read (a held-back reply comes only
/// after the tick).
pub fn readable(wire: &Wire) -> bool {
    !wire.replies.is_empty() && wire.visible()
}

fn ready(s: &State, send: &Send) -> bool {
    let wire = s.wire(send.wire);
    send.expired || wire.cut || readable(wire)
}

fn settle_ready(cfg: &Config, s: &State, c: u8, lane: u8, st: &Settle, worker: bool) -> bool {
    if st.expired {
        return true;
    }
    let entries = &s.thread(c, lane).lane.entries;
    let head = entries.first();
    // The head undo's copy out (`undo.rs`), or a release's attempt.
    let copy_out =
        |out: &Send| matches!(head, Some(Entry::Undo { wire, .. }) if *wire == Some(out.wire));
    if let Some(out) = st.out.as_ref().filter(|o| !copy_out(o)) {
        return ready(s, out);
    }
    match head {
        Some(undo) => super::undo::ready(cfg, s, undo, worker, entries.len() > 1),
        None => true,
    }
}

/// Whether thread `(c, t)` can move now.
pub fn runnable(cfg: &Config, s: &State, c: u8, t: u8) -> bool {
    let thread = s.thread(c, t);
    // The field, lane and renewal record it acts for.
    let h = cfg.holder(c, t);
    let lane = &s.thread(c, h).lane;
    match &thread.job {
        Job::Idle | Job::Dead => false,
        Job::Acquire(call) => match &call.at {
            CallAt::Step | CallAt::Join => true,
            CallAt::StepTurn { expired } => *expired || super::acquire::step_may_take(lane, t),
            CallAt::StepSettle(st)
            | CallAt::FinishSettle(st)
            | CallAt::Unsynced { settle: st, .. } => settle_ready(cfg, s, c, h, st, false),
            CallAt::Sent(send, _) | CallAt::FinishLook(send) => ready(s, send),
            CallAt::Orphans { send, .. } | CallAt::FinishGiveBack { send, .. } => {
                ready(s, &send.send)
            }
            CallAt::Parked(p) => p.woke.is_some(),
            CallAt::FinishTurn => super::acquire::step_may_take(lane, t),
        },
        Job::Release(rel) => match &rel.at {
            RelAt::Turn => rel.left == 0 || super::release::release_may_take(lane),
            RelAt::Settle(st) => settle_ready(cfg, s, c, h, st, false),
            RelAt::Sent { send, .. } | RelAt::GiveBack { send, .. } => ready(s, &send.send),
        },
    }
}

/// Whether the worker of `c` can move now.
pub fn worker_runnable(cfg: &Config, s: &State, c: u8) -> bool {
    match &s.clients[usize::from(c)].worker.at {
        Some((lane, st)) => settle_ready(cfg, s, c, *lane, st, true),
        None => false,
    }
}

/// Whether time may pass now.
pub fn can_tick(cfg: &Config, s: &State) -> bool {
    let prompt = |w: &Wire| !w.cut && !w.silent && !w.requests.is_empty() && (!w.held || w.aged);
    if s.wires.iter().any(prompt) {
        return false;
    }
    s.clients.iter().enumerate().all(|(c, client)| {
        let c = c as u8;
        !client.up
            || (client.inbox == 0 || client.partitioned)
                && !worker_runnable(cfg, s, c)
                && (0..client.threads.len() as u8).all(|t| !runnable(cfg, s, c, t))
    })
}

/// One tick passes.
pub fn tick(cfg: &Config, s: &mut State) {
    s.redis.advance(TICK_MS);
    rebase(s);
    for wire in &mut s.wires {
        if wire.held {
            wire.aged = true;
        }
    }
    for c in 0..s.clients.len() as u8 {
        if !s.clients[usize::from(c)].up {
            continue;
        }
        for t in 0..s.clients[usize::from(c)].threads.len() as u8 {
            renew(cfg, s, c, t);
            expire_job(s, c, t);
            for entry in &mut s.thread_mut(c, t).lane.entries {
                match entry {
                    Entry::Undo { keep, .. } => *keep = keep.saturating_sub(1),
                    Entry::Release(p) => {
                        p.alive = p.alive.map(|a| a.saturating_sub(1));
                        p.certain = p.certain.saturating_sub(1);
                    }
                    Entry::Shared { .. } => {}
                }
            }
        }
        if let Some((_, st)) = &mut s.clients[usize::from(c)].worker.at {
            expire(st);
        }
        let client = &mut s.clients[usize::from(c)];
        for last in &mut client.last_take {
            *last = last.saturating_sub(1);
        }
        super::pubsub::linger_over(s, c);
    }
    super::properties::count_starving(cfg, s);
    // Replication lags less than a tick (`replica.rs`).
    super::replica::replicate(s);
}

/// Keys' expiries relative to now again (the keyspace's clock stays 0).
fn rebase(s: &mut State) {
    let now = s.redis.now;
    s.redis.now = 0;
    for KeyEntry { expires_at, .. } in s.redis.keys.values_mut() {
        if let Some(at) = expires_at {
            *at -= now;
        }
    }
}

/// The watchdog's pass for thread `(c, t)`'s hold, or its lease running
/// down (`watchdog.rs`, `Renewer::pass`).
fn renew(cfg: &Config, s: &mut State, c: u8, t: u8) {
    let Some(gen) = s.thread(c, t).gen else {
        return;
    };
    if holds::leased(cfg, c, t) || s.clients[usize::from(c)].partitioned {
        let left = gen.left.saturating_sub(1);
        if let Some(g) = &mut s.thread_mut(c, t).gen {
            g.left = left;
            g.may_last = g.may_last.saturating_sub(1);
        }
        if left == 0 && !holds::leased(cfg, c, t) {
            // No renewal confirmed within the timeout: lost. The key, set
            // no earlier than the client counts from, may outlive this
            // moment a little, with no guard.
            holds::mark_lost(s, c, t);
            holds::excuse_leak(s, c, t);
        }
        return;
    }
    let call = Call::Renew {
        ttl: i64::from(cfg.watchdog) * TICK_MS,
        locks: vec![Renewal {
            name: name(cfg, c, t),
            // `Read::renew_kind`: a read lock's holds' keys too.
            read: cfg.kind == Kind::Read,
            field: field(cfg.kind, c, t),
        }],
    };
    let reply = scripts::run(&mut s.redis, &call, Env::default()).reply;
    let renewed = matches!(&reply, Reply::Array(flags) if flags.first() == Some(&Reply::Int(1)));
    if renewed {
        if let Some(g) = &mut s.thread_mut(c, t).gen {
            g.left = cfg.watchdog;
        }
    } else {
        holds::mark_lost(s, c, t);
    }
}

fn expire(st: &mut Settle) {
    st.left = 0;
    st.expired = true;
    if let Some(out) = &mut st.out {
        out.expired = true;
    }
}

/// Times out what thread `(c, t)` waits for, and counts down its timers.
fn expire_job(s: &mut State, c: u8, t: u8) {
    match &mut s.thread_mut(c, t).job {
        Job::Acquire(call) => {
            call.wait_left = call.wait_left.map(|w| w.saturating_sub(1));
            match &mut call.at {
                CallAt::StepTurn { expired } => *expired = true,
                CallAt::StepSettle(st)
                | CallAt::FinishSettle(st)
                | CallAt::Unsynced { settle: st, .. } => expire(st),
                CallAt::Sent(send, sent) => {
                    send.expired = true;
                    sent.started_ago = sent.started_ago.saturating_add(1).min(9);
                }
                CallAt::FinishLook(send) => send.expired = true,
                CallAt::Orphans { send, .. } | CallAt::FinishGiveBack { send, .. } => {
                    send.send.expired = true;
                    send.since_first = send.since_first.saturating_add(1).min(9);
                }
                CallAt::Parked(p) if !p.reserved && p.woke.is_none() => {
                    p.ticks -= 1;
                    if p.ticks == 0 {
                        p.woke = Some(Wake::TimedOut);
                    }
                }
                _ => {}
            }
        }
        Job::Release(rel) => {
            rel.left = rel.left.saturating_sub(1);
            let passed = rel.left == 0;
            match &mut rel.at {
                RelAt::Settle(st) => {
                    st.left = rel.left;
                    st.expired = passed;
                    if let Some(out) = &mut st.out {
                        out.expired = true;
                    }
                }
                RelAt::Sent { send, .. } | RelAt::GiveBack { send, .. } => {
                    send.send.expired = true;
                    send.since_first = send.since_first.saturating_add(1).min(9);
                }
                RelAt::Turn => {}
            }
        }
        Job::Idle | Job::Dead => {}
    }
}
