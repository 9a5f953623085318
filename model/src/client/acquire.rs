//! An acquire call's steps (`engine/attempt.rs`, `try_acquire`): the
//! lane's turn and settle, the acquire sent (a re-entry only while the
//! thread counts holds), the pool's retries, late attempts kept for their
//! undo, the hold recorded and the holds counted twice given back.

use super::config::Config;
use super::holds;
use super::job::{AcquireSent, Call, CallAt, Job, Outcome, Send, Settle};
use super::mutation::ClientMutation;
use super::requests::acquire_call;
use super::retry::{self, Progress};
use super::server::{take_reply, Read};
use super::settle::{settle, Settled, Settler};
use super::state::{Answer, Entry, Purpose, State, Taker};
use super::{finish, wait};

/// The most holds counted twice given back after one acquire
/// (`MAX_ORPHANS_RELEASED`, 8 in the library).
pub const MAX_ORPHANS: u8 = 2;

/// What a call does after one move.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flow {
    /// It moved on and may move again at once.
    Continue,
    /// It waits for something outside itself.
    Block,
    /// The call is over.
    End,
}

/// Runs thread `(c, t)`'s acquire call until it waits or ends.
pub fn go(cfg: &Config, s: &mut State, c: u8, t: u8) {
    let job = std::mem::replace(&mut s.thread_mut(c, t).job, Job::Idle);
    let Job::Acquire(mut call) = job else {
        s.thread_mut(c, t).job = job;
        return;
    };
    loop {
        match advance(cfg, s, c, t, &mut call) {
            Flow::Continue => {}
            Flow::Block => {
                s.thread_mut(c, t).job = Job::Acquire(call);
                return;
            }
            Flow::End => return,
        }
    }
}

fn advance(cfg: &Config, s: &mut State, c: u8, t: u8, call: &mut Call) -> Flow {
    // The field, lane and renewal record it acts for.
    let h = cfg.holder(c, t);
    match call.at.clone() {
        CallAt::Step => {
            if call.joined {
                // The take mark, before each attempt of the contended
                // path (`engine/wait.rs`: `take_mark` before `try_acquire`).
                call.taken_since_mark = false;
            }
            if call.waits && !call.joined && call.first_busy.is_none() {
                // The quiet mark, taken before the first try is sent, only
                // while the client listens on the channel already.
                if s.clients[usize::from(c)].subscribed {
                    call.first_busy = Some((0, true));
                }
            }
            take_turn(cfg, s, c, t, call, false)
        }
        CallAt::StepTurn { expired } => take_turn(cfg, s, c, t, call, expired),
        CallAt::StepSettle(mut st) => match settle(cfg, s, c, h, &mut st, Settler::Step) {
            Settled::Blocked => {
                call.at = CallAt::StepSettle(st);
                Flow::Block
            }
            Settled::NotYet => {
                give_back_turn(cfg, s, c, t);
                wait::after_error(cfg, s, c, t, call)
            }
            Settled::Done => {
                let expired_at_start =
                    holds::leased(cfg, c, h) && s.thread(c, h).gen.is_some_and(|g| g.may_last == 0);
                if expired_at_start {
                    if !cfg.mutated(ClientMutation::ExpiredGenerationOutlivesAcquire) {
                        // A generation whose leases all ran out ends before
                        // the acquire is sent, however the call ends
                        // (`RenewalMap::before_acquire`).
                        holds::mark_lost(s, c, h);
                    }
                } else if holds::leased(cfg, c, h)
                    && !cfg.mutated(ClientMutation::ReentryLeaseNotExtended)
                {
                    // A re-entry sets the key's TTL whether or not the call
                    // keeps its hold: the generation lasts at least as long
                    // (`RenewalMap::before_acquire`).
                    let lease = cfg.lease_ticks(cfg.clients[usize::from(c)][usize::from(h)]);
                    if let Some(gen) = &mut s.thread_mut(c, h).gen {
                        gen.may_last = gen.may_last.max(lease);
                    }
                }
                let holds_here =
                    holds::counted(cfg, s, c, h) > 0 && !cfg.mutated(ClientMutation::NoReentryFlag);
                let sent = AcquireSent {
                    holds_here,
                    expired_at_start,
                    started_ago: 0,
                    kept: false,
                };
                send(cfg, s, c, t, call, sent, cfg.retries)
            }
        },
        CallAt::Sent(out, sent) => reply(cfg, s, c, t, call, out, sent),
        CallAt::Orphans { left, mut send } => {
            match retry::progress(cfg, s, (c, h), &mut send, None, false) {
                Progress::Waiting => {
                    call.at = CallAt::Orphans { left, send };
                    Flow::Block
                }
                Progress::Answered(..) if left > 0 => {
                    let id = s.fresh_id();
                    let send = retry::first(cfg, s, (c, h), id, None);
                    call.at = CallAt::Orphans {
                        left: left - 1,
                        send,
                    };
                    Flow::Block
                }
                Progress::Answered(..) => got(cfg, s, c, t, call),
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
                        // Best effort (`release_orphans`): the rest stay
                        // until the generation's last release gives them
                        // back.
                        holds::excuse_leak(s, c, h);
                    }
                    got(cfg, s, c, t, call)
                }
            }
        }
        CallAt::Unsynced { mut settle, id } => {
            if super::unreplicated::advance(cfg, s, (c, h), &mut settle, id) {
                return unsynced(cfg, s, c, t, call);
            }
            call.at = CallAt::Unsynced { settle, id };
            Flow::Block
        }
        CallAt::Join => wait::join(cfg, s, c, t, call),
        CallAt::Parked(park) => wait::parked(cfg, s, c, t, call, park),
        CallAt::FinishTurn
        | CallAt::FinishSettle(_)
        | CallAt::FinishLook(_)
        | CallAt::FinishGiveBack { .. } => finish::advance(cfg, s, c, t, call),
    }
}

