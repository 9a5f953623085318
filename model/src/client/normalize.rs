//! The canonical form of a state, computed after every step: connections
//! and request ids renumbered in the order the clients' state names them
//! (connections nobody reads sorted by content after them), so that two
//! states that differ only by numbering are one; connections with nothing
//! left to run or read dropped; latches no request can read any more
//! deleted (nobody will read them again: the real ones expire unread).

use std::collections::BTreeMap;

use super::config::Config;
use super::job::{CallAt, Job, RelAt, RelSend, Settle};
use super::state::{Client, Entry, ReqId, Request, State, Wire, WireId};
use crate::call::Call;
use crate::keyspace::Keyspace;
use crate::names::{Key, Request as Latch};

enum Ref<'a> {
    Wire(&'a mut WireId),
    Id(&'a mut ReqId),
}

fn settle_refs(st: &mut Settle, f: &mut dyn FnMut(Ref<'_>)) {
    if let Some(out) = &mut st.out {
        f(Ref::Wire(&mut out.wire));
    }
}

fn rel_refs(rs: &mut RelSend, f: &mut dyn FnMut(Ref<'_>)) {
    f(Ref::Id(&mut rs.id));
    f(Ref::Wire(&mut rs.send.wire));
}

fn visit(clients: &mut [Client], f: &mut dyn FnMut(Ref<'_>)) {
    for client in clients {
        for thread in &mut client.threads {
            match &mut thread.job {
                Job::Acquire(call) => {
                    for w in &mut call.late {
                        f(Ref::Wire(w));
                    }
                    match &mut call.at {
                        CallAt::StepSettle(st) | CallAt::FinishSettle(st) => settle_refs(st, f),
                        CallAt::Unsynced { settle, id } => {
                            f(Ref::Id(id));
                            settle_refs(settle, f);
                        }
                        CallAt::Sent(send, _) | CallAt::FinishLook(send) => {
                            f(Ref::Wire(&mut send.wire))
                        }
                        CallAt::Orphans { send, .. } | CallAt::FinishGiveBack { send, .. } => {
                            rel_refs(send, f)
                        }
                        _ => {}
                    }
                }
                Job::Release(rel) => {
                    f(Ref::Id(&mut rel.id));
                    match &mut rel.at {
                        RelAt::Settle(st) => settle_refs(st, f),
                        RelAt::Sent { send, .. } | RelAt::GiveBack { send, .. } => {
                            rel_refs(send, f)
                        }
                        RelAt::Turn => {}
                    }
                }
                Job::Idle | Job::Dead => {}
            }
            for entry in &mut thread.lane.entries {
                match entry {
                    Entry::Undo { wire, ids, .. } => {
                        if let Some(wire) = wire {
                            f(Ref::Wire(wire));
                        }
                        for id in ids {
                            f(Ref::Id(id));
                        }
                    }
                    Entry::Release(p) => f(Ref::Id(&mut p.id)),
                    Entry::Shared { id, .. } => f(Ref::Id(id)),
                }
            }
        }
        if let Some((_, st)) = &mut client.worker.at {
            settle_refs(st, f);
        }
    }
}

/// The latch id a request names, if any.
fn latch_of(request: &mut Request) -> Option<&mut ReqId> {
    match request {
        Request::Script(
            Call::Release { latch, .. }
            | Call::FairRelease { latch, .. }
            | Call::WriteRelease { latch, .. }
            | Call::ReadRelease { latch, .. },
        ) => Some(&mut latch.0),
        _ => None,
    }
}

/// Puts `s` in its canonical form.
pub fn normalize(cfg: &Config, s: &mut State) {
    // The last taking's TTL end, once no waiter's mark can read it (a
    // mark is read by a waiter of that lock only).
    for (c, client) in s.clients.iter_mut().enumerate() {
        for (lock, last) in client.last_take.iter_mut().enumerate() {
            let read = client.threads.iter().enumerate().any(|(t, th)| {
                cfg.lock(c as u8, t as u8) == lock as u8
                    && matches!(&th.job, Job::Acquire(call) if call.taken_since_mark)
            });
            if !read {
                *last = 0;
            }
        }
    }
    let mut wires: Vec<Option<WireId>> = vec![None; s.wires.len()];
    let mut order: Vec<usize> = Vec::new();
    let mut ids: BTreeMap<ReqId, ReqId> = BTreeMap::new();
    let mut next: ReqId = 1;
    let mut id_of = |id: ReqId, ids: &mut BTreeMap<ReqId, ReqId>| -> ReqId {
        *ids.entry(id).or_insert_with(|| {
            next += 1;
            next - 1
        })
    };
    visit(&mut s.clients, &mut |r| match r {
        Ref::Wire(w) => {
            let old = usize::from(*w);
            *w = *wires[old].get_or_insert_with(|| {
                order.push(old);
                (order.len() - 1) as WireId
            });
        }
        Ref::Id(id) => *id = id_of(*id, &mut ids),
    });
    // Connections nobody reads: kept while a request on them may still
    // run (not on a partitioned client's silent connection, which the
    // heal cuts), sorted by what they carry.
    let mut strays: Vec<(Wire, usize)> = (0..s.wires.len())
        .filter(|&w| wires[w].is_none())
        .filter(|&w| !s.wires[w].cut && !s.wires[w].silent && !s.wires[w].requests.is_empty())
        .map(|w| {
            let mut key = s.wires[w].clone();
            key.replies.clear();
            for request in &mut key.requests {
                if let Some(id) = latch_of(request) {
                    *id = ids.get(id).copied().unwrap_or(ReqId::MAX);
                }
            }
            (key, w)
        })
        .collect();
    strays.sort();
    order.extend(strays.iter().map(|(_, w)| *w));
    let mut old: Vec<Option<Wire>> = std::mem::take(&mut s.wires).into_iter().map(Some).collect();
    let referenced = order.len() - strays.len();
    for (at, w) in order.into_iter().enumerate() {
        let mut wire = old[w].take().expect("each wire once");
        if at >= referenced {
            wire.replies.clear();
        }
        for request in &mut wire.requests {
            if let Some(id) = latch_of(request) {
                *id = id_of(*id, &mut ids);
            }
        }
        s.wires.push(wire);
    }
    s.next_id = next;
    rename_latches(&mut s.redis, &ids);
    if let Some(replica) = &mut s.replica {
        rename_latches(replica, &ids);
    }
}

/// The latches of `redis` under their requests' new ids; those no
/// request can read again deleted.
fn rename_latches(redis: &mut Keyspace, ids: &BTreeMap<ReqId, ReqId>) {
    let unchanged = redis.keys.keys().all(|key| match key {
        Key::Latch(_, Latch(id)) => ids.get(id) == Some(id),
        _ => true,
    });
    if unchanged {
        return;
    }
    let keys = std::mem::take(&mut redis.keys);
    for (key, entry) in keys {
        let key = match key {
            Key::Latch(name, Latch(id)) => match ids.get(&id) {
                Some(&new) => Key::Latch(name, Latch(new)),
                // No request can read it again.
                None => continue,
            },
            other => other,
        };
        redis.keys.insert(key, entry);
    }
}

/// Every fencing token in `s`, renumbered densely in order (1, 2, ...):
/// only their order matters, and the counter would otherwise grow with
/// every acquire, so that no run could end.
pub fn rank_tokens(s: &mut State) {
    let mut seen: Vec<i64> = Vec::new();
    visit_tokens(s, &mut |t| seen.push(*t));
    if seen.is_empty() {
        return;
    }
    seen.sort_unstable();
    seen.dedup();
    visit_tokens(s, &mut |t| {
        *t = seen.binary_search(t).map_or(*t, |at| at as i64 + 1);
    });
}

fn visit_tokens(s: &mut State, f: &mut dyn FnMut(&mut i64)) {
    use super::job::Wake;
    use super::state::Answer;
    use crate::keyspace::{Str, Value};
    let answer = |a: &mut Answer, f: &mut dyn FnMut(&mut i64)| match a {
        Answer::Took { token: Some(t), .. } | Answer::Released { token: Some(t), .. } => f(t),
        _ => {}
    };
    for wire in &mut s.wires {
        for a in &mut wire.replies {
            answer(a, f);
        }
    }
    for client in &mut s.clients {
        for thread in &mut client.threads {
            if let Some(super::state::Gen { token: Some(t), .. }) = &mut thread.gen {
                f(t);
            }
            if let Job::Acquire(call) = &mut thread.job {
                if let CallAt::Parked(p) = &mut call.at {
                    if let Some(Wake::HandedOver(Some(t))) = &mut p.woke {
                        f(t);
                    }
                }
            }
        }
    }
    for (key, entry) in s.redis.keys.iter_mut() {
        match (key, &mut entry.value) {
            (Key::Token(_), Value::Str(Str::Int(t))) => f(t),
            (_, Value::Str(Str::HandedOver(t))) => f(t),
            _ => {}
        }
    }
}
