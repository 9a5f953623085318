//! A release of one hold (`engine/release.rs`, `Engine::release`): the
//! hold forgotten first, the lane's turn and settle within the deadline
//! (a drop's one response timeout, an unlock's retry bound), a successor
//! reserved for a direct hand-over, the release sent, its reply read
//! (`released`), holds no guard stands for given back
//! (`engine/unguarded.rs`), and what stays unconfirmed left to the lane.

use super::acquire::Flow;
use super::config::{Config, ReleaseMode};
use super::holds;
use super::job::{Job, Rel, RelAt, RelSend, Settle, Wake};
use super::mutation::ClientMutation;
use super::retry::{self, Progress};
use super::settle::{settle, Settled, Settler};
use super::state::{Entry, Purpose, State, Taker};
use super::{events, pubsub, wait};

/// Begins thread `(c, t)`'s release of one of the holds of the field it
/// acts for (its own, or its owner's: any thread of an owner may release
/// a hold another took). The hold is forgotten under the lane's turn, or
/// as the release is left to the lane (`forget`).
pub fn begin(cfg: &Config, s: &mut State, c: u8, t: u8, mode: ReleaseMode) {
    let id = s.fresh_id();
    let left = match mode {
        ReleaseMode::Drop => 1,
        ReleaseMode::Unlock => cfg.retry_window(),
    };
    let mut rel = Rel {
        mode,
        id,
        holder: cfg.holder(c, t),
        stale: false,
        forgot: false,
        gen_live: false,
        foreign: false,
        leaked: false,
        left,
        certain: 0,
        at: RelAt::Turn,
    };
    if cfg.mutated(ClientMutation::ReleaseForgetsBeforeTurn) {
        forget(cfg, s, c, &mut rel);
    }
    s.thread_mut(c, t).job = Job::Release(rel);
    go(cfg, s, c, t);
}

/// Whether `rel` forgot its hold already (it does once it leaves the
/// turn and the settle).
pub fn forgotten(rel: &Rel) -> bool {
    rel.forgot
}

/// Forgets the hold (`RenewalMap::release_one`, under the lane's turn or
/// with the entry that carries the release on); false when its generation
/// is over (`Kept::Stale`): the release ends, nothing sent (`unlock` says
/// `LockLost`).
fn forget(cfg: &Config, s: &mut State, c: u8, rel: &mut Rel) -> bool {
    if rel.forgot {
        return true;
    }
    if rel.stale {
        return false;
    }
    rel.forgot = true;
    let h = rel.holder;
    let thread = s.thread(c, h);
    rel.foreign = thread.ghost.intruded;
    rel.leaked = rel.foreign && thread.ghost.leak_excused;
    // The longest TTL the hold may have, and the slack.
    rel.certain = thread
        .gen
        .map_or(0, |g| g.left.max(g.may_last))
        .max(cfg.watchdog)
        + 2;
    rel.gen_live = holds::release_one(s, c, h);
    true
}

/// Pending releases of thread `h`'s field that have not forgotten their
/// hold yet: the guards they stand for are taken.
pub fn releasing(s: &State, c: u8, h: u8) -> u8 {
    s.clients[usize::from(c)]
        .threads
        .iter()
        .filter(|th| matches!(&th.job, Job::Release(rel) if rel.holder == h && !forgotten(rel)))
        .count() as u8
}

/// Runs thread `(c, t)`'s release until it waits or ends.
pub fn go(cfg: &Config, s: &mut State, c: u8, t: u8) {
    let job = std::mem::replace(&mut s.thread_mut(c, t).job, Job::Idle);
    let Job::Release(mut rel) = job else {
        s.thread_mut(c, t).job = job;
        return;
    };
    loop {
        match advance(cfg, s, c, t, &mut rel) {
            Flow::Continue => {}
            Flow::Block => {
                s.thread_mut(c, t).job = Job::Release(rel);
                return;
            }
            Flow::End => {
                let lane = &mut s.thread_mut(c, cfg.holder(c, t)).lane;
                if lane.taken == Some(Taker::Thread(t)) {
                    lane.taken = None;
                }
                return;
            }
        }
    }
}

