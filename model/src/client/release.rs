//! A release of one hold (`engine/release.rs`, `Engine::release`): the
//! hold forgotten first, the lane's turn and settle within the deadline
//! (a drop's one response timeout, an unlock's retry bound), a successor
//! reserved for a direct hand-over, the release sent, its reply read
//! (`released`), holds no guard stands for given back
//! (`engine/unguarded.rs`), and what stays unconfirmed left to the lane.

use super::acquire::Flow;
use super::config::{Config, Kind, ReleaseMode};
use super::holds;
use super::job::{Job, Rel, RelAt, RelSend, Settle, Wake};
use super::mutation::ClientMutation;
use super::retry::{self, Progress};
use super::settle::{settle, Settled, Settler};
use super::state::{Entry, Purpose, State, Taker};
use super::{pubsub, wait};

/// Begins thread `(c, t)`'s release of one of its holds.
pub fn begin(cfg: &Config, s: &mut State, c: u8, t: u8, mode: ReleaseMode) {
    let thread = s.thread(c, t);
    let foreign = thread.ghost.intruded;
    let leaked = foreign && thread.ghost.leak_excused;
    let gen_left = thread.gen.map_or(0, |g| g.left);
    let gen_live = holds::release_one(s, c, t);
    let id = s.fresh_id();
    let left = match mode {
        ReleaseMode::Drop => 1,
        ReleaseMode::Unlock => cfg.retry_window(),
    };
    s.thread_mut(c, t).job = Job::Release(Rel {
        mode,
        id,
        gen_live,
        foreign,
        leaked,
        left,
        // The longest TTL the hold may have, and the slack.
        certain: gen_left.max(cfg.watchdog) + 2,
        at: RelAt::Turn,
    });
    go(cfg, s, c, t);
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
                let lane = &mut s.thread_mut(c, t).lane;
                if lane.taken == Some(Taker::Own) {
                    lane.taken = None;
                }
                return;
            }
        }
    }
}

fn advance(cfg: &Config, s: &mut State, c: u8, t: u8, rel: &mut Rel) -> Flow {
    match rel.at.clone() {
        RelAt::Turn => {
            let lane = &mut s.thread_mut(c, t).lane;
            if lane.taken.is_none() {
                lane.taken = Some(Taker::Own);
                if cfg.mutated(ClientMutation::ReleaseSkipsUndos) {
                    return send(cfg, s, c, t, rel);
                }
                rel.at = RelAt::Settle(Settle::within(rel.left));
                return Flow::Continue;
            }
            if rel.left > 0 {
                return Flow::Block;
            }
            // The turn is not free by the deadline: the release goes on,
            // unsent, from the worker.
            to_worker(cfg, s, c, t, rel, None);
            Flow::End
        }
        RelAt::Settle(mut st) => match settle(cfg, s, c, t, &mut st, Settler::Release) {
            Settled::Blocked => {
                rel.at = RelAt::Settle(st);
                Flow::Block
            }
            Settled::NotYet => {
                to_worker(cfg, s, c, t, rel, None);
                Flow::End
            }
            Settled::Done => send(cfg, s, c, t, rel),
        },
        RelAt::Sent {
            mut send,
            successor,
        } => {
            match retry::progress(cfg, s, (c, t), &mut send, successor, rel.left == 0) {
                Progress::Waiting => {
                    rel.at = RelAt::Sent { send, successor };
                    Flow::Block
                }
                Progress::Answered(code, token) => {
                    released(cfg, s, c, t, rel, successor, code, token)
                }
                Progress::Unconfirmed => {
                    to_worker(cfg, s, c, t, rel, Some(&send));
                    if let Some(next) = successor {
                        // It may still hand the lock over: that lane waits too.
                        retry::push(
                            s,
                            c,
                            next,
                            Entry::Shared {
                                lane: t,
                                id: send.id,
                            },
                        );
                        end_reservation(s, c, t, next, Wake::Unsettled);
                    }
                    Flow::End
                }
            }
        }
        RelAt::GiveBack { more, mut send } => {
            match retry::progress(cfg, s, (c, t), &mut send, None, rel.left == 0) {
                Progress::Waiting => {
                    rel.at = RelAt::GiveBack { more, send };
                    Flow::Block
                }
                Progress::Answered(Some(0), _) if more > 0 => {
                    give_back(cfg, s, c, t, rel, more - 1)
                }
                Progress::Answered(Some(0), _) => {
                    // The model's bound on give-backs (the library's is 8).
                    holds::excuse_leak(s, c, t);
                    Flow::End
                }
                Progress::Answered(..) => Flow::End,
                Progress::Unconfirmed => {
                    let p =
                        retry::pending(cfg, Some(&send), send.id, Purpose::Unguarded { more }, 0);
                    retry::push(s, c, t, Entry::Release(p));
                    Flow::End
                }
            }
        }
    }
}

