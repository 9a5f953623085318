//! The undo of an acquire the replicas did not confirm (`sync_replicas`;
//! `engine/attempt.rs` on `ReplicasNotSynced`, `Engine::undo_unreplicated`
//! in `engine/unguarded.rs`): under the step's turn, releases of the
//! thread's field under the condition `above:N`, N the holds its guards
//! stand for plus the releases on its lane (release only while Redis
//! counts more than N: reply 4 and nothing latched otherwise), one at a
//! time, each under the pool's retry rule (its retries send the same
//! `above:N` with the same id), repeated while the reply is "holds
//! remain" (0), at most [`MAX_UNDONE`] times. Conditional, so that a copy
//! resent across a failover to a replica that never had the acquire frees
//! no hold a guard stands for; repeated, so that an acquire the pool ran
//! twice (its first reply cut before `WAIT`) leaves nothing behind.
//!
//! A release that stays unconfirmed ends the undo, not carried on by the
//! worker (the library logs it): what it leaves above the guards is given
//! back by the generation's last release or expires with its lease (a
//! documented limit, excused). The library also goes on when the release
//! itself fails with `ReplicasNotSynced`; the model's releases have no
//! `WAIT` behind them.

use super::config::Config;
use super::holds;
use super::job::{CallAt, RelSend};
use super::mutation::ClientMutation;
use super::retry::{self, Progress};
use super::state::{Entry, Purpose, State};

/// The most releases one undo sends (`MAX_ORPHANS_RELEASED`, 8 in the
/// library): enough here for every hold an acquire call can take (its
/// attempts cut before their reply, two at most, and the last) and the
/// reply that finds nothing above.
pub const MAX_UNDONE: u8 = 4;

/// "Holds remain": a release gave back one hold of several.
const HOLDS_REMAIN: Option<i64> = Some(0);

/// Begins the undo of thread `(c, h)`'s unreplicated acquire, on its turn.
pub fn begin(cfg: &Config, s: &mut State, (c, h): (u8, u8)) -> CallAt {
    let id = s.fresh_id();
    if cfg.mutated(ClientMutation::UnreplicatedUndoUnconditional) {
        // The library before the fix: a plain release of one hold.
        let send = retry::first(cfg, s, (c, h), id, None);
        return CallAt::Unsynced { left: 0, send };
    }
    // Every hold above those the guards and the lane's releases stand for
    // (`turn.with_state`: `renewals.counted` plus the releases).
    let releases = s
        .thread(c, h)
        .lane
        .entries
        .iter()
        .filter(|e| matches!(e, Entry::Release(_) | Entry::Shared { .. }))
        .count() as u8;
    let above = holds::counted(cfg, s, c, h) + releases;
    let left = if cfg.mutated(ClientMutation::UnreplicatedUndoOnce) {
        0
    } else {
        MAX_UNDONE - 1
    };
    let send = retry::first_above(cfg, s, (c, h), id, above);
    CallAt::Unsynced { left, send }
}

/// One move of the undo: `true` once it is over (the call then fails with
/// `ReplicasNotSynced`).
pub fn advance(
    cfg: &Config,
    s: &mut State,
    (c, h): (u8, u8),
    left: &mut u8,
    send: &mut RelSend,
) -> bool {
    let progress = retry::progress(cfg, s, (c, h), send, None, false);
    match (progress, send.above) {
        (Progress::Waiting, _) => false,
        (Progress::Answered(HOLDS_REMAIN, _), Some(n)) => {
            if *left == 0 {
                if !cfg.mutated(ClientMutation::UnreplicatedUndoOnce) {
                    // The model's bound, past every hold a call can take.
                    holds::excuse_leak(s, c, h);
                }
                return true;
            }
            *left -= 1;
            let id = s.fresh_id();
            *send = retry::first_above(cfg, s, (c, h), id, n);
            false
        }
        // Nothing above the guards (4), the lock freed, or not held.
        (Progress::Answered(..), _) => true,
        (Progress::Unconfirmed, None) => {
            // The library before the fix: left to the lane, like any
            // give-back not confirmed (`give_back_request`).
            let p = retry::pending(cfg, Some(send), send.id, Purpose::Unguarded { more: 0 }, 0);
            retry::push(s, c, h, Entry::Release(p));
            true
        }
        (Progress::Unconfirmed, Some(_)) => {
            // Logged, not carried on: what is left stays above the guards
            // until the generation's last release or its lease.
            holds::excuse_leak(s, c, h);
            true
        }
    }
}
