//! A release request under the pool's retry rule (`server/pool.rs`,
//! `run_attempts`; `kind/target.rs`, `ReleaseAttempts`): sent on a new
//! connection, resent with the same id as a retry after a connection
//! failure or a timeout while the retries and the deadline allow, and
//! left to the lane as a pending release when it stays unconfirmed.

use super::config::Config;
use super::job::{RelSend, Send};
use super::requests::{release_call, resend};
use super::server::{take_reply, Read};
use super::state::{Answer, Entry, Pending, Purpose, ReqId, State};
use crate::call::Attempt;

/// Where a release request stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Progress {
    /// Its reply: the code (nil: `None`) and a hand-over's token.
    Answered(Option<i64>, Option<i64>),
    /// No reply, and no attempt left (the error of the last one).
    Unconfirmed,
    /// Waiting for a reply.
    Waiting,
}

/// Sends the first attempt of release `id` of thread `(c, t)`, handing a
/// freed lock to `successor` if named.
pub fn first(
    cfg: &Config,
    s: &mut State,
    (c, t): (u8, u8),
    id: ReqId,
    successor: Option<u8>,
) -> RelSend {
    let wire = s.open(c, release_call(cfg, c, t, id, Attempt::First, successor));
    RelSend {
        id,
        attempts: 1,
        send: Send::on(wire, cfg.retries),
        since_first: 0,
    }
}

/// Reads or retries `rs`; `deadline_passed`: no attempt may start now.
pub fn progress(
    cfg: &Config,
    s: &mut State,
    (c, t): (u8, u8),
    rs: &mut RelSend,
    successor: Option<u8>,
    deadline_passed: bool,
) -> Progress {
    match take_reply(s, rs.send.wire, rs.send.expired) {
        Read::Reply(Answer::Released { code, token }) => Progress::Answered(code, token),
        Read::Reply(other) => unreachable!("a release replied {other:?}"),
        Read::Waiting => Progress::Waiting,
        Read::Failed | Read::TimedOut if rs.send.tries_left > 0 && !deadline_passed => {
            rs.send = resend(cfg, s, (c, t), rs.id, successor, Attempt::Retry, rs.send);
            rs.attempts = (rs.attempts + 1).min(2);
            Progress::Waiting
        }
        Read::Failed | Read::TimedOut => Progress::Unconfirmed,
    }
}

/// A pending release of thread `t`'s field for its lane: `rs` sent
/// (`None`: never sent), for `purpose`, the hold certainly expired in
/// `certain` ticks.
pub fn pending(
    cfg: &Config,
    rs: Option<&RelSend>,
    id: ReqId,
    purpose: Purpose,
    certain: u8,
) -> Pending {
    Pending {
        id,
        attempts: rs.map_or(0, |r| r.attempts),
        alive: rs.map(|r| cfg.latch_ticks().saturating_sub(r.since_first)),
        purpose,
        // Only an unsent release is ever dropped on it.
        certain: if rs.is_some() { 0 } else { certain },
        done: false,
    }
}

/// Adds `entry` to lane `t` of client `c`: a sent request before every
/// unsent release, an unsent one at the end (`Lane::push`).
pub fn push(s: &mut State, c: u8, t: u8, entry: Entry) {
    let unsent = |e: &Entry| matches!(e, Entry::Release(p) if p.alive.is_none());
    let entries = &mut s.thread_mut(c, t).lane.entries;
    let at = if unsent(&entry) {
        entries.len()
    } else {
        entries.iter().position(unsent).unwrap_or(entries.len())
    };
    entries.insert(at, entry);
}