/// Leaves the release to the lane (`hand_to_worker`, or the sent entry
/// `turn.push`); the caller is told it goes on (a drop returns, an unlock
/// says `ReleaseUnconfirmed`).
fn to_worker(cfg: &Config, s: &mut State, c: u8, t: u8, rel: &Rel, sent: Option<&RelSend>) {
    let purpose = Purpose::Guard { live: rel.gen_live };
    let p = retry::pending(cfg, sent, rel.id, purpose, rel.certain);
    retry::push(s, c, t, Entry::Release(p));
}

/// Reserves a successor (`release.rs`, `successor`) and sends the release.
fn send(cfg: &Config, s: &mut State, c: u8, t: u8, rel: &mut Rel) -> Flow {
    let successor = successor(cfg, s, c, t, rel);
    let send = retry::first(cfg, s, (c, t), rel.id, successor);
    rel.at = RelAt::Sent { send, successor };
    Flow::Block
}

/// A parked thread of this client to hand the lock to, when this release
/// is the generation's last, with the turn on its lane: only while that
/// lane keeps nothing and nobody sends on it (`take_quiet`); else the
/// reservation is dropped and the waiter tries itself.
fn successor(cfg: &Config, s: &mut State, c: u8, t: u8, rel: &Rel) -> Option<u8> {
    if rel.gen_live || cfg.kind == Kind::Spin {
        return None;
    }
    let n = s.clients[usize::from(c)].threads.len() as u8;
    let next = (0..n).find(|&o| o != t && wait::is_waiting(s, c, o))?;
    let lane = &s.thread(c, next).lane;
    if lane.taken.is_some() || !lane.entries.is_empty() {
        // Reserved, then dropped: the waiter wakes and tries itself.
        reserve(s, c, next);
        pubsub::settle_reservation(s, c, next, Wake::Unsettled);
        return None;
    }
    s.thread_mut(c, next).lane.taken = Some(Taker::Releaser(t));
    reserve(s, c, next);
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
fn end_reservation(s: &mut State, c: u8, t: u8, next: u8, wake: Wake) {
    let lane = &mut s.thread_mut(c, next).lane;
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
            Wake::HandedOver(token)
        } else {
            Wake::Unsettled
        };
        end_reservation(s, c, t, next, wake);
    }
    let not_held = code.is_none() && !cfg.mutated(ClientMutation::NotHeldIsOk);
    let ok = !(not_held || code == Some(3));
    if !ok && rel.gen_live {
        // Redis had no hold of ours: the generation's guards are stale.
        holds::mark_lost(s, c, t);
    }
    // A late hold whose undo a cut lost may stand in the field (a
    // documented limit): excused.
    let leaked = rel.leaked || s.thread(c, t).ghost.leak_excused;
    if ok && rel.mode == ReleaseMode::Unlock && rel.foreign && !leaked {
        s.broken.ok_after_intrusion = true;
    }
    if code == Some(0) && !rel.gen_live {
        // The generation's last hold, yet Redis counts more: holds no
        // guard stands for, given back within the same deadline.
        return give_back(cfg, s, c, t, rel, MAX_UNGUARDED - 1);
    }
    Flow::End
}

/// Holds given back after a generation's last release, at most (the
/// library's `MAX_ORPHANS_RELEASED`, 8).
const MAX_UNGUARDED: u8 = 2;

/// One give-back (`give_back_request`) with `more` after it at most.
fn give_back(cfg: &Config, s: &mut State, c: u8, t: u8, rel: &mut Rel, more: u8) -> Flow {
    let id = s.fresh_id();
    if rel.left == 0 {
        // No time left: what remains goes on from the worker, unsent.
        if more > 0 {
            let p = retry::pending(cfg, None, id, Purpose::Unguarded { more }, 0);
            retry::push(s, c, t, Entry::Release(p));
        }
        return Flow::End;
    }
    let send = retry::first(cfg, s, (c, t), id, None);
    rel.at = RelAt::GiveBack { more, send };
    Flow::Block
}
