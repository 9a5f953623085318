//! What must hold in every reachable state (issue 40, part 2), and the
//! ghost counter the waiters' rule reads.

use super::config::{Config, Kind, TICK_MS};
use super::job::{CallAt, Job};
use super::requests::{field, name};
use super::state::State;
use super::wait::is_waiting;
use super::ClientModel;
use crate::keyspace::HashValue;
use crate::names::Key;
use crate::search::Property;

/// How many ticks a waiter may stay parked on a free lock with no
/// message on its way (one tick of slack for the clock's grain).
pub const STARVING_BOUND: u8 = 1;

/// Every property of the client model.
pub fn all() -> Vec<Property<ClientModel>> {
    vec![
        Property {
            name: "mutual exclusion",
            holds: |m, s| {
                !m.cfg.exclusive() || (0..m.cfg.locks()).all(|lock| holders(&m.cfg, s, lock) <= 1)
            },
        },
        Property {
            name: "no unlock says Ok for a hold another holder entered",
            holds: |_, s| !s.broken.ok_after_intrusion,
        },
        Property {
            name: "fencing tokens only grow",
            holds: |_, s| !s.broken.token_regressed,
        },
        Property {
            name: "every lock key has a bounded TTL",
            holds: |m, s| bounded_ttls(&m.cfg, s),
        },
        Property {
            name: "at rest, Redis counts the holds the guards stand for",
            holds: |m, s| !at_rest(s) || counts_match(&m.cfg, s),
        },
        Property {
            name: "no waiter parked on a free lock with nothing on its way",
            holds: |_, s| {
                s.clients
                    .iter()
                    .flat_map(|c| &c.threads)
                    .all(|t| t.ghost.starving <= STARVING_BOUND)
            },
        },
    ]
}

/// Threads that hold `lock` unexpired, as their client believes, and
/// whose holds no fault wiped.
pub fn holders(cfg: &Config, s: &State, lock: u8) -> usize {
    s.clients
        .iter()
        .enumerate()
        .filter(|(_, c)| c.up)
        .flat_map(|(c, client)| {
            client
                .threads
                .iter()
                .enumerate()
                .filter(move |(t, _)| cfg.lock(c as u8, *t as u8) == lock)
                .map(|(_, t)| t)
        })
        .filter(|t| t.gen.is_some_and(|g| g.count > 0 && g.left > 0))
        .filter(|t| !t.ghost.wiped && !lost_excused(cfg, t))
        .count()
}

/// A failover lost the thread's holds, and without `sync_replicas`: the
/// documented limit (an acquire is confirmed once the master has it;
/// `docs/reliability.md`, failover safety). With `sync_replicas` nothing
/// is excused: every acquire told `Ok` was on the replica.
pub fn lost_excused(cfg: &Config, t: &super::state::Thread) -> bool {
    t.ghost.failover_lost && !cfg.sync_replicas
}

fn bounded_ttls(cfg: &Config, s: &State) -> bool {
    let lock = i64::from(cfg.max_ttl_ticks()) * TICK_MS;
    let latch = i64::from(cfg.latch_ticks()) * TICK_MS;
    s.redis.keys.iter().all(|(key, entry)| {
        let bound = match key {
            Key::Latch(..) => latch,
            // The fencing counter must outlive every hold: no TTL.
            Key::Token(_) => return true,
            _ => lock,
        };
        entry.expires_at.is_some_and(|at| at > 0 && at <= bound)
    })
}

/// Nothing on its way: no connection with anything on it, every thread
/// idle, no lane keeps anything, no worker round, no message.
pub fn at_rest(s: &State) -> bool {
    s.wires.is_empty()
        && s.clients.iter().all(|c| {
            c.inbox == 0
                && c.worker.at.is_none()
                && c.threads.iter().all(|t| {
                    matches!(t.job, Job::Idle | Job::Dead)
                        && t.lane.entries.is_empty()
                        && t.lane.taken.is_none()
                })
        })
}

/// Holds Redis counts under thread `(c, t)`'s field, in its lock's hash.
pub fn in_redis(cfg: &Config, s: &State, c: u8, t: u8) -> u8 {
    match s
        .redis
        .hget(Key::Name(name(cfg, c, t)), field(cfg.kind, c, t))
    {
        Ok(Some(HashValue::Int(n))) => n.clamp(0, 255) as u8,
        _ => 0,
    }
}

