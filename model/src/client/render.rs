//! A counterexample's steps as a reader wants them: the Redis command a
//! server step runs and what it replied, and what each client step did.

use super::config::Config;
use super::faults::FaultAction;
use super::job::{CallAt, Job, RelAt};
use super::model::{Action, Begin};
use super::pubsub::Heard;
use super::server::serve;
use super::state::{Request, State, Wire};
use crate::call::{Attempt, Call};
use crate::names::{Field, Name};

fn who(field: Field) -> String {
    match field {
        Field::Reader(h) | Field::Writer(h) => format!("c{}.t{}", h.client, h.thread),
        Field::Mode => "mode".into(),
    }
}

/// The second lock on the channel named (`{x}`); the first (`x`), the
/// only one of most configurations, left unnamed.
fn on(name: Name) -> &'static str {
    if name.0 == 0 {
        ""
    } else {
        " on {x}"
    }
}

/// A request as one line.
pub fn request(r: &Request) -> String {
    match r {
        Request::Look(t) => format!("HGET lock t{t}"),
        Request::Wait { synced, .. } => {
            format!("WAIT 1 (the replica has the write: {synced})")
        }
        Request::Script(Call::Acquire {
            name,
            field,
            lease,
            reentry_only,
        })
        | Request::Script(Call::FencedAcquire {
            name,
            field,
            lease,
            reentry_only,
        }) => {
            let fenced = if matches!(r, Request::Script(Call::FencedAcquire { .. })) {
                "fenced_"
            } else {
                ""
            };
            let flag = if *reentry_only { " re-entry-only" } else { "" };
            format!(
                "{fenced}acquire.lua{} {} lease {lease} ms{flag}",
                on(*name),
                who(*field)
            )
        }
        Request::Script(Call::Release {
            name,
            field,
            latch,
            attempt,
            successor,
            ..
        }) => {
            let word = match attempt {
                Attempt::First => "first".to_string(),
                Attempt::Retry => "retry".to_string(),
                Attempt::Above(n) => format!("above:{n}"),
            };
            let next = successor.map_or(String::new(), |s| {
                format!(" hand-over to {} lease {} ms", who(s.field), s.lease)
            });
            format!(
                "release.lua{} {} latch #{} {word}{next}",
                on(*name),
                who(*field),
                latch.0
            )
        }
        Request::Script(other) => other_kind(other),
    }
}

/// The fair, write and read kinds' acquires and releases.
fn other_kind(call: &Call) -> String {
    let word = |attempt: &Attempt| match attempt {
        Attempt::First => "first".to_string(),
        Attempt::Retry => "retry".to_string(),
        Attempt::Above(n) => format!("above:{n}"),
    };
    match call {
        Call::FairAcquire {
            field,
            lease,
            reentry_only,
            ..
        } => acquire_line("fair_acquire.lua", who(*field), *lease, *reentry_only),
        Call::WriteAcquire {
            holder,
            lease,
            reentry_only,
            ..
        } => acquire_line(
            "write_acquire.lua",
            holder_name(*holder),
            *lease,
            *reentry_only,
        ),
        Call::ReadAcquire {
            holder,
            lease,
            reentry_only,
            ..
        } => acquire_line(
            "read_acquire.lua",
            holder_name(*holder),
            *lease,
            *reentry_only,
        ),
        Call::FairRelease {
            field,
            latch,
            attempt,
            ..
        } => format!(
            "fair_release.lua {} latch #{} {}",
            who(*field),
            latch.0,
            word(attempt)
        ),
        Call::WriteRelease {
            holder,
            latch,
            attempt,
            ..
        } => format!(
            "write_release.lua {} latch #{} {}",
            holder_name(*holder),
            latch.0,
            word(attempt)
        ),
        Call::ReadRelease {
            holder,
            latch,
            attempt,
            ..
        } => format!(
            "read_release.lua {} latch #{} {}",
            holder_name(*holder),
            latch.0,
            word(attempt)
        ),
        other => format!("{other:?}"),
    }
}

fn holder_name(h: crate::names::Holder) -> String {
    format!("c{}.t{}", h.client, h.thread)
}

fn acquire_line(file: &str, who: String, lease: i64, reentry_only: bool) -> String {
    let flag = if reentry_only { " re-entry-only" } else { "" };
    format!("{file} {who} lease {lease} ms{flag}")
}

fn wire(w: &Wire) -> String {
    let requests: Vec<String> = w.requests.iter().map(request).collect();
    format!("c{}'s connection [{}]", w.client, requests.join(" then "))
}

