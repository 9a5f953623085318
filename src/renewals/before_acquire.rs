//! What an acquire settles in the map before it sends, and after it
//! leaves attempts that may run late: a generation it can no longer
//! re-enter ends, and one it may re-enter lasts as long as the TTL each
//! re-entry sets, kept or not.
//!
//! Both keep the map's view of a generation in step with what Redis may
//! count, whatever the call then takes and however it ends: a call that
//! fails leaves no record of its own, so its acquire's effects must be
//! accounted for before it is sent, or once it is known to run late
//! (model defects 10 and 11).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use super::{Entry, RenewalMap, LOST};
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
        entry.lasts_until(reaches);
        entry.watched.saturating_add(entry.leased)
    }

    /// A call of `field` on `name` ended with attempts that may still run
    /// until their undos' keep time, each setting the key's TTL anew when
    /// it re-enters a hold the call (or a later one) took: a live
    /// generation without a watched hold is taken to last until `reaches`
    /// (that keep time plus the attempts' TTL) at least.
    pub(crate) fn late_attempts_may_reach(
        &self,
        name: &Arc<str>,
        field: &Arc<str>,
        reaches: Option<Instant>,
    ) {
        let key = (Arc::clone(name), Arc::clone(field));
        if let Some(entry) = self.entries.lock().get_mut(&key) {
            entry.lasts_until(reaches);
        }
    }
}

impl Entry {
    /// A generation without a watched hold lasts until `reaches` at
    /// least: Redis may count its holds that long.
    fn lasts_until(&mut self, reaches: Option<Instant>) {
        if let (0, Some(until), Some(reaches)) = (self.watched, self.leased_until, reaches) {
            self.leased_until = Some(until.max(reaches));
        }
    }
}