fn advance(cfg: &Config, s: &mut State, c: u8, t: u8, rel: &mut Rel) -> Flow {
    // The field, lane and renewal record it acts for.
    let h = cfg.holder(c, t);
    match rel.at.clone() {
        RelAt::Turn => {
            // Not while a call keeps the lane for its late attempts
            // (`Lane::take_turn` without a call).
            let lane = &mut s.thread_mut(c, h).lane;
            if release_may_take(lane) {
                lane.taken = Some(Taker::Thread(t));
                if cfg.mutated(ClientMutation::ReleaseSkipsUndos) {
                    if !forget(cfg, s, c, rel) {
                        return Flow::End;
                    }
                    return send(cfg, s, c, t, rel);
                }
                rel.at = RelAt::Settle(Settle::within(rel.left));
                return Flow::Continue;
            }
            if rel.left > 0 {
                return Flow::Block;
            }
            // The turn is not free by the deadline: the release goes on,
            // unsent, from the worker (`hand_to_worker_with`).
            if forget(cfg, s, c, rel) {
                to_worker(cfg, s, c, h, rel, None);
            }
            Flow::End
        }
        RelAt::Settle(mut st) => match settle(cfg, s, c, h, &mut st, Settler::Release) {
            Settled::Blocked => {
                rel.at = RelAt::Settle(st);
                Flow::Block
            }
            Settled::NotYet => {
                if forget(cfg, s, c, rel) {
                    to_worker(cfg, s, c, h, rel, None);
                }
                Flow::End
            }
            Settled::Done if !forget(cfg, s, c, rel) => Flow::End,
            Settled::Done => send(cfg, s, c, t, rel),
        },
        RelAt::Sent {
            mut send,
            successor,
        } => {
            match retry::progress(cfg, s, (c, h), &mut send, successor, rel.left == 0) {
                Progress::Waiting => {
                    rel.at = RelAt::Sent { send, successor };
                    Flow::Block
                }
                Progress::Answered(code, token) => {
                    released(cfg, s, c, t, rel, successor, code, token)
                }
                Progress::Unconfirmed => {
                    to_worker(cfg, s, c, h, rel, Some(&send));
                    if let Some(next) = successor {
                        // It may still hand the lock over: that lane waits too.
                        retry::push(
                            s,
                            c,
                            cfg.holder(c, next),
                            Entry::Shared {
                                lane: h,
                                id: send.id,
                            },
                        );
                        end_reservation(cfg, s, c, t, next, Wake::Unsettled);
                    }
                    Flow::End
                }
            }
        }
        RelAt::GiveBack { more, mut send } => {
            match retry::progress(cfg, s, (c, h), &mut send, None, rel.left == 0) {
                Progress::Waiting => {
                    rel.at = RelAt::GiveBack { more, send };
                    Flow::Block
                }
                Progress::Answered(Some(0), _) if more > 0 => {
                    give_back(cfg, s, c, h, rel, more - 1)
                }
                Progress::Answered(Some(0), _) => {
                    // The model's bound on give-backs (the library's is 8).
                    holds::excuse_leak(s, c, h);
                    Flow::End
                }
                Progress::Answered(..) => Flow::End,
                Progress::Unconfirmed => {
                    let p =
                        retry::pending(cfg, Some(&send), send.id, Purpose::Unguarded { more }, 0);
                    retry::push(s, c, h, Entry::Release(p));
                    Flow::End
                }
            }
        }
    }
}

/// Whether a release may take `lane`'s turn now: free, and kept by no
/// call for its late attempts.
pub fn release_may_take(lane: &super::state::Lane) -> bool {
    lane.taken.is_none() && lane.late_call.is_none()
}

/// Leaves the release to lane `h` (`hand_to_worker`, or the sent entry
/// `turn.push`); the caller is told it goes on (a drop returns, an unlock
/// says `ReleaseUnconfirmed`).
fn to_worker(cfg: &Config, s: &mut State, c: u8, h: u8, rel: &Rel, sent: Option<&RelSend>) {
    let purpose = Purpose::Guard { live: rel.gen_live };
    let p = retry::pending(cfg, sent, rel.id, purpose, rel.certain);
    retry::push(s, c, h, Entry::Release(p));
}

/// Reserves a successor (`release.rs`, `successor`) and sends the release.
fn send(cfg: &Config, s: &mut State, c: u8, t: u8, rel: &mut Rel) -> Flow {
    let successor = successor(cfg, s, c, t, rel);
    let send = retry::first(cfg, s, (c, cfg.holder(c, t)), rel.id, successor);
    rel.at = RelAt::Sent { send, successor };
    Flow::Block
}

