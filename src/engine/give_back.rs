//! Holds of ours in Redis that no guard stands for, given back: an
//! acquire counted twice, a hold taken as the client shut down, the trace
//! of a hand-over whose reply was lost. Each is a release on the lock's
//! lane, sent by whoever holds the turn.

use super::lane::Turn;
use super::{Call, Hold};
use crate::kind::sealed::KindOps;
use crate::names;
use crate::renewals::Which;

/// The most holds counted twice given back after one acquire: each costs a
/// round trip, and more than a few means something else writes our field.
pub(super) const MAX_ORPHANS_RELEASED: u32 = 8;

impl<K: KindOps> Call<'_, K> {
    /// Gives back holds Redis counts for this thread that no guard stands
    /// for: an acquire retried after its reply was lost, which counted
    /// twice, or holds of a generation judged lost that Redis still had.
    /// Left alone they would keep the lock after the last guard's release
    /// until its TTL ran out. Best effort: a failure costs only that delay.
    #[cold]
    pub(super) fn release_orphans(&self, turn: &Turn<'_>, orphans: u32) {
        for _ in 0..orphans.min(MAX_ORPHANS_RELEASED) {
            if !self.give_back_one(turn, "a hold counted twice") {
                return;
            }
        }
    }

    /// Releases one hold under this thread's field that no guard stands
    /// for (`what` it is, for the log), on the step's `turn`, even while
    /// the client shuts down: these are our own traces. Best effort: on
    /// failure the lock stays held until its TTL runs out (a release whose
    /// outcome is unknown stays on the lane). Returns whether it was
    /// released.
    pub(super) fn give_back_one(&self, turn: &Turn<'_>, what: &str) -> bool {
        let _giving_back = self.engine.server.giving_back();
        match self
            .engine
            .release_script(turn, self.lock, &self.field, None)
        {
            Ok(_) => true,
            Err(e) => {
                log::warn!(
                    "redhold: giving back {what} of {:?} failed: {}; \
                     the lock stays held until its TTL runs out",
                    names::shorten(self.lock.name),
                    e.report()
                );
                false
            }
        }
    }

    /// Gives back `hold`, taken as the client shut down, so that the lock
    /// does not stay held until its TTL runs out with no guard for it.
    /// Best effort, like any release: a failure costs that delay.
    #[cold]
    pub(super) fn give_back(&self, turn: &Turn<'_>, hold: Hold) {
        let which = Which::Guard {
            watched: hold.is_watched(),
        };
        if self
            .engine
            .renewals
            .release_one(&hold.record, which)
            .is_err()
        {
            // Its generation is over: Redis no longer counts it for us.
            return;
        }
        self.give_back_one(turn, "a hold taken as the client shut down");
    }

    /// A waiter whose hand-over was left unconfirmed ([`Wake::Unsettled`])
    /// and that leaves without trying the lock (shutdown, interrupt, an
    /// outage past its limits) may hold it in
    /// Redis with nobody knowing: the release handed it over and its reply
    /// was lost. When the thread holds no hold of this lock here, any hold
    /// under its field is such a trace: give one back, so that shutdown
    /// leaves none behind. Only kinds that are handed over directly.
    ///
    /// [`Wake::Unsettled`]: crate::pubsub::Wake::Unsettled
    #[cold]
    pub(super) fn give_back_trace(&self) {
        if self.lock.kind.handover().is_none()
            || self
                .engine
                .renewals
                .find(self.lock.name, &self.field)
                .is_some()
        {
            return;
        }
        let _giving_back = self.engine.server.giving_back();
        match self.step() {
            Ok(turn) => {
                self.give_back_one(&turn, "a hold a hand-over may have left");
            }
            Err(e) => log::warn!(
                "redhold: a hold of {:?} a hand-over may have left could not be given back: \
                 {}; it expires after its lease",
                names::shorten(self.lock.name),
                e.report()
            ),
        }
    }
}
