//! Requests whose reply did not come in time, on connections kept open so
//! that an undo can follow each of them.
//!
//! A stalled server (a long fork, `DEBUG SLEEP`, a paused VM) holds the
//! requests queued on its sockets and runs them when it wakes, long after
//! their callers gave up. Redis runs one connection's commands in order, so
//! an undo written on the same connection right behind such a request runs
//! after it, whenever that is; on a new connection it could run first, or
//! not be sent at all (the new connection's handshake times out too).
//!
//! A call collects here the connection of every attempt that timed out
//! (the pool's retries included: each may run late), and when it ends
//! without keeping what those attempts may take, writes its undo behind
//! each (see `request.rs` for the semaphores and `engine/attempt.rs` for
//! the locks).

use std::time::Instant;

use redis::{ErrorKind, RedisError, RedisResult, Value};

use super::backend::Conn;
use crate::error::reply_was_read;

/// The most late attempts one call keeps: beyond the retry rule's count,
/// an older one is closed (its request, if it runs, is one the undo's
/// count check or latch still covers, at the cost of a hold left to its
/// TTL).
const MAX_KEPT: usize = 8;

/// The late attempts of one call.
#[derive(Default)]
pub(crate) struct LateRequests {
    conns: Vec<Conn>,
    /// How many were ever kept: tells a caller whether its last attempt
    /// was.
    kept: usize,
    /// Attempts since the last one answered whose connection was cut
    /// before their reply: each may have run, and no later answer has
    /// counted it (a late attempt's undo gives back one such hold too).
    cut: usize,
}

impl std::fmt::Debug for LateRequests {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LateRequests")
            .field("kept", &self.conns.len())
            .finish()
    }
}

impl LateRequests {
    /// Keeps `conn`, whose last request's reply did not come in time.
    pub(crate) fn keep(&mut self, conn: Conn) {
        if self.conns.len() >= MAX_KEPT {
            self.conns.remove(0);
        }
        self.conns.push(conn);
        self.kept += 1;
    }

    /// How many attempts' connections were ever kept.
    pub(crate) fn kept(&self) -> usize {
        self.kept
    }

    /// An attempt was answered: the earlier ones' outcome is the caller's
    /// business (a latch, a count); their connections close.
    pub(crate) fn clear(&mut self) {
        self.conns.clear();
    }

    /// An attempt's connection was cut before its reply: it may have run.
    pub(crate) fn cut(&mut self) {
        self.cut += 1;
    }

    /// An attempt was answered: its reply counts what the cut ones took.
    pub(crate) fn answered(&mut self) {
        self.cut = 0;
    }

    /// Attempts cut since the last answer (see the field).
    pub(crate) fn cut_since_answer(&self) -> usize {
        self.cut
    }

    /// How many late attempts are kept.
    pub(crate) fn len(&self) -> usize {
        self.conns.len()
    }

    /// Whether no late attempt is kept.
    pub(crate) fn is_empty(&self) -> bool {
        self.conns.is_empty()
    }

    /// Takes the kept connections, to write an undo behind each.
    pub(crate) fn take(&mut self) -> Vec<Conn> {
        std::mem::take(&mut self.conns)
    }
}

/// A connection an undo was written on, behind a late request: it stays
/// open until the undo's reply is read ([`Trailing::confirm`]) or its time
/// is up.
pub(crate) struct Trailing {
    /// `None` once it failed before the undo's reply was read.
    conn: Option<Conn>,
    /// Replies still to read: the late request's, then the undo's own.
    replies_left: usize,
    keep_until: Instant,
    /// The undo's commands (packed, and how many), to send again on
    /// another connection once this one failed (see `lane/entry.rs`).
    commands: Vec<u8>,
    count: usize,
    /// A copy went that may still run with nobody to read its reply (its
    /// connection could not be kept): no other copy may go.
    untracked: bool,
}

impl std::fmt::Debug for Trailing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Trailing")
            .field("replies_left", &self.replies_left)
            .field("keep_until", &self.keep_until)
            .finish()
    }
}

impl Trailing {
    /// Writes `commands` (packed, `count` of them) on `conn` behind its late
    /// request; the connection stays open for the replies.
    pub(crate) fn follow(
        mut conn: Conn,
        commands: &[u8],
        count: usize,
        keep_until: Instant,
    ) -> RedisResult<Trailing> {
        conn.follow(commands, false)?;
        Ok(Trailing {
            conn: Some(conn),
            replies_left: count + 1,
            keep_until,
            commands: commands.to_vec(),
            count,
            untracked: false,
        })
    }

    /// An undo that could not be written behind its late request (the
    /// connection failed first: the request ran or never will): kept as
    /// one whose connection failed, so that its first settle sends it on
    /// another connection (see `lane/entry.rs`).
    pub(crate) fn unwritten(commands: &[u8], count: usize, keep_until: Instant) -> Trailing {
        Trailing {
            conn: None,
            replies_left: 0,
            keep_until,
            commands: commands.to_vec(),
            count,
            untracked: false,
        }
    }

    /// Until when the undo's request ids stay latched once it ran: it was
    /// written no later than this much before, and each of its releases
    /// latches its id for the retry rule's latch life when it runs.
    pub(crate) fn keep_until(&self) -> Instant {
        self.keep_until
    }

    /// Whether its connection failed before the undo's reply was read.
    pub(crate) fn is_cut(&self) -> bool {
        self.conn.is_none()
    }

    /// Whether its time is up: then it closes, its undo run or not.
    pub(crate) fn expired(&self, now: Instant) -> bool {
        now >= self.keep_until
    }

    /// Reads the replies still due before `deadline`; `Ok` with the undo's
    /// own reply once it came (the undo has run), an error when the time
    /// ran out first (a timeout: it may still run) or the connection failed
    /// (then it ran or never will: nothing of ours is on its way any more).
    ///
    /// Once the connection failed, it is closed and [`is_cut`](Self::is_cut).
    pub(crate) fn confirm(&mut self, deadline: Option<Instant>) -> RedisResult<Value> {
        let deadline = [Some(self.keep_until), deadline]
            .into_iter()
            .flatten()
            .min();
        let Some(conn) = self.conn.as_mut() else {
            return Err(RedisError::from((
                ErrorKind::Io,
                "the connection of the undo behind a late acquire failed",
            )));
        };
        let mut last = Value::Nil;
        while self.replies_left > 0 {
            match conn.receive(deadline) {
                Ok(value) => last = value,
                Err(e) => {
                    if !e.is_timeout() && !reply_was_read(&e) {
                        self.conn = None;
                    }
                    return Err(e);
                }
            }
            self.replies_left -= 1;
        }
        Ok(last)
    }

    /// The undo's commands (packed) and how many, to send a copy.
    pub(crate) fn commands(&self) -> (&[u8], usize) {
        (&self.commands, self.count)
    }

    /// A copy went on `conn` and its replies did not come in time: they
    /// are read from it as the first's were (no other copy goes while it
    /// may run).
    pub(crate) fn copy_kept(&mut self, conn: Conn) {
        self.conn = Some(conn);
        self.replies_left = self.count;
    }

    /// A copy went that may still run with nobody to read its reply: no
    /// other copy may go.
    pub(crate) fn copy_untracked(&mut self) {
        self.untracked = true;
    }

    /// Whether another copy of the undo may be sent: none may while one
    /// not awaited may still run (see `lane/entry.rs`).
    pub(crate) fn may_resend(&self) -> bool {
        !self.untracked
    }
}
