//! The end of an acquire call: one last step on the lock's lane for what
//! the call leaves behind. A waiter without the lock leaves a fair queue;
//! a call that failed while its last attempt's outcome is unknown settles
//! it; a hold taken as the client shut down is given back; and an undo is
//! written behind every attempt whose reply never came, after which other
//! calls may send on the lane again.

use std::sync::Arc;

use super::lane::{Entry, PendingRelease, Turn, Unconfirmed};
use super::release::background_release;
use super::{Call, Hold};
use crate::error::{Error, Result};
use crate::kind::sealed::KindOps;
use crate::names;
use crate::renewals::Which;
use crate::server::Resends;

/// How an acquire call ends: the hold and its grant, `None` when the wait
/// ran out, or an error.
pub(super) type Acquired<G> = Result<Option<(Hold, G)>>;

impl<K: KindOps> Call<'_, K> {
    /// Ends the call with `outcome` (`waited`: it was a waiting call, which
    /// may have joined a queue).
    pub(super) fn finish(&self, outcome: Acquired<K::Grant>, waited: bool) -> Acquired<K::Grant> {
        let got = matches!(outcome, Ok(Some(_)));
        // Taken as the client shut down: an attempt sent before `close`, or
        // a hand-over whose release was. Checked last, so that no guard
        // comes out after shutdown began.
        let closed = got && self.engine.server.is_closed();
        let leave_queue = waited && !got;
        let unsure = outcome.is_err() && self.unsure.get();
        if !(leave_queue || unsure || closed || !self.late.borrow().is_empty()) {
            return outcome;
        }
        // Our own traces: given back even while the client shuts down.
        let _giving_back = self.engine.server.giving_back();
        let turn =
            match self
                .engine
                .lanes
                .enter_unsettled(self.lock.name, &self.field, Some(self.id))
            {
                Ok(turn) => turn,
                // A forked child: nothing of the parent's may be touched.
                Err(e) => return outcome.and(Err(e)),
            };
        let settled = match turn.settle(self.engine.step_deadline()) {
            Ok(()) => true,
            Err(e) => {
                log::debug!(
                    "redhold: an earlier request on {:?} is unconfirmed as an acquire ends: {}",
                    names::shorten(self.lock.name),
                    e.report()
                );
                false
            }
        };
        if leave_queue {
            // Every way out without the lock, errors and shutdown included,
            // leaves the queue (a fair lock's first attempt may have queued
            // us even when its reply was lost). A queue entry is no count:
            // it goes whatever the lane keeps.
            self.give_up();
        }
        if unsure && settled {
            // Never leave a hold behind that no guard owns.
            self.settle_unsure(&turn);
        }
        let outcome = match outcome {
            Ok(Some((hold, _))) if closed => {
                if settled {
                    self.give_back(&turn, hold);
                } else {
                    self.give_back_later(&turn, hold);
                }
                Err(Error::Shutdown)
            }
            outcome => outcome,
        };
        // An attempt that timed out before the one that ended the call may
        // still run, with the lock taken or not: its undo follows it.
        self.undo_late(&turn);
        outcome
    }

    /// Tells the kind that this thread stopped waiting without the lock (a
    /// fair lock then leaves its queue). Best effort: a waiter that cannot
    /// say so is dropped from the queue once its deadline passes.
    fn give_up(&self) {
        if let Err(e) = self.lock.kind.give_up(self.target(), &self.field) {
            log::debug!(
                "redhold: leaving the queue of {:?} failed: {}",
                names::shorten(self.lock.name),
                e.report()
            );
        }
    }

    /// Gives back `hold`, taken as the client shut down, once the requests
    /// before it on the lane are confirmed: left on the lane unsent, for
    /// the worker's last attempts before shutdown ends.
    #[cold]
    fn give_back_later(&self, turn: &Turn<'_>, hold: Hold) {
        let which = Which::Guard {
            watched: hold.is_watched(),
        };
        if self
            .engine
            .renewals
            .release_one(&hold.record, which)
            .is_err()
        {
            return;
        }
        let request = Unconfirmed {
            field: Arc::clone(&self.field),
            request_id: self.engine.next_request_id(),
            attempts_made: 0,
            first_sent: None,
            latch_ttl: Resends::Retries.latch_ttl(self.engine.server.config()),
        };
        let release = PendingRelease::new(
            request,
            Some((hold.record, None)),
            background_release(self.lock),
            self.engine.request_ids(),
        );
        if turn.push(Entry::Release(release.into())).is_err() {
            log::warn!(
                "redhold: a hold of {:?} taken as the client shut down could not be given \
                 back; the lock expires after its TTL",
                names::shorten(self.lock.name)
            );
        }
    }
}
