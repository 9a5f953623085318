//! A direct hand-over to a shorter lease (issue 33, defect 3): the actor
//! takes a lock with a long lease; a thread of another client waits on it
//! (it parks until the TTL it saw, most of that lease); a second thread of
//! the actor's client waits with a short lease; the actor releases, which
//! hands the lock straight to that thread with its short lease. That
//! thread keeps it past its lease and unlocks late (its lease ended: the
//! lock is free once it does). Unless the hand-over told the other
//! client's waiter that the TTL got shorter, the waiter sleeps on for most
//! of the long lease while the lock is free: the oracle's liveness rule.

use std::time::Duration;

use super::Actor;
use crate::history::Event;
use crate::targets::{Method, Target};

/// How long the two waiters get to park before the release.
const PARK: Duration = Duration::from_millis(300);

impl Actor {
    /// See the module doc.
    pub(super) fn short_lease_handover(
        &mut self,
        target: Target,
        lease: Duration,
        short: Duration,
        overrun: Duration,
    ) {
        if !self.held.is_empty() {
            return;
        }
        let Some(other) = self.other_client("h") else {
            return;
        };
        self.acquire(
            target.clone(),
            Method::TryForLease(Duration::from_millis(300), lease),
            false,
        );
        if let Some(index) = self.held.iter().position(|h| h.target == target) {
            let waiter = self.helper(6, "hw", &other, &target, Method::TryFor(lease));
            let set = self.spec.slot.current();
            let successor = self.helper_holding(
                7,
                "hs",
                &set,
                &target,
                Method::TryForLease(lease, short),
                short + overrun,
            );
            self.pause(PARK);
            self.record(Event::Note {
                text: format!(
                    "{}: releasing {} {} to a waiter of its own client with a {} ms lease \
                     while {} waits",
                    self.spec.label,
                    target.kind.as_str(),
                    target.joined(),
                    short.as_millis(),
                    other.tag
                ),
            });
            self.release(index, false, None);
            for t in [successor, waiter].into_iter().flatten() {
                let _ = crate::joins::join_within(t, lease + Duration::from_secs(3));
            }
        }
        self.end_other_client(&other);
    }
}