/// A parked thread of this client to hand the lock to, when this release
/// is the generation's last, with the turn on its lane: only while that
/// lane keeps nothing and nobody sends on it (`take_quiet`); else the
/// reservation is dropped and the waiter tries itself. Only a waiter of
/// the released lock, never one of the other lock on its channel
/// (`PubSub::reserve_successor`, `Channel::with_lock`).
fn successor(cfg: &Config, s: &mut State, c: u8, t: u8, rel: &Rel) -> Option<u8> {
    if rel.gen_live || !cfg.kind.hands_over() {
        return None;
    }
    let n = s.clients[usize::from(c)].threads.len() as u8;
    let other_parked =
        (0..n).any(|o| cfg.lock(c, o) != cfg.lock(c, t) && wait::is_waiting(s, c, o));
    if other_parked {
        s.events |= events::OTHER_LOCK_PARKED;
    }
    let any_lock = cfg.mutated(ClientMutation::HandOverToOtherLock);
    let next = (0..n).find(|&o| {
        o != t && (any_lock || cfg.lock(c, o) == cfg.lock(c, t)) && wait::is_waiting(s, c, o)
    })?;
    // The lane of the field it acts for: one of the same owner's is the
    // releaser's own, whose turn is taken (`take_quiet` fails).
    let lane = &s.thread(c, cfg.holder(c, next)).lane;
    if lane.taken.is_some() || !lane.entries.is_empty() {
        // Reserved, then dropped: the waiter wakes and tries itself.
        reserve(s, c, next);
        pubsub::settle_reservation(s, c, next, Wake::Unsettled);
        return None;
    }
    s.thread_mut(c, cfg.holder(c, next)).lane.taken = Some(Taker::Releaser(t));
    reserve(s, c, next);
    if other_parked && cfg.lock(c, next) == cfg.lock(c, t) {
        s.events |= events::HANDED_PAST_OTHER_LOCK;
    }
    Some(next)
}

fn reserve(s: &mut State, c: u8, next: u8) {
    if let Job::Acquire(call) = &mut s.thread_mut(c, next).job {
        if let super::job::CallAt::Parked(p) = &mut call.at {
            p.reserved = true;
            p.woke = None;
        }
    }
}

/// The reservation of `next` by `t` ends: its lane's turn is given back
/// and it wakes with `wake`.
fn end_reservation(cfg: &Config, s: &mut State, c: u8, t: u8, next: u8, wake: Wake) {
    let lane = &mut s.thread_mut(c, cfg.holder(c, next)).lane;
    if lane.taken == Some(Taker::Releaser(t)) {
        lane.taken = None;
    }
    pubsub::settle_reservation(s, c, next, wake);
}

/// What a reply means (`Engine::released`).
#[allow(clippy::too_many_arguments)]
fn released(
    cfg: &Config,
    s: &mut State,
    c: u8,
    t: u8,
    rel: &mut Rel,
    successor: Option<u8>,
    code: Option<i64>,
    token: Option<i64>,
) -> Flow {
    if let Some(next) = successor {
        let wake = if code == Some(2) {
            if !cfg.mutated(ClientMutation::WaiterRecordsHandedHold) {
                // Recorded now, under the successor's turn, as Redis
                // counts it (a148de8): a re-entry by another thread of
                // the same owner before the waiter wakes is one more hold
                // of it.
                let to = cfg.holder(c, next);
                super::fencing::granted(s, c, to, token);
                holds::add_handed(cfg, s, (c, to), token);
            }
            Wake::HandedOver(token)
        } else {
            Wake::Unsettled
        };
        end_reservation(cfg, s, c, t, next, wake);
    }
    let h = cfg.holder(c, t);
    let not_held = code.is_none() && !cfg.mutated(ClientMutation::NotHeldIsOk);
    let ok = !(not_held || code == Some(3));
    if !ok && rel.gen_live {
        // Redis had no hold of ours: the generation's guards are stale.
        holds::mark_lost(s, c, h);
    }
    // A late hold whose undo a cut lost may stand in the field (a
    // documented limit): excused.
    let leaked = rel.leaked || s.thread(c, h).ghost.leak_excused;
    if ok && rel.mode == ReleaseMode::Unlock && rel.foreign && !leaked {
        s.broken.ok_after_intrusion = true;
    }
    // Other releases of the field still to run (another thread of an
    // owner may have left one on the lane).
    let releases = s
        .thread(c, h)
        .lane
        .entries
        .iter()
        .filter(|e| matches!(e, Entry::Release(_) | Entry::Shared { .. }))
        .count();
    if code == Some(0) && !rel.gen_live && cfg.kind.renewed_as_hash() && releases == 0 {
        // The generation's last hold, yet Redis counts more: holds no
        // guard stands for, given back within the same deadline.
        return give_back(cfg, s, c, h, rel, MAX_UNGUARDED - 1);
    }
    Flow::End
}

/// Holds given back after a generation's last release, at most (the
/// library's `MAX_ORPHANS_RELEASED`, 8).
const MAX_UNGUARDED: u8 = 2;

/// One give-back (`give_back_request`) of field `h`'s holds, with `more`
/// after it at most.
fn give_back(cfg: &Config, s: &mut State, c: u8, h: u8, rel: &mut Rel, more: u8) -> Flow {
    let id = s.fresh_id();
    if rel.left == 0 {
        // No time left: what remains goes on from the worker, unsent.
        if more > 0 {
            let p = retry::pending(cfg, None, id, Purpose::Unguarded { more }, 0);
            retry::push(s, c, h, Entry::Release(p));
        }
        return Flow::End;
    }
    let send = retry::first(cfg, s, (c, h), id, None);
    rel.at = RelAt::GiveBack { more, send };
    Flow::Block
}
