//! The canonical form of a state: connections that can no longer matter
//! dropped, request ids renumbered by first use, request latches no one
//! names any more dropped (no request can read them again); and, for the
//! search's fingerprints only, the clients sorted (they are alike: no rule
//! names a client by its number).

use super::state::{Job, Req, State};
use crate::names::{Key, Request};
use std::collections::BTreeMap;

/// Puts `s` in canonical form.
pub fn normalize(s: &mut State) {
    for client in &mut s.clients {
        client.trailing.retain(|w| !w.cut && w.req.is_some());
        client.trailing.sort();
        client.worker.sort();
    }
    // An undo no copy of which has run matters only while an attempt of
    // its call may still run.
    let carried: Vec<u16> = s
        .clients
        .iter()
        .flat_map(|c| c.wire.iter().chain(&c.trailing))
        .filter_map(|w| match w.req {
            Some(Req::CountDown(id)) => Some(id),
            _ => None,
        })
        .collect();
    s.undos.retain(|(id, _)| carried.contains(id));
    renumber(s);
    s.events = 0;
}

/// The representative of `s`'s symmetry class: its clients sorted, ids
/// renumbered again.
pub fn canonical(s: &State) -> State {
    let mut s = s.clone();
    s.clients.sort();
    renumber(&mut s);
    s
}

/// Renumbers request ids by first use and drops the latches of ids no
/// call or connection names.
fn renumber(s: &mut State) {
    let mut ids: BTreeMap<u16, u16> = BTreeMap::new();
    let note = |ids: &mut BTreeMap<u16, u16>, id: u16| {
        let next = ids.len() as u16;
        ids.entry(id).or_insert(next);
    };
    for client in &s.clients {
        if let Job::Down(d) = &client.job {
            note(&mut ids, d.latch);
        }
        let workers = client.worker.iter().filter_map(|g| g.wire.as_ref());
        for w in client.wire.iter().chain(&client.trailing).chain(workers) {
            for id in [w.req, w.then].into_iter().flatten() {
                if let Some(id) = id.clone().latch_mut().copied() {
                    note(&mut ids, id);
                }
            }
        }
        for g in &client.worker {
            note(&mut ids, g.latch);
        }
    }
    let keys = std::mem::take(&mut s.redis.keys);
    for (key, entry) in keys {
        match key {
            Key::Latch(name, Request(id)) => {
                if let Some(&new) = ids.get(&id) {
                    s.redis.keys.insert(Key::Latch(name, Request(new)), entry);
                }
            }
            _ => {
                s.redis.keys.insert(key, entry);
            }
        }
    }
    for client in &mut s.clients {
        if let Job::Down(d) = &mut client.job {
            d.latch = ids[&d.latch];
        }
        for g in &mut client.worker {
            g.latch = ids[&g.latch];
        }
        let workers = client.worker.iter_mut().filter_map(|g| g.wire.as_mut());
        for w in client
            .wire
            .iter_mut()
            .chain(client.trailing.iter_mut())
            .chain(workers)
        {
            for req in [&mut w.req, &mut w.then] {
                if let Some(id) = req.as_mut().and_then(Req::latch_mut) {
                    *id = ids[id];
                }
            }
        }
    }
    for (id, _) in &mut s.undos {
        *id = ids[id];
    }
    s.undos.sort();
    s.next_id = ids.len() as u16;
}
