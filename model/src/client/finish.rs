//! The end of an acquire call (`engine/finish.rs`, `Call::finish`): one
//! last step on the lane, taken without deadline, that settles what it
//! can, looks at the holds Redis counts when the last attempt's outcome is
//! unknown and not late (`settle_unsure`), and writes an undo behind every
//! attempt whose reply never came (`undo_late`, `undo_behind`): the kind's
//! release `above:N`, N the holds the guards stand for plus one per
//! release still on the lane, on the attempt's own connection.

use super::acquire::{Flow, MAX_ORPHANS};
use super::config::Config;
use super::holds;
use super::job::{Call, CallAt, Outcome, Send, Settle};
use super::mutation::ClientMutation;
use super::retry::{self, Progress};
use super::server::{take_reply, Read};
use super::settle::{settle, Settled, Settler};
use super::state::{Answer, Entry, Purpose, Request, State, Taker};

/// The call's outcome is known: whether it needs its last step.
pub fn begin(_cfg: &Config, _s: &mut State, _c: u8, _t: u8, call: &mut Call) -> Flow {
    let outcome = call.result.expect("decided");
    let leave_queue = call.waits && outcome != Outcome::Got;
    let unsure = outcome == Outcome::Failed && call.unsure;
    if !(leave_queue || unsure || !call.late.is_empty()) {
        return Flow::End;
    }
    call.at = CallAt::FinishTurn;
    Flow::Continue
}

/// One move of the call's end.
pub fn advance(cfg: &Config, s: &mut State, c: u8, t: u8, call: &mut Call) -> Flow {
    // The field, lane and renewal record it acts for.
    let h = cfg.holder(c, t);
    match call.at.clone() {
        CallAt::FinishTurn => {
            // The call's own: the lane it keeps for its late attempts.
            let lane = &mut s.thread_mut(c, h).lane;
            if !super::acquire::step_may_take(lane, t) {
                return Flow::Block;
            }
            lane.taken = Some(Taker::Thread(t));
            call.at = CallAt::FinishSettle(Settle::within(1));
            Flow::Continue
        }
        CallAt::FinishSettle(mut st) => {
            let settled = match settle(cfg, s, c, h, &mut st, Settler::Finish) {
                Settled::Blocked => {
                    call.at = CallAt::FinishSettle(st);
                    return Flow::Block;
                }
                Settled::Done => true,
                Settled::NotYet => false,
            };
            let unsure = call.result == Some(Outcome::Failed) && call.unsure;
            if unsure && !settled {
                // No look without the lane settled: a hold the attempt may
                // have taken expires after its lease (a documented limit).
                holds::excuse_leak(s, c, h);
            }
            if unsure && settled && !call.unsure_is_late {
                // One look, on a fresh connection, at what Redis counts.
                call.unsure = false;
                let wire = s.open(c, Request::Look(h));
                call.at = CallAt::FinishLook(Send::on(wire, cfg.retries));
                return Flow::Block;
            }
            undo_late(cfg, s, c, t, call)
        }
        CallAt::FinishLook(out) => match take_reply(s, out.wire, out.expired) {
            Read::Waiting => Flow::Block,
            Read::Reply(Answer::Count(n)) => {
                let here = holds::counted(cfg, s, c, h);
                let n = n.clamp(0, 255) as u8;
                let extra = if n < here {
                    // The guards' holds are gone: what Redis has is this
                    // call's, and none has a guard.
                    holds::mark_lost(s, c, h);
                    n
                } else {
                    n - here
                };
                if extra == 0 {
                    return undo_late(cfg, s, c, t, call);
                }
                if extra > MAX_ORPHANS {
                    holds::excuse_leak(s, c, h);
                }
                let id = s.fresh_id();
                let send = retry::first(cfg, s, (c, h), id, None);
                call.at = CallAt::FinishGiveBack {
                    left: extra.min(MAX_ORPHANS) - 1,
                    send,
                };
                Flow::Block
            }
            Read::Reply(other) => unreachable!("a look replied {other:?}"),
            Read::Failed if out.tries_left > 0 => {
                let wire = s.open(c, Request::Look(h));
                call.at = CallAt::FinishLook(Send::on(wire, out.tries_left - 1));
                Flow::Block
            }
            Read::Failed | Read::TimedOut => {
                // The look failed too: a hold the attempt may have taken
                // expires after its lease, renewed by nobody (a documented
                // limit, `docs/reliability.md`'s honest limits).
                holds::excuse_leak(s, c, h);
                undo_late(cfg, s, c, t, call)
            }
        },
        CallAt::FinishGiveBack { left, mut send } => {
            match retry::progress(cfg, s, (c, h), &mut send, None, false) {
                Progress::Waiting => {
                    call.at = CallAt::FinishGiveBack { left, send };
                    Flow::Block
                }
                Progress::Answered(..) if left > 0 => {
                    let id = s.fresh_id();
                    let send = retry::first(cfg, s, (c, h), id, None);
                    call.at = CallAt::FinishGiveBack {
                        left: left - 1,
                        send,
                    };
                    Flow::Block
                }
                Progress::Answered(..) => undo_late(cfg, s, c, t, call),
                Progress::Unconfirmed => {
                    let p = retry::pending(
                        cfg,
                        Some(&send),
                        send.id,
                        Purpose::Unguarded { more: 0 },
                        0,
                    );
                    retry::push(s, c, h, Entry::Release(p));
                    if left > 0 {
                        // Best effort: the rest expire after their lease.
                        holds::excuse_leak(s, c, h);
                    }
                    undo_late(cfg, s, c, t, call)
                }
            }
        }
        other => unreachable!("not an end: {other:?}"),
    }
}

