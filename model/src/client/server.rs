//! The server's side of a connection: running its next request (one
//! atomic script on the keyspace), what the reply tells the client, who
//! hears a publish, and how a client reads a reply.

use super::config::{Config, TICK_MS};
use super::events;
use super::job::{CallAt, Job};
use super::requests::owner;
use super::state::{Answer, Request, State, WireId};
use crate::call::Call;
use crate::keyspace::HashValue;
use crate::names::Key;
use crate::reply::Reply;
use crate::scripts::{self, Env};

/// What a reader found on its connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Read {
    /// The next reply.
    Reply(Answer),
    /// The connection failed: no reply will come.
    Failed,
    /// The response timeout passed first.
    TimedOut,
    /// Nothing yet.
    Waiting,
}

/// Reads the next reply on `w`, unless the reader's time is up.
pub fn take_reply(s: &mut State, w: WireId, expired: bool) -> Read {
    let wire = &mut s.wires[usize::from(w)];
    if expired {
        Read::TimedOut
    } else if super::time::readable(wire) {
        Read::Reply(wire.replies.remove(0))
    } else if wire.cut {
        Read::Failed
    } else {
        Read::Waiting
    }
}

/// Whether `w`'s next request may run now.
pub fn may_serve(s: &State, w: WireId) -> bool {
    let wire = s.wire(w);
    !wire.requests.is_empty() && !wire.cut && !wire.silent
}

/// Runs `w`'s next request.
pub fn serve(cfg: &Config, s: &mut State, w: WireId) {
    let request = s.wires[usize::from(w)].requests.remove(0);
    let answer = match request {
        Request::Look(t) => {
            let c = s.wire(w).client;
            let name = super::requests::name(cfg, c, t);
            let count = s
                .redis
                .hget(Key::Name(name), super::requests::field(cfg.kind, c, t));
            Answer::Count(match count {
                Ok(Some(HashValue::Int(n))) => n,
                _ => 0,
            })
        }
        Request::Script(call) => {
            let answer = run(cfg, s, w, &call);
            if cfg.sync_replicas && matches!(answer, Answer::Took { .. }) {
                // The acquire wrote: its `WAIT` follows on the connection,
                // and the reply is read with its count (`Pool::run_write`).
                let wait = Request::Wait {
                    answer,
                    synced: false,
                };
                s.wires[usize::from(w)].requests.insert(0, wait);
                return;
            }
            answer
        }
        Request::Wait { answer, synced } => super::replica::waited(cfg, answer, synced),
    };
    let wire = &mut s.wires[usize::from(w)];
    wire.replies.push(answer);
    if wire.requests.is_empty() {
        wire.aged = false;
    }
}

fn run(cfg: &Config, s: &mut State, w: WireId, call: &Call) -> Answer {
    // The lock the script runs on (`x`, or `{x}` on the same channel).
    let name = call_name(call);
    let lock = Key::Name(name);
    let before = s.redis.hkeys(lock).unwrap_or_default();
    let pttl = s.redis.pttl(lock);
    let env = Env {
        mutation: cfg.script_mutation,
        ..Env::default()
    };
    let out = scripts::run(&mut s.redis, call, env);
    let after = s.redis.hkeys(lock).unwrap_or_default();
    // Another holder entered: every generation live in a book is intruded
    // (read only by what `unlock` reports).
    // (Readers share: another reader's entry intrudes on nothing.)
    let unlocks = cfg.exclusive()
        && cfg
            .release_modes
            .contains(&super::config::ReleaseMode::Unlock);
    for field in after.iter().filter(|f| unlocks && !before.contains(f)) {
        let Some((nc, nt)) = owner(*field) else {
            continue;
        };
        for (c, client) in s.clients.iter_mut().enumerate() {
            for (t, thread) in client.threads.iter_mut().enumerate() {
                // Only the holders of this lock: the other lock on the
                // channel is another hash.
                let here = cfg.lock(c as u8, t as u8) == name.0;
                if (c as u8, t as u8) != (nc, nt) && here && thread.gen.is_some() {
                    thread.ghost.intruded = true;
                }
            }
        }
    }
    match out.branch {
        "replay" | "replay-token" => s.events |= events::RAN_TWICE,
        "hand-over" | "hand-over-fenced" => {
            if let Call::Release {
                successor: Some(next),
                field,
                ..
            } = call
            {
                let waiting = s.clients.iter().enumerate().any(|(c, client)| {
                    Some(c as u8) != owner(*field).map(|o| o.0)
                        && client.threads.iter().enumerate().any(|(t, th)| {
                            cfg.lock(c as u8, t as u8) == name.0 && is_parked(&th.job)
                        })
                });
                if next.lease < pttl && waiting {
                    s.events |= events::SHORTER_HANDOVER;
                }
            }
        }
        _ => {}
    }
    let acquire = matches!(
        call,
        Call::Acquire { .. }
            | Call::FencedAcquire { .. }
            | Call::FairAcquire { .. }
            | Call::WriteAcquire { .. }
            | Call::ReadAcquire { .. }
    );
    if acquire && !awaited_by_call(s, w) {
        s.events |= events::LATE_ACQUIRE;
    }
    if !out.published.is_empty() {
        for client in &mut s.clients {
            if client.up && !client.partitioned && client.subscribed {
                client.inbox = (client.inbox + 1).min(2);
            }
        }
    }
    answer(call, &out.reply)
}

