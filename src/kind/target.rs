//! Where a kind's operations run ([`Target`]): the server, the lock's name,
//! and what a release or an acquire needs beyond them (its deadline, its
//! attempts, the late connections an undo follows); and how a release's
//! attempts are named for its script ([`ReleaseAttempts`]).
#![allow(unreachable_pub)]

use std::cell::RefCell;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Instant;

use crate::error::{Error, Result};
use crate::server::{LateRequests, Recorder, Server};

/// Names the attempts of one release request for its script: `"first"`,
/// then `"retry"`. A retry may follow an attempt that ran and lost its
/// reply, whose latch it replays; a first attempt reads the latch too,
/// since it may reach Redis late (a stalled server), after a retry ran.
///
/// A release carried on in the background counts its attempts across
/// calls (`shared`): an attempt after one that timed out is a retry,
/// whoever sends it.
///
/// An undo of a late acquire says `"above:N"` instead: release only
/// while the field counts more than N holds (a first attempt
/// otherwise).
#[derive(Debug, Default)]
pub struct ReleaseAttempts<'a> {
    made: u32,
    shared: Option<&'a AtomicU32>,
    undo_above: Option<u32>,
}

impl ReleaseAttempts<'_> {
    /// The word for the attempt about to be sent.
    pub fn next(&mut self) -> std::borrow::Cow<'static, str> {
        if let Some(above) = self.undo_above {
            return format!("above:{above}").into();
        }
        self.made += 1;
        let made = match self.shared {
            Some(shared) => shared.fetch_add(1, Ordering::SeqCst) + 1,
            None => self.made,
        };
        if made == 1 {
            "first".into()
        } else {
            "retry".into()
        }
    }
}

/// Where a kind's operations run: the server and the lock's name.
#[derive(Clone, Copy, Debug)]
pub struct Target<'a> {
    pub server: &'a Server,
    pub name: &'a str,
    /// For a release: when its attempts must end (`None`: the retry
    /// rule's own bound), and the attempts its request has made so far
    /// (`None`: a request of one call).
    pub deadline: Option<Instant>,
    pub attempts_made: Option<&'a AtomicU32>,
    /// For an acquire: where the connections of attempts whose reply
    /// did not come in time are kept, for the undo (see
    /// `engine/attempt.rs`). `None`: they close.
    pub late: Option<&'a RefCell<LateRequests>>,
    /// For a release that undoes a late acquire: release one hold only
    /// while the caller's field counts more than this many (the holds
    /// its guards stand for).
    pub undo_above: Option<u32>,
    /// For that undo: the commands are recorded here, not sent (they
    /// are written behind the late acquire).
    pub recorder: Option<&'a RefCell<Recorder>>,
}

impl<'a> Target<'a> {
    /// Counts the attempts of this target's release request.
    pub fn release_attempts(&self) -> ReleaseAttempts<'a> {
        ReleaseAttempts {
            made: 0,
            shared: self.attempts_made,
            undo_above: self.undo_above,
        }
    }

    /// Runs an acquire script like [`Server::run_write`], keeping the
    /// connections of attempts that time out when the target says where.
    pub fn run_acquire<T>(
        &self,
        op: impl FnMut(&mut dyn redis::ConnectionLike) -> redis::RedisResult<T>,
        wrote: impl Fn(&T) -> bool,
    ) -> Result<T> {
        match self.late {
            Some(late) => self.server.run_write_keeping(
                self.name,
                None,
                Some(&mut late.borrow_mut()),
                op,
                wrote,
            ),
            None => self.server.run_write(self.name, op, wrote),
        }
    }

    /// Runs a script that takes back the caller's own traces (a fair
    /// queue's entry) like [`Server::run_cleanup`]; only records it
    /// when the target has a recorder.
    pub fn run_cleanup<T>(
        &self,
        mut op: impl FnMut(&mut dyn redis::ConnectionLike) -> redis::RedisResult<T>,
    ) -> Result<T> {
        if let Some(recorder) = self.recorder {
            return op(&mut *recorder.borrow_mut()).map_err(Error::Redis);
        }
        self.server.run_cleanup(op)
    }

    /// Runs a release script like [`Server::run_write`], within this
    /// target's deadline; only records it when the target has a
    /// recorder.
    pub fn run_release<T>(
        &self,
        mut op: impl FnMut(&mut dyn redis::ConnectionLike) -> redis::RedisResult<T>,
        wrote: impl Fn(&T) -> bool,
    ) -> Result<T> {
        if let Some(recorder) = self.recorder {
            return op(&mut *recorder.borrow_mut()).map_err(Error::Redis);
        }
        // An undo ("above:N") stands on the master, which is what the
        // next acquire checks: it waits for no replica.
        let undo = self.undo_above.is_some();
        self.server
            .run_write_until(self.name, self.deadline, op, |value| !undo && wrote(value))
    }

    /// The unlock latch key of release `request_id` and its TTL in ms
    /// (see `lua/release.lua`).
    pub fn unlock_latch(&self, request_id: &str) -> (String, u64) {
        self.server.unlock_latch(self.name, request_id)
    }
}
