//! What a lane holds: the requests of one (lock, holder) whose outcome the
//! server has not confirmed, and how one attempt settles each.
//!
//! | entry | settled by | settled by time |
//! |---|---|---|
//! | [`Entry::Undo`] | reading the undo's reply (the late acquire ran, then its undo); once its connection failed, reading the reply of a copy sent on another connection (a copy that ran replays: its ids are latched), sent only while the latches outlive it | once its keep time is over (the latch's life): it ran or never will |
//! | [`Entry::Release`], sent | a reply to any attempt of its request id (the latch makes every other copy replay it) | once its latch may have expired: no copy of it can still run |
//! | [`Entry::Release`], not sent yet | sending it and reading a reply | once the hold it releases has certainly expired |
//!
//! An entry leaves its lane only when settled: never while a copy of its
//! request may still run (see `lane.rs`).

use std::sync::Arc;
use std::time::Instant;

use parking_lot::Mutex;

use super::pending::{earlier_request_on_its_way, Outcome, PendingRelease, Settling};
use crate::error::{is_transient, reply_was_read, Error, Result};
use crate::names;
use crate::server::pool::Pool;
use crate::server::{LateRequests, Trailing};

/// The client keeps too many unconfirmed requests already: the entry was
/// not added (an undo's connection closes; a release is waited for by its
/// caller or left to its TTL).
#[derive(Debug)]
pub(crate) struct NoRoom;

/// One request of a lane whose outcome the server has not confirmed.
pub(crate) enum Entry {
    /// An undo written behind a late acquire, on that acquire's connection.
    Undo(Box<Mutex<Trailing>>),
    /// A release of one hold (or a synchronizer's give-back), sent or not.
    Release(Arc<PendingRelease>),
}

impl std::fmt::Debug for Entry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Entry::Undo(_) => f.write_str("Undo"),
            Entry::Release(pending) => f
                .debug_struct("Release")
                .field("request_id", &pending.request_id.lock())
                .field("sent", &!pending.is_unsent())
                .finish(),
        }
    }
}

impl Entry {
    /// Whether this is a release never sent: such entries come after every
    /// request that was sent, and an undo written later runs before them.
    pub(crate) fn is_unsent_release(&self) -> bool {
        matches!(self, Entry::Release(pending) if pending.is_unsent())
    }

    /// Whether this entry stands for a hold Redis may still count that no
    /// guard counts any more (a release not yet confirmed to have run).
    pub(crate) fn is_release(&self) -> bool {
        matches!(self, Entry::Release(_))
    }

    /// One attempt to settle the entry, ending by `deadline`, while the
    /// lane keeps `others` releases besides it (still to run after it).
    pub(crate) fn settle(&self, at: &Settling<'_>, deadline: Instant, others: u32) -> Outcome {
        match self {
            Entry::Undo(trailing) => settle_undo(&mut trailing.lock(), at, deadline),
            Entry::Release(pending) => pending.attempt(at, deadline, others),
        }
    }

    /// Whether nothing of this entry can act on the server any more by
    /// `now`, so that it may be forgotten at shutdown without a warning.
    pub(crate) fn is_harmless(&self, now: Instant) -> bool {
        match self {
            Entry::Undo(trailing) => trailing.lock().expired(now),
            Entry::Release(_) => false,
        }
    }
}

fn settle_undo(trailing: &mut Trailing, at: &Settling<'_>, deadline: Instant) -> Outcome {
    if trailing.expired(Instant::now()) {
        // Its keep time is the request's latch life: the late acquire
        // and its undo ran by now, or never will.
        log::debug!(
            "redhold: the undo behind a late acquire of {:?} was never confirmed; \
             no longer awaited",
            names::shorten(at.name)
        );
        return Outcome::Settled;
    }
    if !trailing.is_cut() {
        match trailing.confirm(Some(deadline)) {
            Ok(_) => return Outcome::Settled,
            // Not run yet: the server is still away.
            Err(e) if e.is_timeout() => return Outcome::NotYet(Error::Redis(e)),
            // An error reply, read: the server is past the late acquire.
            Err(e) if reply_was_read(&e) => return Outcome::Settled,
            // The connection failed: what reached the server ran, and
            // nothing of ours is on its way there any more.
            Err(_) => {}
        }
    }
    // The late acquire ran or never will, its undo with it or not (or the
    // undo was never written: an unreplicated acquire's, or one that could
    // not follow its late request): the undo goes (again) on another
    // connection, a copy that ran replaying
    // (its releases' ids are latched). It gives back the holds the late
    // attempt and the attempts cut before it may have taken, none a guard
    // stands for (`above`), whichever reached Redis. Sent only while its
    // latches outlive every copy; after that, a hold it did not give back
    // is one Redis counts beyond the guards (the orphan rules, its lease).
    // A copy whose reply does not come is read as the first was; one
    // that could not be kept stops the copies.
    if deadline >= trailing.keep_until() || !trailing.may_resend() {
        return Outcome::NotYet(earlier_request_on_its_way(at.name));
    }
    match resend(trailing, at.server.pool(), deadline) {
        Ok(true) => Outcome::Settled,
        Ok(false) => Outcome::NotYet(earlier_request_on_its_way(at.name)),
        Err(Error::Redis(e)) if is_transient(&e) => Outcome::NotYet(Error::Redis(e)),
        Err(e) => {
            log::warn!(
                "redhold: sending again the undo behind a late acquire of {:?} failed: {}; \
                 a hold it did not give back expires after its lease",
                names::shorten(at.name),
                e.report()
            );
            Outcome::Settled
        }
    }
}

/// Sends the undo again, once, on another connection of `pool` (by
/// `deadline`), after its own failed before the undo's reply was read:
/// the late acquire ran or never will, the undo ran or not, and it is
/// conditional ("above:N") and its releases latched, so a second run
/// gives back no more than the first would have. `Ok(true)` once the
/// copy's replies were read; `Ok(false)` while they may still come: its
/// connection is kept and read as the first one was (no third copy goes
/// while this one may run), or, when it could not be kept, no copy goes
/// any more.
fn resend(trailing: &mut Trailing, pool: &Pool, deadline: Instant) -> Result<bool> {
    let mut late = LateRequests::default();
    let (commands, count) = trailing.commands();
    let sent = pool.run_once_keeping(deadline, &mut late, |conn| {
        conn.req_packed_commands(commands, 0, count).map(drop)
    });
    match sent {
        Ok(()) => Ok(true),
        Err(e) => {
            if let Some(conn) = late.take().pop() {
                trailing.copy_kept(conn);
                Ok(false)
            } else if e.is_timeout() {
                // On its way, maybe, with nobody to read it.
                trailing.copy_untracked();
                Ok(false)
            } else {
                Err(Error::Redis(e))
            }
        }
    }
}
