//! The undo behind a late acquire (`engine/attempt.rs`, `undo_behind`;
//! `lane/entry.rs`, `settle_undo`; `server/late.rs`, `Trailing`): the
//! kind's release `above:N` (one more per attempt cut before its reply
//! since the call's last answer), each with its request id, written on the
//! late attempt's own connection and kept on the lane until its replies
//! are read or its keep time (the latch's life) is over.
//!
//! Once its connection failed before those replies (2bbaed6: the late
//! acquire ran or never will, its undo with it or not), the same releases
//! with the same ids go again on a new connection (`lane/entry.rs`,
//! `resend`),
//! one copy at a time: a copy whose reply does not come within the
//! settle's deadline is kept and read like the first (no other copy goes
//! while it may run); a copy whose connection fails lets the next settle
//! send another; a copy goes only while the deadline is before the keep
//! time's end (`deadline < keep_until`). A copy that ran replays (its ids
//! are latched) and `above:N` keeps any copy from giving back a guarded
//! hold. The library's rule that a copy that could not be kept stops the
//! copies (`Trailing::untracked`: a connection that cannot be followed,
//! the cluster's) is out of reach here: every connection of the model can
//! be followed, and every copy that times out is kept.
//!
//! The undo of an unreplicated acquire ([`super::unreplicated`], since
//! 08de4f2) is such an undo from the start: no connection, settled by
//! these copies.
//!
//! An undo that cannot be written behind its late attempt because that
//! connection failed first (3fc6f44: `Trailing::follow` fails with the
//! connection's error; the late request ran or never will) is kept as one
//! whose connection failed (`Trailing::unwritten`): its first settle sends
//! a copy. A write that times out (written in part, maybe) sends no copy
//! and is left to the orphan rules; the model has no such write (a write
//! to a connection not cut always goes through).

use super::config::Config;
use super::holds;
use super::job::{Send, Settle};
use super::mutation::ClientMutation;
use super::requests::release_call;
use super::settle::Settler;
use super::state::{Entry, ReqId, Request, State, Wire, WireId};
use crate::call::Attempt;

/// What one attempt at an undo entry found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Undone {
    /// Its replies (or a copy's) were read, or its keep time is over.
    Settled,
    /// Not confirmed by the deadline (an outage's error).
    NotYet,
    /// Waiting for a reply.
    Blocked,
    /// The worker takes it out unconfirmed and goes on (a mutation).
    Skip,
}

/// The undo's releases of thread `lane`'s field, `above` holds (`None`:
/// plain releases, sent as resends), one per request id.
pub fn requests(cfg: &Config, c: u8, lane: u8, above: Option<u8>, ids: &[ReqId]) -> Vec<Request> {
    let attempt = above.map_or(Attempt::Retry, |n| Attempt::Above(i64::from(n)));
    ids.iter()
        .map(|&id| release_call(cfg, c, lane, id, attempt, None))
        .collect()
}

/// Writes the undo behind the late attempt on `wire` (`Trailing::follow`)
/// and keeps it on lane `lane`.
pub fn follow(cfg: &Config, s: &mut State, c: u8, lane: u8, wire: WireId, above: u8, n: u8) {
    let ids: Vec<ReqId> = (0..n).map(|_| s.fresh_id()).collect();
    let undo = requests(cfg, c, lane, Some(above), &ids);
    s.wires[usize::from(wire)].requests.extend(undo);
    super::retry::push(
        s,
        c,
        lane,
        Entry::Undo {
            wire: Some(wire),
            keep: cfg.latch_ticks(),
            above: Some(above),
            ids,
        },
    );
}

/// Keeps the undo behind a late attempt whose connection failed before
/// the undo was written (`Trailing::unwritten`): no connection, so that
/// its first settle sends it on another (as [`settle_undo`] does once an
/// undo's connection failed).
pub fn unwritten(cfg: &Config, s: &mut State, c: u8, lane: u8, above: u8, n: u8) {
    let ids: Vec<ReqId> = (0..n).map(|_| s.fresh_id()).collect();
    super::retry::push(
        s,
        c,
        lane,
        Entry::Undo {
            wire: None,
            keep: cfg.latch_ticks(),
            above: Some(above),
            ids,
        },
    );
}

