//! The master's replica and a failover to it (issue 40: "a failover to a
//! lagging replica, with and without `sync_replicas`").
//!
//! Replication is a transition that copies the master's keyspace as it is
//! (Redis streams the writes in order, so the replica is always some
//! earlier state of the master); it catches up at every tick at the
//! latest (lagging less than a response timeout), so that the writes a
//! failover loses are those of the tick under way. `WAIT` counts the
//! replica when it has every write made before it (`Request::Wait`).
//!
//! A failover (a fault, within the budget) promotes the replica: what the
//! master had not replicated is lost; every connection is cut, and the
//! clients' next connections reach the new master (the Sentinel switch,
//! `Pool::master_switched`, and `sentinel_watch.rs`), whose subscribers
//! reconnect and wake every waiter. The old master comes back empty as
//! the new master's replica (`tests/model/failover.rs`), and the budget
//! allows no second failover: the replica is then no longer kept, and a
//! `WAIT` counts it at once. Likewise once the budget is spent: a `WAIT`
//! that fails without a failover to follow is explored only while one may
//! still come.

use super::config::{Config, Fault};
use super::events;
use super::job::{CallAt, Job};
use super::properties::in_redis;
use super::pubsub;
use super::requests::name;
use super::state::{Answer, Entry, ReqId, Request, State};
use crate::names::{Key, Request as Latch};

/// Whether the initial state keeps a replica.
pub fn modelled(cfg: &Config) -> bool {
    cfg.allows(Fault::Failover) && cfg.fault_budget > 0
}

/// Whether replication has something to do: the replica lags the master,
/// or a `WAIT` still waits for it.
pub fn behind(s: &State) -> bool {
    let Some(replica) = &s.replica else {
        return false;
    };
    *replica != s.redis
        || s.wires.iter().any(|w| {
            w.requests
                .iter()
                .any(|r| matches!(r, Request::Wait { synced: false, .. }))
        })
}

/// Replication catches up: the replica gets the master's keyspace, and
/// every `WAIT` on its way is acknowledged.
pub fn replicate(s: &mut State) {
    if let Some(replica) = &mut s.replica {
        *replica = s.redis.clone();
    }
    for wire in &mut s.wires {
        for request in &mut wire.requests {
            if let Request::Wait { synced, .. } = request {
                *synced = true;
            }
        }
    }
}

/// After every step: once no failover may come, the replica is no longer
/// kept, and every `WAIT` counts it.
pub fn forget_unneeded(s: &mut State) {
    if s.faults_left == 0 {
        s.replica = None;
    }
    if s.replica.is_none() {
        replicate(s);
    }
}

/// What the client reads once the `WAIT` behind an acquire that took the
/// lock runs (`Server::synced`): the acquire's answer, or `NotSynced`
/// when the replica did not acknowledge it (read as acknowledged by the
/// mutation that ignores the count).
pub fn waited(cfg: &Config, answer: Answer, synced: bool) -> Answer {
    if synced || cfg.mutated(super::mutation::ClientMutation::WaitCountIgnored) {
        answer
    } else {
        Answer::NotSynced
    }
}

/// Whether a failover may be injected now.
pub fn may_fail_over(cfg: &Config, s: &State) -> bool {
    cfg.allows(Fault::Failover) && s.replica.is_some()
}

/// The master dies and its replica is promoted: the writes it lacks are
/// lost, every connection is cut, subscribers reconnect. A thread whose
/// unexpired holds the new master counts fewer of is marked
/// (`Ghost::failover_lost`: an acquire lost, excused without
/// `sync_replicas` only); one whose field the new master counts more of
/// than its guards (a release the failover undid) may leave that hold to
/// its TTL (`Ghost::leak_excused`: the documented limit in both modes, as
/// a release whose `WAIT` fails leaves it on the replica).
pub fn fail_over(cfg: &Config, s: &mut State) {
    let Some(promoted) = s.replica.take() else {
        return;
    };
    let before = counts(cfg, s);
    let lost_releases: Vec<u8> = before
        .iter()
        .map(|&(c, t, _)| {
            let lost = |id: &ReqId| {
                let latch = Key::Latch(name(cfg, c, t), Latch(*id));
                s.redis.exists(latch) && !promoted.exists(latch)
            };
            release_ids(cfg, s, c, t)
                .iter()
                .filter(|id| lost(id))
                .count() as u8
        })
        .collect();
    s.redis = promoted;
    let after = counts(cfg, s);
    super::faults::cut_all(s, |_, _| true);
    for c in 0..s.clients.len() as u8 {
        pubsub::wake_all(cfg, s, c);
    }
    for (((c, t, before), (_, _, after)), released) in
        before.into_iter().zip(after).zip(lost_releases)
    {
        let guards = s.thread(c, t).gen.map_or(0, |g| g.count);
        // Holds of a live generation lost (fewer than the master's and
        // the holds of its releases the failover undid: a re-entry lost
        // leaves the others, and a release on its way may then free the
        // field), or their TTL shortened (a re-entry's renewal lost).
        let fewer = after.0 < before.0 + released;
        let shorter = after.0 > 0 && after.1 < before.1;
        if (fewer || shorter) && s.thread(c, t).gen.is_some_and(|g| g.left > 0) {
            s.thread_mut(c, t).ghost.failover_lost = true;
            s.events |= events::FAILOVER_LOST;
        }
        if after.0 > guards {
            s.thread_mut(c, t).ghost.leak_excused = true;
        }
    }
}

/// The request ids of the releases of thread `(c, t)`'s field on their
/// way or on its lane.
fn release_ids(cfg: &Config, s: &State, c: u8, t: u8) -> Vec<ReqId> {
    let mut ids = Vec::new();
    let client = &s.clients[usize::from(c)];
    for (o, thread) in client.threads.iter().enumerate() {
        if cfg.holder(c, o as u8) != t {
            continue;
        }
        match &thread.job {
            Job::Release(rel) => ids.push(rel.id),
            Job::Acquire(call) => match &call.at {
                CallAt::Orphans { send, .. } | CallAt::FinishGiveBack { send, .. } => {
                    ids.push(send.id)
                }
                _ => {}
            },
            _ => {}
        }
    }
    for entry in &s.thread(c, t).lane.entries {
        match entry {
            Entry::Release(p) => ids.push(p.id),
            Entry::Undo { ids: undo, .. } => ids.extend(undo),
            Entry::Shared { id, .. } => ids.push(*id),
        }
    }
    ids
}

/// Holds the master counts under each live thread's field, and the lock
/// key's TTL (what the holds are good for).
fn counts(cfg: &Config, s: &State) -> Vec<(u8, u8, (u8, i64))> {
    let mut out = Vec::new();
    for (c, client) in s.clients.iter().enumerate() {
        if !client.up {
            continue;
        }
        for t in 0..client.threads.len() as u8 {
            let count = in_redis(cfg, s, c as u8, t);
            let ttl = if count > 0 {
                s.redis.pttl(Key::Name(name(cfg, c as u8, t)))
            } else {
                0
            };
            out.push((c as u8, t, (count, ttl)));
        }
    }
    out
}
