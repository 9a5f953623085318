//! Holds a local release hands straight to a parked holder: recorded by
//! the release, under the successor's lane turn, the moment Redis counts
//! them, and claimed by the waiter when it wakes.
//!
//! Recorded by the waiter alone, a handed hold would be missing from the
//! map between the hand-over and the waiter's wake-up; an owner's other
//! thread re-entering meanwhile would find Redis counting one hold more
//! than the map and give it back as counted twice (it is the waiter's),
//! and the waiter's late record would then start a generation over the
//! re-entry's. With the release's record, the re-entry is one more hold of
//! the handed generation, whoever records first.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{HoldRecord, RenewKind, RenewalMap, LIVE};

impl RenewalMap {
    /// Records the hold a release just handed to the waiter of `field`
    /// reserved at `at` (one hold, a new generation: the field held
    /// nothing in Redis when the lock was handed to it, so a record still
    /// live here is stale), for the waiter to [`claim`](Self::claim_handed).
    /// The caller holds the turn on the successor's lane, so no other
    /// request of the field runs or is recorded meanwhile.
    pub(crate) fn add_handed(
        &self,
        name: &Arc<str>,
        field: &Arc<str>,
        kind: RenewKind,
        at: Instant,
        lease: Option<Duration>,
    ) {
        let (record, _) = self.add(name, field, kind, at, 1, lease);
        let mut entries = self.entries.lock();
        if let Some(entry) = entries.get_mut(&(Arc::clone(name), Arc::clone(field))) {
            if Arc::ptr_eq(&entry.record, &record) {
                entry.handed.push(at);
            }
        }
    }

    /// The record of the hold handed to the waiter reserved at `at`, when
    /// its generation still stands; `None` once it ended (the waiter's
    /// hold with it: it tries the lock again) or when no release recorded
    /// one.
    pub(crate) fn claim_handed(
        &self,
        name: &Arc<str>,
        field: &Arc<str>,
        at: Instant,
    ) -> Option<Arc<HoldRecord>> {
        let mut entries = self.entries.lock();
        let entry = entries.get_mut(&(Arc::clone(name), Arc::clone(field)))?;
        let pos = entry.handed.iter().position(|&handed| handed == at)?;
        entry.handed.swap_remove(pos);
        (entry.record.state.load(Ordering::Acquire) == LIVE).then(|| Arc::clone(&entry.record))
    }
}