/// The lock name a script call runs on.
fn call_name(call: &Call) -> crate::names::Name {
    match call {
        Call::Acquire { name, .. }
        | Call::FencedAcquire { name, .. }
        | Call::FairAcquire { name, .. }
        | Call::WriteAcquire { name, .. }
        | Call::ReadAcquire { name, .. }
        | Call::Release { name, .. }
        | Call::FairRelease { name, .. }
        | Call::WriteRelease { name, .. }
        | Call::ReadRelease { name, .. } => *name,
        _ => unreachable!("the client model sends no {call:?}"),
    }
}

/// Whether a thread waits on the lock's channel now (parked, not
/// reserved).
pub fn is_parked(job: &Job) -> bool {
    matches!(job, Job::Acquire(call) if matches!(call.at, CallAt::Parked(p) if !p.reserved))
}

/// Whether a thread's call has joined the waiters (its client subscribed).
pub fn is_joined(job: &Job) -> bool {
    matches!(job, Job::Acquire(call) if call.joined)
}

/// Whether the acquire on `w` belongs to its thread's call under way.
fn awaited_by_call(s: &State, w: WireId) -> bool {
    let wire = s.wire(w);
    let c = wire.client;
    s.clients[usize::from(c)]
        .threads
        .iter()
        .any(|t| match &t.job {
            Job::Acquire(call) => {
                call.late.contains(&w) || matches!(call.at, CallAt::Sent(send, _) if send.wire == w)
            }
            _ => false,
        })
}

fn int(reply: &Reply) -> Option<i64> {
    match reply {
        Reply::Int(n) | Reply::Ttl(n) => Some(*n),
        _ => None,
    }
}

/// What the client makes of a reply (`kind/attempt.rs`, `kind/hash.rs`;
/// the fair, read and write releases' replies are a number or nil, as
/// `fair.rs` and `read_write.rs` read them).
fn answer(call: &Call, reply: &Reply) -> Answer {
    let items: Vec<Option<i64>> = match reply {
        Reply::Array(items) => items.iter().map(int).collect(),
        _ => Vec::new(),
    };
    match call {
        Call::Acquire { .. }
        | Call::FencedAcquire { .. }
        | Call::FairAcquire { .. }
        | Call::WriteAcquire { .. }
        | Call::ReadAcquire { .. } => match items[..] {
            [Some(1), Some(holds), ref rest @ ..] => Answer::Took {
                holds: holds as u8,
                token: rest.first().copied().flatten(),
            },
            [Some(0), Some(ttl)] => Answer::Busy {
                ticks: ((ttl.max(0) + TICK_MS - 1) / TICK_MS) as u8,
            },
            [Some(2), Some(0)] => Answer::HoldsGone,
            _ => unreachable!("an acquire replied {reply:?}"),
        },
        Call::Release { .. }
        | Call::FairRelease { .. }
        | Call::WriteRelease { .. }
        | Call::ReadRelease { .. } => match (reply, &items[..]) {
            (Reply::Nil, _) => Answer::Released {
                code: None,
                token: None,
            },
            (Reply::Int(n), _) => Answer::Released {
                code: Some(*n),
                token: None,
            },
            (_, [Some(2), Some(token)]) => Answer::Released {
                code: Some(2),
                token: Some(*token),
            },
            (_, [Some(code), _]) => Answer::Released {
                code: Some(*code),
                token: None,
            },
            _ => unreachable!("a release replied {reply:?}"),
        },
        _ => unreachable!("the client model sends no {call:?}"),
    }
}
