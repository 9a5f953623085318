//! The undo of an acquire the replicas did not confirm (`sync_replicas`;
//! `engine/attempt.rs`, `Call::undo_unreplicated`, on
//! `ReplicasNotSynced`, since 08de4f2): under the step's turn, up to
//! `min(retry_attempts + 1, 8)` releases of the thread's field under the
//! condition `above:N` (N the holds its guards stand for plus the
//! releases on its lane; release only while Redis counts more than N),
//! each with its own request id, recorded as one undo entry with no
//! connection yet (`Trailing::unwritten`) and pushed onto the lane, which
//! is then settled at once within one response timeout. The lane's settle
//! sends the batch as a copy on a new connection, one copy at a time,
//! exactly as for an undo behind a late attempt whose connection failed
//! ([`super::undo`], `settle_undo`, `resend`): a copy whose reply does not
//! come in time is kept and read later, no other copy goes while it may
//! run, and the undo stays on the lane until a copy's replies are read or
//! its keep time (the latch's life) is over, so that no later request of
//! the field overtakes it (the model's defect 9, fixed in 08de4f2).
//!
//! Conditional, so that a copy sent again across a failover to a replica
//! that never had the acquire frees no hold a guard stands for; several,
//! so that an acquire the pool ran twice (its first reply cut before
//! `WAIT`) leaves nothing behind. It waits for no replica (no `WAIT`). The
//! call fails with `ReplicasNotSynced` whatever the settle found.

use super::config::Config;
use super::holds;
use super::job::{CallAt, Settle};
use super::mutation::ClientMutation;
use super::settle::{settle, Settled, Settler};
use super::state::{Entry, ReqId, State};

/// The most releases one undo records (`min(retry_attempts + 1, 8)` in
/// the library: the pool runs the acquire once per attempt, at most).
pub fn releases(cfg: &Config) -> u8 {
    if cfg.mutated(ClientMutation::UnreplicatedUndoOnce) {
        // The defect: one release, whatever attempts the pool made.
        return 1;
    }
    (cfg.retries + 1).min(8)
}

/// Begins the undo of thread `(c, h)`'s unreplicated acquire, on its
/// turn: the undo entry on the lane, then the lane's settle.
pub fn begin(cfg: &Config, s: &mut State, (c, h): (u8, u8)) -> CallAt {
    // Every hold above those the guards and the lane's releases stand for
    // (`turn.with_state`: `renewals.counted` plus the releases).
    let on_lane = s
        .thread(c, h)
        .lane
        .entries
        .iter()
        .filter(|e| matches!(e, Entry::Release(_) | Entry::Shared { .. }))
        .count() as u8;
    let above = if cfg.mutated(ClientMutation::UnreplicatedUndoUnconditional) {
        // The library before d847eb6: plain releases, one hold each.
        None
    } else {
        Some(holds::counted(cfg, s, c, h) + on_lane)
    };
    let ids: Vec<ReqId> = (0..releases(cfg)).map(|_| s.fresh_id()).collect();
    let undo = Entry::Undo {
        wire: None,
        keep: cfg.latch_ticks(),
        above,
        ids,
    };
    let id = match &undo {
        Entry::Undo { ids, .. } => ids[0],
        _ => unreachable!("an undo"),
    };
    super::retry::push(s, c, h, undo);
    CallAt::Unsynced {
        settle: Settle::within(1),
        id,
    }
}

/// One move of the undo's settle: `true` once it is over (the call then
/// fails with `ReplicasNotSynced`).
pub fn advance(cfg: &Config, s: &mut State, (c, h): (u8, u8), st: &mut Settle, id: ReqId) -> bool {
    match settle(cfg, s, c, h, st, Settler::Step) {
        Settled::Blocked => false,
        Settled::Done => true,
        Settled::NotYet => {
            if cfg.mutated(ClientMutation::UnreplicatedUndoOffLane) {
                // The library before 08de4f2: a release not confirmed in
                // time ends the undo (logged), kept nowhere, while the
                // copy out may still run.
                let lane = &mut s.thread_mut(c, h).lane.entries;
                lane.retain(|e| !matches!(e, Entry::Undo { ids, .. } if ids.first() == Some(&id)));
                holds::excuse_leak(s, c, h);
            }
            true
        }
    }
}