/// Holds Redis counts under thread `(c, t)`'s field that are not over: of
/// a read lock, those whose hold key is still there. A read hold whose
/// key expired is over, though the field counts it until a release of the
/// holder's drops it (Redisson's layout; the releases drop a gone key
/// first, `read_release.lua`): it keeps no writer out once the other
/// holds end. At rest a field with no generation may count such holds
/// only (a generation ended as expired before the thread's next acquire,
/// `RenewalMap::before_acquire`); a live generation's holds are judged by
/// the field's count, as the model keeps one lease end per generation.
fn live_in_redis(cfg: &Config, s: &State, c: u8, t: u8) -> u8 {
    let counted = in_redis(cfg, s, c, t);
    if cfg.kind != Kind::Read {
        return counted;
    }
    let reader = field(cfg.kind, c, t);
    (1..=u16::from(counted))
        .filter(|&k| s.redis.exists(Key::ReadHold(name(cfg, c, t), reader, k)))
        .count() as u8
}

fn counts_match(cfg: &Config, s: &State) -> bool {
    s.clients
        .iter()
        .enumerate()
        .filter(|(_, c)| c.up)
        .all(|(c, client)| {
            client.threads.iter().enumerate().all(|(t, thread)| {
                let redis = in_redis(cfg, s, c as u8, t as u8);
                match thread.gen {
                    // Expired as the client counts, or wiped: Redis may have
                    // dropped it already, or keep it a little longer.
                    Some(g) if g.left == 0 || thread.ghost.wiped => true,
                    // Lost in a failover without `sync_replicas`.
                    Some(_) if lost_excused(cfg, thread) => true,
                    // A late hold whose undo a cut lost is one more.
                    Some(g) if thread.ghost.leak_excused => redis >= g.count,
                    Some(g) => redis == g.count,
                    None => {
                        redis == 0
                            || thread.ghost.leak_excused
                            || live_in_redis(cfg, s, c as u8, t as u8) == 0
                    }
                }
            })
        })
}

/// After a tick: each parked waiter's ticks on a free lock (its own) with
/// no message on its way to its client and nobody about to take that
/// lock.
pub fn count_starving(cfg: &Config, s: &mut State) {
    let free = |lock: u8| !s.redis.exists(Key::Name(crate::names::Name(lock)));
    let trying = |lock: u8| {
        s.clients
            .iter()
            .enumerate()
            .filter(|(_, c)| c.up)
            .any(|(c, client)| {
                client.threads.iter().enumerate().any(|(t, th)| {
                    cfg.lock(c as u8, t as u8) == lock
                        && matches!(&th.job, Job::Acquire(call) if !matches!(call.at,
                        CallAt::Parked(p) if !p.reserved && p.woke.is_none())
                        && !matches!(call.at, CallAt::FinishTurn | CallAt::FinishSettle(_)
                            | CallAt::FinishLook(_) | CallAt::FinishGiveBack { .. }))
                })
            })
    };
    let starvable: Vec<bool> = (0..2).map(|lock| free(lock) && !trying(lock)).collect();
    for c in 0..s.clients.len() as u8 {
        let client = &s.clients[usize::from(c)];
        let quiet = client.up && !client.partitioned && client.inbox == 0;
        for t in 0..client.threads.len() as u8 {
            let lock = usize::from(cfg.lock(c, t));
            let starving = quiet && starvable[lock] && is_waiting(s, c, t);
            let ghost = &mut s.thread_mut(c, t).ghost;
            ghost.starving = if starving {
                ghost.starving.saturating_add(1).min(STARVING_BOUND + 1)
            } else {
                0
            };
        }
    }
}

/// After every step: an excuse for a leaked hold ends once Redis has
/// nothing under the thread's field and every thread acting for it is
/// idle (a release of its own that freed the field still reads its reply
/// under the excuse).
pub fn clear_excuses(cfg: &Config, s: &mut State) {
    for c in 0..s.clients.len() as u8 {
        let n = s.clients[usize::from(c)].threads.len() as u8;
        for t in 0..n {
            let idle = (0..n)
                .filter(|&o| cfg.holder(c, o) == t)
                .all(|o| matches!(s.thread(c, o).job, Job::Idle));
            if s.thread(c, t).ghost.leak_excused && idle && in_redis(cfg, s, c, t) == 0 {
                s.thread_mut(c, t).ghost.leak_excused = false;
            }
        }
    }
}
