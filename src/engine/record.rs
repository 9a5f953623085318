//! Recording a hold a call just took in the client's renewal map, and how
//! it is kept alive (renewed by the watchdog, or leased).

use std::time::Instant;

use super::lane::Turn;
use super::Call;
use crate::hold::{Hold, Renewal};
use crate::kind::sealed::KindOps;
use crate::names;

impl<K: KindOps> Call<'_, K> {
    /// Records a hold just taken (`holds` = the thread's hold count in
    /// Redis now) and says how it is kept alive; holds Redis counts beyond
    /// the guards are given back on the step's `turn` (or on a turn of
    /// its own when the caller has none).
    pub(super) fn hold(
        &self,
        turn: Option<&Turn<'_>>,
        started: Instant,
        grant: K::Grant,
        holds: u32,
    ) -> (Hold, K::Grant) {
        // Redis still counts the holds of releases on the lane not sent yet
        // (a drop that found the lane busy): they are no guard's any more,
        // nor holds counted twice.
        let add = |unsent: u32| {
            self.engine.renewals.add(
                self.lock.name,
                &self.field,
                self.lock.kind.renew_kind(),
                started,
                holds.saturating_sub(unsent),
                self.lease,
            )
        };
        let (record, orphans) = match turn {
            Some(turn) => turn.with_state(|unsent, _| add(unsent)),
            None => add(0),
        };
        if orphans > 0 {
            match turn {
                Some(turn) => self.release_orphans(turn, orphans),
                None => match self.step() {
                    Ok(turn) => self.release_orphans(&turn, orphans),
                    Err(e) => log::warn!(
                        "redhold: holds of {:?} counted twice could not be given back: {}; \
                         the lock stays held until its TTL runs out",
                        names::shorten(self.lock.name),
                        e.report()
                    ),
                },
            }
        }
        (
            Hold {
                record,
                renewal: self.renewal_from(started),
            },
            grant,
        )
    }

    /// How a hold of this call, its acquire sent at `started`, is kept
    /// alive.
    pub(super) fn renewal_from(&self, started: Instant) -> Renewal {
        match self.lease {
            None => Renewal::Watched,
            // Counted from before the request: the key may expire a little
            // earlier than our clock says, never later.
            Some(lease) => Renewal::Leased {
                expires_at: started.checked_add(lease),
            },
        }
    }
}