/// The step's turn on the lane of the field it acts for (`Lanes::enter`,
/// `Lane::take_turn`): taken when free and no other call keeps the lane
/// for its late attempts, else waited for until the tick ends.
fn take_turn(cfg: &Config, s: &mut State, c: u8, t: u8, call: &mut Call, expired: bool) -> Flow {
    let lane = &mut s.thread_mut(c, cfg.holder(c, t)).lane;
    if step_may_take(lane, t) {
        lane.taken = Some(Taker::Thread(t));
        call.at = CallAt::StepSettle(Settle::within(1));
        return Flow::Continue;
    }
    if expired {
        // Someone else sends on the lane past the step's deadline: it
        // fails like an outage.
        return wait::after_error(cfg, s, c, t, call);
    }
    call.at = CallAt::StepTurn { expired: false };
    Flow::Block
}

/// Whether a step of thread `t`'s call may take `lane`'s turn now.
pub fn step_may_take(lane: &super::state::Lane, t: u8) -> bool {
    lane.taken.is_none() && lane.late_call.is_none_or(|l| l == t)
}

/// Gives back thread `t`'s turn on the lane it acts for.
pub fn give_back_turn(cfg: &Config, s: &mut State, c: u8, t: u8) {
    let lane = &mut s.thread_mut(c, cfg.holder(c, t)).lane;
    if lane.taken == Some(Taker::Thread(t)) {
        lane.taken = None;
    }
}

fn send(
    cfg: &Config,
    s: &mut State,
    c: u8,
    t: u8,
    call: &mut Call,
    sent: AcquireSent,
    tries: u8,
) -> Flow {
    let wire = s.open(c, acquire_call(cfg, c, t, sent.holds_here));
    call.at = CallAt::Sent(Send::on(wire, tries), sent);
    Flow::Block
}

