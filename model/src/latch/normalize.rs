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
    }
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
        for w in client.wire.iter().chain(&client.trailing) {
            if let Some(id) = w.req.and_then(|mut r| r.latch_mut().copied()) {
                note(&mut ids, id);
            }
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
        for w in client.wire.iter_mut().chain(client.trailing.iter_mut()) {
            if let Some(id) = w.req.as_mut().and_then(Req::latch_mut) {
                *id = ids[id];
            }
        }
    }
    s.next_id = ids.len() as u16;
}
