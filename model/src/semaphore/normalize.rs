//! The canonical form of a state: connections that can no longer matter
//! dropped, request ids renumbered by first use, latches no one names
//! dropped, and an acquire latch's attempt numbers kept by rank (the
//! scripts and the client only compare them).

use super::state::{Job, State, Wire};
use crate::call::Call;
use crate::keyspace::{Str, Value};
use crate::names::{Key, Request};
use std::collections::BTreeMap;

/// Puts `s` in canonical form.
pub fn normalize(s: &mut State) {
    for client in &mut s.clients {
        client.trailing.retain(|w| !w.cut && !w.reqs.is_empty());
        for w in &mut client.trailing {
            w.held &= !w.reqs.is_empty();
            w.aged &= w.held;
        }
        client.trailing.sort();
        if let Job::Acquire(a) = &mut client.job {
            a.late.retain(|w| !w.cut);
            a.late.sort();
        }
    }
    renumber(s);
    for client in &mut s.clients {
        client.worker.sort();
    }
    s.events = 0;
}

/// The latch of a call.
fn latch_of(call: &Call) -> (u16, bool) {
    match *call {
        Call::SemaphoreAcquire { latch, .. } | Call::SemaphoreGiveBack { latch, .. } => {
            (latch.0, true)
        }
        Call::SemaphoreRelease { latch, .. } => (latch.0, false),
        _ => unreachable!("not a semaphore call"),
    }
}

/// Every connection of `s`, mutably.
fn wires_mut(s: &mut State) -> Vec<&mut Wire> {
    let mut out = Vec::new();
    for client in &mut s.clients {
        out.extend(client.wire.iter_mut());
        if let Job::Acquire(a) = &mut client.job {
            out.extend(a.late.iter_mut());
        }
        out.extend(client.trailing.iter_mut());
        out.extend(client.worker.iter_mut().filter_map(|g| g.wire.as_mut()));
    }
    out
}

/// Renumbers request ids by first use and ranks attempt numbers.
fn renumber(s: &mut State) {
    // Ids in use, in a fixed order, and whether each is an acquire call's.
    let mut ids: BTreeMap<u16, (u16, bool)> = BTreeMap::new();
    let note = |ids: &mut BTreeMap<u16, (u16, bool)>, id: u16, acquire: bool| {
        let next = ids.len() as u16;
        ids.entry(id).or_insert((next, acquire));
    };
    for client in &s.clients {
        match &client.job {
            Job::Acquire(a) => note(&mut ids, a.latch, true),
            Job::Release(r) => note(&mut ids, r.latch, false),
            Job::Idle => {}
        }
        for g in &client.worker {
            note(&mut ids, g.latch, true);
        }
    }
    let mut calls: Vec<(u16, bool)> = Vec::new();
    for w in wires_mut(s) {
        calls.extend(w.reqs.iter().map(latch_of));
    }
    for (id, acquire) in calls {
        note(&mut ids, id, acquire);
    }
    // A failed release whose copies can no longer run is lost for good.
    let (alive, lost): (Vec<u16>, Vec<u16>) = s
        .failed_releases
        .iter()
        .partition(|id| ids.contains_key(id));
    s.lost_releases += lost.len() as u8;
    s.failed_releases = alive.iter().map(|id| ids[id].0).collect();
    s.failed_releases.sort();
    // Attempt numbers, per acquire latch: every one in use.
    let mut numbers: BTreeMap<u16, Vec<i64>> = BTreeMap::new();
    for client in &s.clients {
        if let Job::Acquire(a) = &client.job {
            let n = numbers.entry(a.latch).or_default();
            n.extend([i64::from(a.sent), i64::from(a.answered)]);
        }
    }
    for w in wires_mut(s) {
        for call in &w.reqs {
            if let Call::SemaphoreAcquire { latch, attempt, .. } = call {
                numbers.entry(latch.0).or_default().push(*attempt);
            }
        }
    }
    let keys = std::mem::take(&mut s.redis.keys);
    for (key, mut entry) in keys {
        if let Key::Latch(name, Request(id)) = key {
            let Some(&(new, acquire)) = ids.get(&id) else {
                continue;
            };
            if let (true, Value::Str(Str::Int(n))) = (acquire, &entry.value) {
                numbers.entry(id).or_default().push(*n);
            }
            entry.value = entry.value.clone();
            s.redis.keys.insert(Key::Latch(name, Request(new)), entry);
        } else {
            s.redis.keys.insert(key, entry);
        }
    }
    let rank = |numbers: &BTreeMap<u16, Vec<i64>>, id: u16, n: i64| -> i64 {
        if n == 0 {
            return 0;
        }
        let mut all: Vec<i64> = numbers[&id].iter().copied().filter(|&m| m > 0).collect();
        all.sort_unstable();
        all.dedup();
        all.iter().position(|&m| m == n).expect("a number in use") as i64 + 1
    };
    // Rewrite: ids (old -> new), attempt numbers by rank.
    let old_of: BTreeMap<u16, u16> = ids.iter().map(|(&old, &(new, _))| (new, old)).collect();
    for entry in s.redis.keys.iter_mut() {
        if let (Key::Latch(_, Request(new)), Value::Str(Str::Int(n))) =
            (entry.0, &mut entry.1.value)
        {
            let old = old_of[new];
            if ids[&old].1 {
                *n = rank(&numbers, old, *n);
            }
        }
    }
    for w in wires_mut(s) {
        for call in &mut w.reqs {
            match call {
                Call::SemaphoreAcquire { latch, attempt, .. } => {
                    *attempt = rank(&numbers, latch.0, *attempt);
                    latch.0 = ids[&latch.0].0;
                }
                Call::SemaphoreGiveBack { latch, .. } | Call::SemaphoreRelease { latch, .. } => {
                    latch.0 = ids[&latch.0].0;
                }
                _ => unreachable!("not a semaphore call"),
            }
        }
    }
    for client in &mut s.clients {
        match &mut client.job {
            Job::Acquire(a) => {
                a.sent = rank(&numbers, a.latch, i64::from(a.sent)) as u8;
                a.answered = rank(&numbers, a.latch, i64::from(a.answered)) as u8;
                a.latch = ids[&a.latch].0;
            }
            Job::Release(r) => r.latch = ids[&r.latch].0,
            Job::Idle => {}
        }
        for g in &mut client.worker {
            g.latch = ids[&g.latch].0;
        }
    }
    s.next_id = ids.len() as u16;
}
