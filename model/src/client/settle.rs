//! Settling a lane (`lane/one.rs`, `Lane::settle`; `lane/entry.rs`;
//! `lane/pending.rs`, `PendingRelease::attempt`): the entries in order,
//! one attempt each, until all are settled or one is not ready by the
//! deadline (the end of the tick the step began in). An undo's attempt is
//! [`super::undo`]'s.

use super::config::Config;
use super::job::{Send, Settle};
use super::mutation::ClientMutation;
use super::requests::{release_call, resend};
use super::server::{take_reply, Read};
use super::state::{Answer, Entry, Pending, Purpose, State};
use super::undo::{settle_undo, Undone};
use super::{events, holds};
use crate::call::Attempt;

/// How many holds no guard stands for a background release gives back
/// after its own (`MORE_UNGUARDED`, 7 in the library).
pub const MORE_UNGUARDED: u8 = 1;

/// Who settles: a step of the thread, a release, the end of a call, or
/// the worker (the mutations of the Safety IV classes tell them apart).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Settler {
    /// An acquire attempt's step.
    Step,
    /// A release.
    Release,
    /// The end of an acquire call.
    Finish,
    /// The release worker.
    Worker,
}

/// Where a settle stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Settled {
    /// Waiting for a reply.
    Blocked,
    /// Every entry is settled.
    Done,
    /// An entry is not ready by the deadline (an outage's error).
    NotYet,
}

/// What one attempt at an entry found.
enum Try {
    Settled,
    Again,
    NotYet,
    Blocked,
}

/// Settles lane `lane` of client `c` as far as it can now.
pub fn settle(
    cfg: &Config,
    s: &mut State,
    c: u8,
    lane: u8,
    st: &mut Settle,
    who: Settler,
) -> Settled {
    let mut skip = 0;
    loop {
        let entries = &s.thread(c, lane).lane.entries;
        let Some(entry) = entries.get(skip).cloned() else {
            return Settled::Done;
        };
        // The releases the lane keeps besides this one (`Lane::settle`).
        let is_release = |e: &Entry| matches!(e, Entry::Release(_) | Entry::Shared { .. });
        let others =
            entries.iter().filter(|e| is_release(e)).count() as u8 - u8::from(is_release(&entry));
        let tried = match entry {
            Entry::Undo { .. } => match settle_undo(cfg, s, c, (lane, skip), st, who) {
                Undone::Settled => Try::Settled,
                Undone::NotYet => Try::NotYet,
                Undone::Blocked => Try::Blocked,
                Undone::Skip => {
                    skip += 1;
                    continue;
                }
            },
            Entry::Release(_) => attempt(cfg, s, c, (lane, skip), others, st, who),
            Entry::Shared { lane: owner, id } => {
                match find(s, c, owner, id) {
                    Some(at) => attempt(cfg, s, c, (owner, at), others, st, who),
                    // Settled from its own lane.
                    None => Try::Settled,
                }
            }
        };
        match tried {
            Try::Settled => {
                st.out = None;
                let entries = &mut s.thread_mut(c, lane).lane.entries;
                let gone = entries.remove(skip);
                if let Entry::Shared { lane: owner, id } = gone {
                    if let Some(at) = find(s, c, owner, id) {
                        if let Entry::Release(p) = &mut s.thread_mut(c, owner).lane.entries[at] {
                            p.done = true;
                        }
                    }
                }
            }
            Try::Again => st.out = None,
            Try::NotYet => return Settled::NotYet,
            Try::Blocked => return Settled::Blocked,
        }
    }
}

/// Where the pending release `id` sits in lane `owner`, if still there.
fn find(s: &State, c: u8, owner: u8, id: u16) -> Option<usize> {
    s.thread(c, owner)
        .lane
        .entries
        .iter()
        .position(|e| matches!(e, Entry::Release(p) if p.id == id))
}

/// One attempt of the pending release at `lane`'s entry `at`
/// (`PendingRelease::attempt`), `others` releases kept besides it.
fn attempt(
    cfg: &Config,
    s: &mut State,
    c: u8,
    (lane, at): (u8, usize),
    others: u8,
    st: &mut Settle,
    who: Settler,
) -> Try {
    let Entry::Release(mut p) = s.thread(c, lane).lane.entries[at] else {
        unreachable!("a pending release")
    };
    if p.done {
        return Try::Settled;
    }
    let tried = match st.out {
        Some(out) => awaited(cfg, s, c, (lane, others), &mut p, out, st),
        None => first_look(cfg, s, c, lane, &mut p, st, who),
    };
    if let Entry::Release(slot) = &mut s.thread_mut(c, lane).lane.entries[at] {
        *slot = p;
    }
    tried
}