fn job(j: &Job) -> String {
    match j {
        Job::Idle => "idle".into(),
        Job::Dead => "dead".into(),
        Job::Acquire(call) => {
            let at = match &call.at {
                CallAt::Step => "step".to_string(),
                CallAt::StepTurn { .. } => "waits for its lane's turn".into(),
                CallAt::StepSettle(_) => "settles its lane".into(),
                CallAt::Sent(..) => "waits for the acquire's reply".into(),
                CallAt::Orphans { .. } => "gives back holds counted twice".into(),
                CallAt::Unsynced { .. } => "undoes an acquire the replica lacks".into(),
                CallAt::Join => "joins the waiters".into(),
                CallAt::Parked(p) if p.reserved => "reserved for a hand-over".into(),
                CallAt::Parked(p) => match p.woke {
                    Some(w) => format!("woken ({w:?})"),
                    None => format!("parked ({} ticks)", p.ticks),
                },
                CallAt::FinishTurn => "ends: waits for the turn".into(),
                CallAt::FinishSettle(_) => "ends: settles its lane".into(),
                CallAt::FinishLook(_) => "ends: looks at its count in Redis".into(),
                CallAt::FinishGiveBack { .. } => "ends: gives back holds beyond the guards".into(),
            };
            let late = if call.late.is_empty() {
                String::new()
            } else {
                format!(", {} late", call.late.len())
            };
            let kind = if call.waits { "lock" } else { "try_lock" };
            format!("{kind}: {at}{late}")
        }
        Job::Release(rel) => {
            let at = match &rel.at {
                RelAt::Turn => "waits for its lane's turn",
                RelAt::Settle(_) => "settles its lane",
                RelAt::Sent { .. } => "waits for the release's reply",
                RelAt::GiveBack { .. } => "gives back holds no guard stands for",
            };
            format!("{:?} #{}: {at}", rel.mode, rel.id)
        }
    }
}

fn thread_line(cfg: &Config, s: &State, c: u8, t: u8) -> String {
    let th = s.thread(c, t);
    // The holds and lane of the field it acts for.
    let holder = s.thread(c, cfg.holder(c, t));
    let holds = holder.gen.map_or("no holds".to_string(), |g| {
        if g.may_last > g.left {
            format!(
                "{} holds, {} ticks left ({} in Redis at most)",
                g.count, g.left, g.may_last
            )
        } else {
            format!("{} holds, {} ticks left", g.count, g.left)
        }
    });
    format!("{} ({holds}; lane {:?})", job(&th.job), holder.lane.entries)
}

/// One step of a trace.
pub fn describe(cfg: &Config, before: &State, action: &Action, after: &State) -> String {
    match *action {
        Action::Begin { c, t, what } => {
            let what = match what {
                Begin::Try => "try_lock".to_string(),
                Begin::Wait => "lock (waiting)".to_string(),
                Begin::Release(mode) => format!("{mode:?} of one hold"),
            };
            let on = match (cfg.locks(), cfg.lock(c, t)) {
                (1, _) => "",
                (_, 0) => " of x",
                _ => " of {x}",
            };
            format!(
                "c{c}.t{t} begins {what}{on} -> {}",
                thread_line(cfg, after, c, t)
            )
        }
        Action::Go { c, t } => format!("c{c}.t{t} -> {}", thread_line(cfg, after, c, t)),
        Action::WorkerStart { c, lane } => {
            format!(
                "c{c}'s worker settles lane t{lane}: {:?}",
                after.clients[usize::from(c)].worker.at
            )
        }
        Action::Worker { c } => format!(
            "c{c}'s worker: {:?}",
            after.clients[usize::from(c)].worker.at
        ),
        Action::Serve(w) => {
            let mut s = before.clone();
            serve(cfg, &mut s, w);
            let reply = s.wires[usize::from(w)].replies.last().copied();
            format!(
                "REDIS runs {} for c{} -> {reply:?}",
                request(&before.wires[usize::from(w)].requests[0]),
                before.wires[usize::from(w)].client
            )
        }
        Action::Hear(c, to) => {
            let what: Vec<String> = to
                .iter()
                .enumerate()
                .take(usize::from(cfg.locks()))
                .map(|(lock, heard)| {
                    let name = if lock == 0 { "x" } else { "{x}" };
                    match heard {
                        Heard::To(t) => format!("wakes c{c}.t{t}"),
                        Heard::Kept if cfg.locks() == 1 => "no waiter parked".to_string(),
                        Heard::Kept => format!("no waiter of {name} parked"),
                        Heard::Missed => format!("nothing for {name}"),
                    }
                })
                .collect();
            format!(
                "c{c}'s subscriber hears a release message: {}",
                what.join("; ")
            )
        }
        Action::Tick => {
            let keys: Vec<String> = after
                .redis
                .keys
                .iter()
                .map(|(k, e)| format!("{k:?} ttl {:?}", e.expires_at))
                .collect();
            format!("--- a tick passes --- (keys: {})", keys.join(", "))
        }
        Action::Replicate => format!(
            "replication: the replica catches up ({} keys)",
            after.redis.keys.len()
        ),
        Action::Fault(f) => match f {
            FaultAction::Cut(w) => format!("FAULT: {} cut", wire(&before.wires[usize::from(w)])),
            FaultAction::HoldBack(w) => {
                format!("FAULT: {} held back", wire(&before.wires[usize::from(w)]))
            }
            other => format!("FAULT: {other:?}"),
        },
    }
}