/// The acquire's reply, failure or timeout (`send_acquire`, the pool).
fn reply(
    cfg: &Config,
    s: &mut State,
    c: u8,
    t: u8,
    call: &mut Call,
    out: Send,
    mut sent: AcquireSent,
) -> Flow {
    let h = cfg.holder(c, t);
    let answer = match take_reply(s, out.wire, out.expired) {
        Read::Waiting => return Flow::Block,
        Read::Reply(answer) => answer,
        failed => {
            // A reply not read whole may hide a script that ran.
            call.unsure = true;
            if failed == Read::TimedOut {
                // Kept open: its undo will follow it (`late.rs`).
                call.late.push(out.wire);
                sent.kept = true;
            } else {
                // Cut before its reply: it may have run, and only a later
                // answer counts what it took (`Pool::run_once`,
                // `LateRequests::cut`).
                call.cut = (call.cut + 1).min(2);
            }
            if out.tries_left > 0 {
                return send(cfg, s, c, t, call, sent, out.tries_left - 1);
            }
            call.unsure_is_late = sent.kept;
            keep_for_late_call(cfg, s, c, t, call);
            give_back_turn(cfg, s, c, t);
            return wait::after_error(cfg, s, c, t, call);
        }
    };
    call.unsure = false;
    call.unsure_is_late = false;
    // An answer counts what the cut attempts took (`LateRequests::answered`).
    call.cut = 0;
    if answer == Answer::HoldsGone && sent.holds_here {
        // The holds counted here are gone: their generation ends, and a
        // second request takes the lock anew. Releases of those holds
        // left unsent by another thread of an owner have nothing to
        // release now (`Turn::drop_unsent_releases`).
        holds::mark_lost(s, c, h);
        s.thread_mut(c, h)
            .lane
            .entries
            .retain(|e| !matches!(e, Entry::Release(p) if p.alive.is_none()));
        let again = AcquireSent {
            holds_here: false,
            expired_at_start: false,
            kept: false,
            ..sent
        };
        return send(cfg, s, c, t, call, again, cfg.retries);
    }
    keep_for_late_call(cfg, s, c, t, call);
    match answer {
        Answer::Took {
            holds: count,
            token,
        } => {
            super::fencing::granted(s, c, h, token);
            // Redis still counts the holds of releases on the lane not
            // sent yet (a drop that found the lane busy, another thread of
            // an owner's): no guard's any more, nor counted twice
            // (`Call::hold`, `Turn::with_state`).
            let unsent = s
                .thread(c, h)
                .lane
                .entries
                .iter()
                .filter(|e| matches!(e, Entry::Release(p) if p.alive.is_none()))
                .count() as u8;
            let orphans = holds::add(
                cfg,
                s,
                (c, h),
                count.saturating_sub(unsent),
                sent.started_ago,
                sent.expired_at_start,
                token,
            );
            if orphans == 0 {
                return got(cfg, s, c, t, call);
            }
            if orphans > MAX_ORPHANS {
                holds::excuse_leak(s, c, h);
            }
            let id = s.fresh_id();
            let send = retry::first(cfg, s, (c, h), id, None);
            call.at = CallAt::Orphans {
                left: orphans.min(MAX_ORPHANS) - 1,
                send,
            };
            Flow::Block
        }
        Answer::Busy { ticks } => {
            give_back_turn(cfg, s, c, t);
            wait::busy(cfg, s, c, t, call, ticks)
        }
        Answer::NotSynced => {
            // Undone before the error is returned, on the turn: an undo
            // entry on the lane, settled within one response timeout
            // (`unreplicated.rs`).
            call.at = super::unreplicated::begin(cfg, s, (c, h));
            Flow::Block
        }
        // A re-entry's reply to a plain acquire: the library reports it.
        Answer::HoldsGone => {
            give_back_turn(cfg, s, c, t);
            wait::after_error(cfg, s, c, t, call)
        }
        other => unreachable!("an acquire replied {other:?}"),
    }
}

/// Until the call's late attempts have their undos, no other call's step
/// may send on the lane (`Turn::keep_for_late_call`).
fn keep_for_late_call(cfg: &Config, s: &mut State, c: u8, t: u8, call: &Call) {
    if !call.late.is_empty() {
        s.thread_mut(c, cfg.holder(c, t)).lane.late_call = Some(t);
    }
}

/// The call took the lock: the step ends, then the call.
fn got(cfg: &Config, s: &mut State, c: u8, t: u8, call: &mut Call) -> Flow {
    give_back_turn(cfg, s, c, t);
    decide(cfg, s, c, t, call, Outcome::Got)
}

/// The unreplicated acquire is undone: the step ends, and the call with
/// `ReplicasNotSynced` (not an outage: a waiting call ends too).
fn unsynced(cfg: &Config, s: &mut State, c: u8, t: u8, call: &mut Call) -> Flow {
    give_back_turn(cfg, s, c, t);
    decide(cfg, s, c, t, call, Outcome::Failed)
}

/// The call's outcome is known: it ends (`finish.rs`).
pub fn decide(
    cfg: &Config,
    s: &mut State,
    c: u8,
    t: u8,
    call: &mut Call,
    outcome: Outcome,
) -> Flow {
    call.result = Some(outcome);
    // The subscription ends with the contended path.
    let was_joined = std::mem::take(&mut call.joined);
    call.first_busy = None;
    if was_joined && outcome == Outcome::Got {
        // A taking on the contended path (after a hand-over too) ends the
        // park of every waiter still parked for the lock by the TTL it set
        // (`Call::bound_waiters_left`, `Waiters::bound_parked`; the async
        // path's end alike, `async_acquire/round.rs`).
        let lease = cfg.clients[usize::from(c)][usize::from(t)];
        super::pubsub::bound_parked(cfg, s, c, cfg.lock(c, t), cfg.lease_ticks(lease));
    }
    if was_joined {
        // Not counted any more (this call is out of the job meanwhile).
        super::pubsub::left(cfg, s, c, cfg.lock(c, t));
    }
    finish::begin(cfg, s, c, t, call)
}