/// The checks before an attempt is sent (`attempt_once`), and the send.
fn first_look(
    cfg: &Config,
    s: &mut State,
    c: u8,
    lane: u8,
    p: &mut Pending,
    st: &mut Settle,
    who: Settler,
) -> Try {
    let heedless = cfg.mutated(ClientMutation::WorkerIgnoresLatch);
    match p.alive {
        // No copy can run any more: its outcome stays unknown, and a hold
        // it did not release is one Redis counts beyond the guards.
        Some(0) if !heedless => {
            s.events |= events::ABANDONED;
            holds::excuse_leak(s, c, lane);
            return Try::Settled;
        }
        // Sent now, it (or the pool's retries of it, until the settle's
        // deadline) could arrive after its latch is gone.
        Some(alive) if alive <= st.left && !heedless => {
            if who == Settler::Step && cfg.mutated(ClientMutation::SettleTakesReleaseOnItsWay) {
                return Try::Settled;
            }
            return Try::NotYet;
        }
        Some(_) => {}
        None => {
            let live = matches!(p.purpose, Purpose::Guard { live: true });
            if matches!(p.purpose, Purpose::Guard { .. }) && !live && p.certain == 0 {
                holds::excuse_leak(s, c, lane);
                return Try::Settled;
            }
            p.alive = Some(cfg.latch_ticks());
            p.certain = 0;
        }
    }
    if st.expired {
        // No time left before the deadline: the pool sends nothing.
        return Try::NotYet;
    }
    let word = if p.attempts == 0 {
        Attempt::First
    } else {
        Attempt::Retry
    };
    p.attempts = (p.attempts + 1).min(2);
    let wire = s.open(c, release_call(cfg, c, lane, p.id, word, None));
    st.out = Some(Send::on(wire, cfg.retries));
    Try::Blocked
}

/// The attempt out: its reply, its connection's failure or its timeout.
fn awaited(
    cfg: &Config,
    s: &mut State,
    c: u8,
    (lane, others): (u8, u8),
    p: &mut Pending,
    out: Send,
    st: &mut Settle,
) -> Try {
    match take_reply(s, out.wire, out.expired) {
        Read::Reply(Answer::Released { code, .. }) => answered(cfg, s, (c, lane), others, p, code),
        Read::Reply(other) => unreachable!("a release replied {other:?}"),
        Read::Failed | Read::TimedOut if out.tries_left > 0 && !st.expired => {
            p.attempts = 2;
            st.out = Some(resend(cfg, s, (c, lane), p.id, None, Attempt::Retry, out));
            Try::Blocked
        }
        Read::Failed | Read::TimedOut => {
            st.out = None;
            Try::NotYet
        }
        Read::Waiting => Try::Blocked,
    }
}

/// What a reply means (`PendingRelease::answered`), `others` releases of
/// the field still to run after it.
fn answered(
    cfg: &Config,
    s: &mut State,
    (c, lane): (u8, u8),
    others: u8,
    p: &mut Pending,
    code: Option<i64>,
) -> Try {
    const HOLDS_REMAIN: Option<i64> = Some(0);
    let not_held = code.is_none() && !cfg.mutated(ClientMutation::NotHeldIsOk);
    match p.purpose {
        Purpose::Guard { live } if not_held || code == Some(3) => {
            if live {
                holds::mark_lost(s, c, lane);
            }
            Try::Settled
        }
        Purpose::Guard { live: false }
            if code == HOLDS_REMAIN
                && others == 0
                && cfg.kind.renewed_as_hash()
                && holds::counted(cfg, s, c, lane) == 0 =>
        {
            p.purpose = Purpose::Unguarded {
                more: MORE_UNGUARDED,
            };
            answered(cfg, s, (c, lane), others, p, code)
        }
        Purpose::Unguarded { more }
            if more > 0
                && code == HOLDS_REMAIN
                && others == 0
                && holds::counted(cfg, s, c, lane) == 0 =>
        {
            let old = p.id;
            p.id = s.fresh_id();
            p.attempts = 0;
            p.alive = None;
            p.purpose = Purpose::Unguarded { more: more - 1 };
            relink(s, c, lane, old, p.id);
            Try::Again
        }
        Purpose::Unguarded { .. } if code == HOLDS_REMAIN && others == 0 => {
            // More holds than the guards' may remain: the model's bound on
            // give-backs was reached (the library's is 7), or guards hold
            // the lock, whose last release gives them back.
            holds::excuse_leak(s, c, lane);
            Try::Settled
        }
        _ => Try::Settled,
    }
}

/// Shared entries that name `old` in lane `owner` name `new` now.
fn relink(s: &mut State, c: u8, owner: u8, old: u16, new: u16) {
    for thread in &mut s.clients[usize::from(c)].threads {
        for entry in &mut thread.lane.entries {
            if let Entry::Shared { lane, id } = entry {
                if *lane == owner && *id == old {
                    *id = new;
                }
            }
        }
    }
}
