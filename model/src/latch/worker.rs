//! The release worker carrying on a count-down's undo
//! (`Engine::give_back_later`, `PendingRelease::sync_give_back`), as in
//! [`crate::semaphore::worker`]: sent in rounds until a reply says it ran,
//! never once it could reach Redis after the call's latch may be gone.

use super::state::{Req, State, Wire};

/// One round's attempt for undo `i` of client `c`.
pub fn send(s: &mut State, c: usize, i: usize) -> Option<()> {
    let entry = &mut s.clients[c].worker[i];
    // `attempt_once`: not sent while it could arrive after `until`.
    if entry.wire.is_some() || entry.until <= 1 {
        return None;
    }
    entry.tried = true;
    entry.wire = Some(Wire::send(Req::Undo(entry.latch)));
    Some(())
}

/// The worker reads undo `i`'s reply (settled) or error (a later round
/// sends it again).
pub fn read(s: &mut State, c: usize, i: usize) -> Option<()> {
    let entry = &mut s.clients[c].worker[i];
    if !entry.wire.as_ref().is_some_and(Wire::readable) {
        return None;
    }
    let wire = entry.wire.take()?;
    if !wire.cut {
        s.clients[c].worker.remove(i);
    }
    Some(())
}

/// A tick: an attempt not answered in time closes (its request may still
/// run); an undo whose latch may be gone is dropped, unconfirmed.
pub fn tick(s: &mut State, c: usize) {
    let client = &mut s.clients[c];
    for entry in &mut client.worker {
        entry.until = entry.until.saturating_sub(1);
        entry.tried = false;
        if let Some(wire) = entry.wire.take_if(|w| w.held) {
            client.trailing.push(wire.unread());
        }
    }
    client
        .worker
        .retain(|entry| entry.wire.is_some() || entry.until > 0);
}

/// Whether the worker made its round of the tick: every undo that may be
/// sent was sent in it.
pub fn rounds_made(s: &State) -> bool {
    s.clients
        .iter()
        .flat_map(|c| &c.worker)
        .all(|g| g.tried || g.until <= 1)
}