/// Whether every request on `w` ran and its replies may be read.
fn confirmed(w: &Wire) -> bool {
    !w.cut && w.requests.is_empty() && w.visible()
}

/// Whether the undo at the head of a lane can move now (its settle's
/// deadline not passed yet).
pub fn ready(cfg: &Config, s: &State, entry: &Entry, worker: bool, more: bool) -> bool {
    let Entry::Undo { wire, keep, .. } = entry else {
        return true;
    };
    let skip = worker && cfg.mutated(ClientMutation::UndoTakenBeforeReply) && more;
    *keep == 0
        || wire.is_none_or(|w| {
            let w = s.wire(w);
            w.cut || confirmed(w)
        })
        || skip
}

fn set_wire(s: &mut State, c: u8, lane: u8, at: usize, to: Option<WireId>) {
    if let Entry::Undo { wire, .. } = &mut s.thread_mut(c, lane).lane.entries[at] {
        *wire = to;
    }
}

/// One attempt at the undo at `lane`'s entry `at` (`settle_undo`).
pub fn settle_undo(
    cfg: &Config,
    s: &mut State,
    c: u8,
    (lane, at): (u8, usize),
    st: &mut Settle,
    who: Settler,
) -> Undone {
    let Entry::Undo {
        wire,
        keep,
        above,
        ref ids,
    } = s.thread(c, lane).lane.entries[at]
    else {
        unreachable!("an undo")
    };
    let ids = ids.clone();
    let done = wire.is_some_and(|w| confirmed(s.wire(w)));
    if let Some(w) = wire.filter(|_| done || keep == 0) {
        s.wires[usize::from(w)].replies.clear();
    }
    if done {
        return Undone::Settled;
    }
    if keep == 0 {
        // Its keep time is over: the late acquire and its undo ran by
        // now, or never will. Unconfirmed, a hold it did not give back
        // stays until its lease (a documented limit: past the latches'
        // life, left to the orphan rules).
        holds::excuse_leak(s, c, lane);
        return Undone::Settled;
    }
    // A copy sent in this settle (`resend`), rather than the first or a
    // copy kept from an earlier one (`confirm`).
    let copy_out = st.out.is_some_and(|o| Some(o.wire) == wire);
    if let Some(w) = wire {
        if !s.wire(w).cut {
            if who == Settler::Worker
                && !copy_out
                && cfg.mutated(ClientMutation::UndoTakenBeforeReply)
            {
                // The defect: the undo is out of the list while someone
                // waits for it; the worker goes on to what follows.
                return Undone::Skip;
            }
            if !st.expired {
                return Undone::Blocked;
            }
            if copy_out {
                st.out = None;
                if cfg.mutated(ClientMutation::UndoCopiesOverlap) {
                    // The defect: the copy is dropped, not kept, and may
                    // still run while the next settle sends another.
                    set_wire(s, c, lane, at, None);
                }
            }
            return Undone::NotYet;
        }
        // Its connection failed: what reached the server ran.
        set_wire(s, c, lane, at, None);
        if copy_out {
            // A copy's failure is this settle's error (`resend`'s
            // transient error); the next settle sends another.
            st.out = None;
            return Undone::NotYet;
        }
        if cfg.mutated(ClientMutation::NoUndoResend) {
            // The library before 2bbaed6: nothing of ours is on its way
            // any more, and the undo is settled, run or not.
            return Undone::Settled;
        }
    }
    if keep <= st.left || st.expired {
        // A copy sent now might outlive its latches (or no time is left
        // before the deadline: the pool sends nothing).
        return Undone::NotYet;
    }
    let copy = requests(cfg, c, lane, above, &ids);
    let mut copy = copy.into_iter();
    let w = s.open(c, copy.next().expect("one release at least"));
    s.wires[usize::from(w)].requests.extend(copy);
    set_wire(s, c, lane, at, Some(w));
    st.out = Some(Send::on(w, 0));
    Undone::Blocked
}
