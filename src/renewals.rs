//! The renewal map: every lock this client holds without a lease, which the
//! watchdog keeps alive (Redisson's `EXPIRATION_RENEWAL_MAP`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use parking_lot::Mutex;

/// How the watchdog renews a hold (the `mode` argument of `lua/renew.lua`).
// `pub` only because the sealed `KindOps` trait names it; the module is private.
#[allow(unreachable_pub)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RenewKind {
    /// A hash lock: plain, fair, fenced, spin, or a write lock.
    Hash,
    /// A read lock: the hash and the holder's read-hold keys.
    Read,
}

impl RenewKind {
    /// The mode argument for `lua/renew.lua`.
    pub(crate) fn mode(self) -> &'static str {
        match self {
            RenewKind::Hash => "h",
            RenewKind::Read => "r",
        }
    }
}

/// One thread's holds on one lock, shared by its guards and the watchdog.
#[derive(Debug)]
pub(crate) struct HoldRecord {
    pub(crate) name: Arc<str>,
    pub(crate) field: Arc<str>,
    pub(crate) kind: RenewKind,
    /// Set once the lock was found gone; never cleared.
    lost: AtomicBool,
    /// When Redis last confirmed the hold (taken or renewed).
    last_confirmed: Mutex<Instant>,
}

impl HoldRecord {
    /// Whether the watchdog found the lock gone.
    pub(crate) fn is_lost(&self) -> bool {
        self.lost.load(Ordering::Acquire)
    }

    /// When Redis last confirmed the hold.
    pub(crate) fn last_confirmed(&self) -> Instant {
        *self.last_confirmed.lock()
    }

    pub(crate) fn confirmed_at(&self, at: Instant) {
        *self.last_confirmed.lock() = at;
    }
}

/// An entry: the record and the local hold count.
#[derive(Debug)]
struct Entry {
    record: Arc<HoldRecord>,
    holds: u32,
}

/// A lock name and a holder field.
type HoldKey = (Arc<str>, Arc<str>);

/// (Lock name, holder field) → holds, for the watchdog to renew.
#[derive(Debug, Default)]
pub(crate) struct RenewalMap {
    entries: Mutex<HashMap<HoldKey, Entry>>,
}

impl RenewalMap {
    /// Records one more hold of `name` by `field`, just taken in Redis.
    /// `sent` is when the acquire request left: the TTL Redis set runs from
    /// some moment after it, so counting from it never overestimates.
    pub(crate) fn add(
        &self,
        name: &Arc<str>,
        field: &Arc<str>,
        kind: RenewKind,
        sent: Instant,
    ) -> Arc<HoldRecord> {
        let mut entries = self.entries.lock();
        let key = (Arc::clone(name), Arc::clone(field));
        let entry = entries.entry(key).or_insert_with(|| Entry {
            record: Arc::new(HoldRecord {
                name: Arc::clone(name),
                field: Arc::clone(field),
                kind,
                lost: AtomicBool::new(false),
                last_confirmed: Mutex::new(sent),
            }),
            holds: 0,
        });
        entry.holds += 1;
        entry.record.confirmed_at(sent);
        Arc::clone(&entry.record)
    }

    /// Forgets one hold of `record`, before it is released in Redis: once the
    /// last hold is gone the watchdog stops renewing it.
    pub(crate) fn remove_one(&self, record: &Arc<HoldRecord>) {
        let mut entries = self.entries.lock();
        let key = (Arc::clone(&record.name), Arc::clone(&record.field));
        if let Some(entry) = entries.get_mut(&key) {
            if Arc::ptr_eq(&entry.record, record) {
                entry.holds -= 1;
                if entry.holds == 0 {
                    entries.remove(&key);
                }
            }
        }
    }

    /// The record of `field`'s holds on `name`, if it holds it with the watchdog.
    pub(crate) fn find(&self, name: &Arc<str>, field: &Arc<str>) -> Option<Arc<HoldRecord>> {
        let key = (Arc::clone(name), Arc::clone(field));
        self.entries.lock().get(&key).map(|e| Arc::clone(&e.record))
    }

    /// Every held record, for one renewal pass.
    pub(crate) fn snapshot(&self) -> Vec<Arc<HoldRecord>> {
        self.entries
            .lock()
            .values()
            .map(|e| Arc::clone(&e.record))
            .collect()
    }

    /// Marks `record` lost and stops renewing it. Returns false when it was
    /// released or replaced meanwhile (then nothing was lost).
    pub(crate) fn mark_lost(&self, record: &Arc<HoldRecord>) -> bool {
        let mut entries = self.entries.lock();
        let key = (Arc::clone(&record.name), Arc::clone(&record.field));
        match entries.get(&key) {
            Some(entry) if Arc::ptr_eq(&entry.record, record) => {
                record.lost.store(true, Ordering::Release);
                entries.remove(&key);
                true
            }
            _ => false,
        }
    }

    /// How many (lock, thread) holds are being renewed.
    pub(crate) fn len(&self) -> usize {
        self.entries.lock().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names() -> (Arc<str>, Arc<str>) {
        (Arc::from("lock"), Arc::from("uuid:1"))
    }

    #[test]
    fn reentrant_holds_share_one_record_until_the_last_release() {
        let map = RenewalMap::default();
        let (name, field) = names();
        let a = map.add(&name, &field, RenewKind::Hash, Instant::now());
        let b = map.add(&name, &field, RenewKind::Hash, Instant::now());
        assert!(Arc::ptr_eq(&a, &b));
        map.remove_one(&a);
        assert_eq!(map.len(), 1);
        map.remove_one(&b);
        assert_eq!(map.len(), 0);
    }

    #[test]
    fn a_released_record_is_not_marked_lost() {
        let map = RenewalMap::default();
        let (name, field) = names();
        let old = map.add(&name, &field, RenewKind::Hash, Instant::now());
        map.remove_one(&old);
        let fresh = map.add(&name, &field, RenewKind::Hash, Instant::now());
        assert!(!map.mark_lost(&old));
        assert!(!old.is_lost() && !fresh.is_lost());
        assert!(map.mark_lost(&fresh));
        assert!(fresh.is_lost());
        assert_eq!(map.len(), 0);
    }
}
