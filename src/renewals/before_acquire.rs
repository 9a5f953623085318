//! What an acquire settles in the map before it sends: a generation it
//! can no longer re-enter ends, and one it re-enters lasts as long as the
//! TTL the re-entry sets, kept or not.
//!
//! Both keep the map's view of a generation in step with what Redis may
//! count, whatever the call then takes and however it ends: a call that
//! fails leaves no record of its own, so its acquire's effects must be
//! accounted for before it is sent (model defects 10 and 11).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use super::{RenewalMap, LOST};
use crate::stats::Counters;

impl RenewalMap {
    /// The holds of `field` on `name` counted before an acquire whose TTL
    /// would run out at `reaches` is sent (see [`counted`](Self::counted)).
    /// A generation whose leases all ran out ends first (as
    /// [`add`](Self::add) judges on an acquire's reply): its guards turn
    /// stale, so that whatever the acquire takes, kept or not, is never
    /// released by one of them. A live generation without a watched hold
    /// is taken to last until `reaches` at least: the acquire re-enters
    /// it, and a re-entry sets the key's TTL whether or not the call keeps
    /// its hold (an undo gives back the hold, not the old TTL), so that
    /// the lease's end here stays no earlier than Redis's.
    pub(crate) fn before_acquire(
        &self,
        name: &Arc<str>,
        field: &Arc<str>,
        reaches: Option<Instant>,
    ) -> u32 {
        let mut entries = self.entries.lock();
        let key = (Arc::clone(name), Arc::clone(field));
        let Some(entry) = entries.get_mut(&key) else {
            return 0;
        };
        if entry.expired_by(Instant::now()) {
            entry.record.state.store(LOST, Ordering::Release);
            Counters::bump(&self.counters.locks_lost);
            entries.remove(&key);
            return 0;
        }
        if let (0, Some(until), Some(reaches)) = (entry.watched, entry.leased_until, reaches) {
            entry.leased_until = Some(until.max(reaches));
        }
        entry.watched.saturating_add(entry.leased)
    }
}