/// Writes an undo behind each late attempt (`Call::undo_late`), lets
/// other calls' steps send again, gives back the turn: the call is over.
///
/// Attempts cut before their reply since the call's last answer
/// (`LateRequests::cut_since_answer`) may each hold one more: the last
/// late attempt's undo gives back that many more, under the same
/// condition (`undo_behind`: `1 + cut` releases `above:N` on the last
/// connection).
fn undo_late(cfg: &Config, s: &mut State, c: u8, t: u8, call: &mut Call) -> Flow {
    let h = cfg.holder(c, t);
    let late = std::mem::take(&mut call.late);
    let cut = if cfg.mutated(ClientMutation::UndoIgnoresCutAttempts) {
        0
    } else {
        std::mem::take(&mut call.cut)
    };
    if !late.is_empty()
        && holds::leased(cfg, c, h)
        && !cfg.mutated(ClientMutation::LateAttemptLeaseNotCounted)
    {
        // A late attempt that re-enters a hold of the thread's sets the
        // key's TTL when it runs, up to its undo's keep time
        // (`RenewalMap::late_attempts_may_reach`).
        let reaches =
            cfg.latch_ticks() + cfg.lease_ticks(cfg.clients[usize::from(c)][usize::from(h)]);
        if let Some(gen) = &mut s.thread_mut(c, h).gen {
            gen.may_last = gen.may_last.max(reaches);
        }
    }
    if !late.is_empty() && !cfg.mutated(ClientMutation::NoUndoBehindLate) {
        let lane = &s.thread(c, h).lane;
        let pending = lane
            .entries
            .iter()
            .filter(|e| matches!(e, Entry::Release(_) | Entry::Shared { .. }))
            .count() as u8;
        let above = holds::counted(cfg, s, c, h) + pending;
        let last = late.len() - 1;
        for (n, wire) in late.into_iter().enumerate() {
            let releases = if n == last { 1 + cut } else { 1 };
            if s.wire(wire).cut {
                // It cannot follow (`Trailing::follow` fails with the
                // connection's error, not a timeout): the late request ran
                // or never will, and the undo is kept as one whose
                // connection failed (`Trailing::unwritten`, 3fc6f44), so
                // that its first settle sends it on another connection.
                if !cfg.mutated(ClientMutation::UndoNotWrittenLost) {
                    super::undo::unwritten(cfg, s, c, h, above, releases);
                }
                continue;
            }
            super::undo::follow(cfg, s, c, h, wire, above, releases);
        }
    }
    // Other calls' steps may send again (`Turn::late_undone`: only the
    // call that keeps the lane frees it).
    let lane = &mut s.thread_mut(c, h).lane;
    if lane.late_call == Some(t) {
        lane.late_call = None;
    }
    if lane.taken == Some(Taker::Thread(t)) {
        lane.taken = None;
    }
    Flow::End
}
