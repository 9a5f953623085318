//! The renewal map: every hold this client's threads have on a lock, grouped
//! by generation, and the ones the watchdog keeps alive (Redisson's
//! `EXPIRATION_RENEWAL_MAP`, plus the holds taken with a lease).
//!
//! A *generation* is one unbroken run of a thread's holds on one lock: it
//! starts when Redis reports the thread's first hold (not a re-entry) and
//! ends when the last hold is released, or when the lock is found gone. A
//! guard belongs to one generation; once that generation is over, the guard
//! is stale and must not release anything, because a hold of a later
//! generation (same thread, same hash field) would be the one it released.
//!
//! | record state | meaning                                  | guards may release |
//! |--------------|------------------------------------------|--------------------|
//! | live         | in the map; Redis holds it as far as we know | yes            |
//! | lost         | expired, deleted, or replaced by a newer generation | no      |
//! | ended        | its last hold was released               | no                 |

use std::collections::HashMap;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::stats::Counters;

mod before_acquire;
mod handed;

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

const LIVE: u8 = 0;
const LOST: u8 = 1;
const ENDED: u8 = 2;

/// One generation of one thread's holds on one lock, shared by its guards
/// and the watchdog.
#[derive(Debug)]
pub(crate) struct HoldRecord {
    pub(crate) name: Arc<str>,
    pub(crate) field: Arc<str>,
    pub(crate) kind: RenewKind,
    /// `LIVE`, `LOST` or `ENDED`; leaves `LIVE` once, under the map's lock.
    state: AtomicU8,
    /// When Redis last confirmed the hold for a watchdog's timeout (taken
    /// without a lease, or renewed).
    last_confirmed: Mutex<Instant>,
}

impl HoldRecord {
    /// Whether the lock was found gone (or this generation was replaced).
    #[cfg(test)]
    pub(crate) fn is_lost(&self) -> bool {
        self.state.load(Ordering::Acquire) == LOST
    }

    /// Whether the generation still holds the lock, as far as we know.
    pub(crate) fn is_live(&self) -> bool {
        self.state.load(Ordering::Acquire) == LIVE
    }

    /// When Redis last confirmed the hold.
    pub(crate) fn last_confirmed(&self) -> Instant {
        *self.last_confirmed.lock()
    }

    pub(crate) fn confirmed_at(&self, at: Instant) {
        let mut last = self.last_confirmed.lock();
        if at > *last {
            *last = at;
        }
    }
}

/// A live record and its holds, as counted here.
#[derive(Debug)]
struct Entry {
    record: Arc<HoldRecord>,
    /// Holds renewed by the watchdog.
    watched: u32,
    /// Holds that expire after their lease.
    leased: u32,
    /// How many of the watched and of the leased holds were given up with
    /// `LockGuard::leak`: [`Lock::unlock`](crate::Lock::unlock) releases
    /// those, not one a live guard stands for.
    leaked_watched: u32,
    leaked_leased: u32,
    /// When the last lease of the generation runs out, while it never had
    /// a watched hold (renewals may keep the key longer): from then on
    /// Redis counts none of its holds, whatever the guards say.
    leased_until: Option<Instant>,
    /// Holds of the generation a local release handed to a parked waiter
    /// that has not claimed its record yet, by when it was reserved (see
    /// `handed.rs`).
    handed: Vec<Instant>,
}

impl Entry {
    /// Whether every hold of the generation has expired in Redis by `at`.
    fn expired_by(&self, at: Instant) -> bool {
        self.watched == 0 && self.leased_until.is_some_and(|until| until <= at)
    }
}

/// Which hold a release is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Which {
    /// A guard's: watched or leased.
    Guard { watched: bool },
    /// `Lock::unlock`'s: a leaked hold, leased ones first, so that the
    /// watchdog never stops renewing a watched hold its holder may still
    /// count on. Never a hold a live guard stands for.
    Unguarded,
}

/// Why [`RenewalMap::release_one`] forgot no hold, so that no release may
/// be sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kept {
    /// The record is no longer live: its guard is stale.
    Stale,
    /// An unguarded release found no leaked hold: every hold has a live
    /// guard, which alone may give it back.
    Guarded,
}

/// A lock name and a holder field.
type HoldKey = (Arc<str>, Arc<str>);

/// (Lock name, holder field) → the live generation of holds; the watchdog
/// renews those with a watched hold.
#[derive(Debug, Default)]
pub(crate) struct RenewalMap {
    entries: Mutex<HashMap<HoldKey, Entry>>,
    /// Where losses are counted, for [`Stats`](crate::Stats).
    counters: Arc<Counters>,
}

impl RenewalMap {
    /// An empty map that counts losses in `counters`.
    pub(crate) fn new(counters: Arc<Counters>) -> Self {
        RenewalMap {
            entries: Mutex::default(),
            counters,
        }
    }

    /// Records one more hold of `name` by `field`, just taken in Redis,
    /// which now counts `holds` for the field.
    ///
    /// `holds == 1` is the holder's first hold: a new generation starts, and
    /// a record still live here is marked lost (its holds expired or were
    /// deleted, or Redis would have counted more). `watched` holds are
    /// renewed by the watchdog; `sent` is when the acquire request left: the
    /// TTL Redis set runs from some moment after it, so counting from it
    /// never overestimates.
    ///
    /// Also returns how many more holds Redis counts than there are here:
    /// holds no guard stands for, which the caller gives back. A hold with
    /// a `lease` expires after it; one without is watched. A generation whose leases had all
    /// run out when the request left is not re-entered, whatever `holds`
    /// says (an acquire repeated after its reply was lost counts twice):
    /// Redis had dropped it. Nor is one whose count in Redis is no higher
    /// than the holds here: Redis lost them, and the count is this
    /// acquire's, repeated.
    pub(crate) fn add(
        &self,
        name: &Arc<str>,
        field: &Arc<str>,
        kind: RenewKind,
        sent: Instant,
        holds: u32,
        lease: Option<Duration>,
    ) -> (Arc<HoldRecord>, u32) {
        let mut entries = self.entries.lock();
        let key = (Arc::clone(name), Arc::clone(field));
        let watched = lease.is_none();
        let lease_end = lease.and_then(|lease| sent.checked_add(lease));
        if let Some(entry) = entries.get_mut(&key) {
            // A re-entry makes Redis count more than the holds here; a
            // count no higher means the generation's holds were wiped
            // (a restart, a flush) and this acquire, repeated after its
            // reply was lost, counted itself more than once.
            let before = entry.watched.saturating_add(entry.leased);
            if holds > before.max(1) && !entry.expired_by(sent) {
                if watched {
                    entry.watched += 1;
                    entry.leased_until = None;
                    entry.record.confirmed_at(sent);
                } else {
                    entry.leased += 1;
                    entry.leased_until = entry.leased_until.zip(lease_end).map(|(a, b)| a.max(b));
                }
                let here = entry.watched.saturating_add(entry.leased);
                return (Arc::clone(&entry.record), holds.saturating_sub(here));
            }
            entry.record.state.store(LOST, Ordering::Release);
            Counters::bump(&self.counters.locks_lost);
        }
        // A re-entry with no live record here (Redis counted a hold we had
        // already judged lost, or an acquire twice) also starts a
        // generation: the guards of the lost one must stay stale.
        let record = Arc::new(HoldRecord {
            name: Arc::clone(name),
            field: Arc::clone(field),
            kind,
            state: AtomicU8::new(LIVE),
            last_confirmed: Mutex::new(sent),
        });
        entries.insert(
            key,
            Entry {
                record: Arc::clone(&record),
                watched: u32::from(watched),
                leased: u32::from(!watched),
                leaked_watched: 0,
                leaked_leased: 0,
                leased_until: lease_end,
                handed: Vec::new(),
            },
        );
        (record, holds.saturating_sub(1))
    }

    /// Notes that the guard of one hold of `record` was given up.
    pub(crate) fn leak(&self, record: &Arc<HoldRecord>, watched: bool) {
        let mut entries = self.entries.lock();
        let key = (Arc::clone(&record.name), Arc::clone(&record.field));
        if let Some(entry) = entries.get_mut(&key) {
            if !Arc::ptr_eq(&entry.record, record) {
                return;
            }
            if watched {
                entry.leaked_watched = (entry.leaked_watched + 1).min(entry.watched);
            } else {
                entry.leaked_leased = (entry.leaked_leased + 1).min(entry.leased);
            }
        }
    }

    /// Forgets one hold of `record` before it is released in Redis (see
    /// [`Which`]). Forgets nothing, and says why, when the record is no
    /// longer live (its guard is stale) or when an unguarded release finds
    /// no leaked hold: then no release may be sent.
    ///
    /// Once the last watched hold is gone the watchdog stops renewing the
    /// lock, so a failed release leaves a lock that expires on its own.
    pub(crate) fn release_one(&self, record: &Arc<HoldRecord>, which: Which) -> Result<(), Kept> {
        let mut entries = self.entries.lock();
        if !record.is_live() {
            return Err(Kept::Stale);
        }
        let key = (Arc::clone(&record.name), Arc::clone(&record.field));
        let Some(entry) = entries.get_mut(&key) else {
            return Err(Kept::Stale);
        };
        debug_assert!(Arc::ptr_eq(&entry.record, record));
        let watched = match which {
            Which::Guard { watched } => watched,
            Which::Unguarded if entry.leaked_leased > 0 => {
                entry.leaked_leased -= 1;
                false
            }
            Which::Unguarded if entry.leaked_watched > 0 => {
                entry.leaked_watched -= 1;
                true
            }
            Which::Unguarded => return Err(Kept::Guarded),
        };
        let (first, second) = if watched {
            (&mut entry.watched, &mut entry.leased)
        } else {
            (&mut entry.leased, &mut entry.watched)
        };
        if *first > 0 {
            *first -= 1;
        } else {
            *second = second.saturating_sub(1);
        }
        entry.leaked_watched = entry.leaked_watched.min(entry.watched);
        entry.leaked_leased = entry.leaked_leased.min(entry.leased);
        if entry.watched == 0 && entry.leased == 0 {
            record.state.store(ENDED, Ordering::Release);
            entries.remove(&key);
        }
        Ok(())
    }

    /// The live record of `field`'s holds on `name`, if it has any.
    pub(crate) fn find(&self, name: &Arc<str>, field: &Arc<str>) -> Option<Arc<HoldRecord>> {
        let key = (Arc::clone(name), Arc::clone(field));
        self.entries.lock().get(&key).map(|e| Arc::clone(&e.record))
    }

    /// How many holds of `field` on `name` this client counts (guarded,
    /// leaked or not) that Redis may still count: none of a generation
    /// whose leases have all run out.
    pub(crate) fn counted(&self, name: &Arc<str>, field: &Arc<str>) -> u32 {
        let key = (Arc::clone(name), Arc::clone(field));
        self.entries
            .lock()
            .get(&key)
            .filter(|e| !e.expired_by(Instant::now()))
            .map_or(0, |e| e.watched.saturating_add(e.leased))
    }

    /// Every record with a watched hold, for one renewal pass.
    pub(crate) fn snapshot(&self) -> Vec<Arc<HoldRecord>> {
        self.entries
            .lock()
            .values()
            .filter(|e| e.watched > 0)
            .map(|e| Arc::clone(&e.record))
            .collect()
    }

    /// Marks `record` lost and forgets it. Returns false when it was not
    /// live any more (released, or replaced meanwhile): then nothing was
    /// lost, or the loss was already reported.
    pub(crate) fn mark_lost(&self, record: &Arc<HoldRecord>) -> bool {
        let mut entries = self.entries.lock();
        if !record.is_live() {
            return false;
        }
        record.state.store(LOST, Ordering::Release);
        let key = (Arc::clone(&record.name), Arc::clone(&record.field));
        entries.remove(&key);
        Counters::bump(&self.counters.locks_lost);
        true
    }

    /// How many (lock, holder) pairs hold a lock, watched or leased, and
    /// how many of them are an owner's.
    pub(crate) fn held(&self) -> (usize, usize) {
        let entries = self.entries.lock();
        let owners = entries
            .keys()
            .filter(|(_, field)| crate::owner::owner_in_field(field).is_some())
            .count();
        (entries.len(), owners)
    }

    /// How many (lock, thread) generations the watchdog renews.
    pub(crate) fn len(&self) -> usize {
        self.entries
            .lock()
            .values()
            .filter(|e| e.watched > 0)
            .count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names() -> (Arc<str>, Arc<str>) {
        (Arc::from("lock"), Arc::from("uuid:1"))
    }

    /// Records a hold as Redis would count it; `fresh` holds are the first
    /// of their generation.
    fn add(map: &RenewalMap, fresh: bool, watched: bool) -> Arc<HoldRecord> {
        let (name, field) = names();
        let here = map
            .entries
            .lock()
            .values()
            .map(|e| e.watched + e.leased)
            .sum::<u32>();
        let holds = if fresh { 1 } else { here + 1 };
        let (record, orphans) = map.add(
            &name,
            &field,
            RenewKind::Hash,
            Instant::now(),
            holds,
            (!watched).then_some(Duration::from_secs(60)),
        );
        assert_eq!(orphans, 0);
        record
    }

    #[test]
    fn an_acquire_ends_a_generation_whose_leases_ran_out_and_extends_a_live_one() {
        let map = RenewalMap::default();
        let (name, field) = names();
        let sent = Instant::now();
        let lease = Duration::from_millis(50);
        let (record, _) = map.add(&name, &field, RenewKind::Hash, sent, 1, Some(lease));
        // A re-entry that would last longer moves the lease's end.
        let reaches = sent + Duration::from_secs(60);
        assert_eq!(map.before_acquire(&name, &field, Some(reaches)), 1);
        std::thread::sleep(lease * 2);
        assert_eq!(
            map.counted(&name, &field),
            1,
            "Redis may count it till then"
        );
        assert!(record.is_live());
        // Once that end passed too, the next acquire ends the generation.
        map.entries.lock().values_mut().for_each(|e| {
            e.leased_until = Some(Instant::now());
        });
        assert_eq!(map.before_acquire(&name, &field, Some(reaches)), 0);
        assert!(!record.is_live(), "its guards are stale");
        assert!(map.find(&name, &field).is_none());
    }

    #[test]
    fn reentrant_holds_share_one_record_until_the_last_release() {
        let map = RenewalMap::default();
        let a = add(&map, true, true);
        let b = add(&map, false, true);
        assert!(Arc::ptr_eq(&a, &b));
        assert_eq!(map.release_one(&a, Which::Guard { watched: true }), Ok(()));
        assert_eq!(map.len(), 1);
        assert_eq!(map.release_one(&b, Which::Guard { watched: true }), Ok(()));
        assert_eq!(map.len(), 0);
        assert!(!a.is_live() && !a.is_lost());
    }

    #[test]
    fn a_released_record_is_not_marked_lost() {
        let map = RenewalMap::default();
        let old = add(&map, true, true);
        assert_eq!(
            map.release_one(&old, Which::Guard { watched: true }),
            Ok(())
        );
        let fresh = add(&map, true, true);
        assert!(!map.mark_lost(&old));
        assert!(!old.is_lost() && fresh.is_live());
        assert!(map.mark_lost(&fresh));
        assert!(fresh.is_lost());
        assert_eq!(map.len(), 0);
    }

    #[test]
    fn a_fresh_hold_makes_the_earlier_generation_stale() {
        // A leased hold expired in Redis; the same thread took the lock again.
        let map = RenewalMap::default();
        let expired = add(&map, true, false);
        let again = add(&map, true, true);
        assert!(!Arc::ptr_eq(&expired, &again));
        assert!(expired.is_lost());
        // The stale guard releases nothing, and the new hold keeps its count.
        assert_eq!(
            map.release_one(&expired, Which::Guard { watched: false }),
            Err(Kept::Stale)
        );
        assert_eq!(map.len(), 1);
        // A renewal computed before the re-acquire cannot mark the new one lost.
        assert!(!map.mark_lost(&expired));
        assert!(again.is_live());
        assert_eq!(
            map.release_one(&again, Which::Guard { watched: true }),
            Ok(())
        );
        assert_eq!(map.len(), 0);
    }

    #[test]
    fn only_records_with_a_watched_hold_are_renewed() {
        let map = RenewalMap::default();
        let leased = add(&map, true, false);
        assert!(map.snapshot().is_empty());
        let watched = add(&map, false, true);
        assert!(Arc::ptr_eq(&leased, &watched));
        assert_eq!(map.snapshot().len(), 1);
        assert_eq!(
            map.release_one(&watched, Which::Guard { watched: true }),
            Ok(())
        );
        assert!(map.snapshot().is_empty());
        assert!(leased.is_live());
        assert_eq!(
            map.release_one(&leased, Which::Guard { watched: false }),
            Ok(())
        );
        assert!(!leased.is_live());
    }

    #[test]
    fn holds_redis_counts_beyond_the_guards_are_orphans() {
        let map = RenewalMap::default();
        let (name, field) = names();
        let now = Instant::now();
        // An acquire retried after its reply was lost: Redis counts 2.
        let (first, orphans) = map.add(&name, &field, RenewKind::Hash, now, 2, None);
        assert_eq!(orphans, 1);
        // A re-entry, after the orphan was given back: Redis counts 2 again.
        let (again, orphans) = map.add(
            &name,
            &field,
            RenewKind::Hash,
            now,
            2,
            Some(Duration::from_secs(60)),
        );
        assert!(Arc::ptr_eq(&first, &again));
        assert_eq!(orphans, 0);
        let (_, orphans) = map.add(
            &name,
            &field,
            RenewKind::Hash,
            now,
            5,
            Some(Duration::from_secs(60)),
        );
        assert_eq!(orphans, 2);
    }

    #[test]
    fn a_generation_whose_leases_ran_out_is_not_re_entered() {
        let map = RenewalMap::new(Arc::default());
        let (name, field) = names();
        let now = Instant::now();
        let (old, _) = map.add(&name, &field, RenewKind::Hash, now, 1, Some(Duration::ZERO));
        assert_eq!(map.counted(&name, &field), 0, "Redis dropped it");
        // An acquire sent after the lease ran out, counted twice.
        let later = now + Duration::from_millis(1);
        let (new, orphans) = map.add(&name, &field, RenewKind::Hash, later, 2, None);
        assert!(!old.is_live() && new.is_live());
        assert_eq!(orphans, 1);
    }

    #[test]
    fn a_manual_unlock_releases_leaked_holds_leases_first() {
        let map = RenewalMap::default();
        let guarded = add(&map, true, true);
        let leaked_lease = add(&map, false, false);
        map.leak(&leaked_lease, false);
        // The leaked lease goes; the guard's watched hold is still renewed.
        assert_eq!(map.release_one(&guarded, Which::Unguarded), Ok(()));
        assert_eq!(map.snapshot().len(), 1);
        let leaked_watched = add(&map, false, true);
        map.leak(&leaked_watched, true);
        // With no leaked lease left, the leaked watched hold goes, not the
        // one the guard stands for.
        assert_eq!(map.release_one(&guarded, Which::Unguarded), Ok(()));
        assert_eq!(map.snapshot().len(), 1, "the guard's hold is renewed");
        assert_eq!(map.entries.lock().values().next().unwrap().watched, 1);
        assert_eq!(
            map.release_one(&guarded, Which::Guard { watched: true }),
            Ok(())
        );
        assert!(!guarded.is_live());
    }

    #[test]
    fn a_manual_unlock_never_takes_a_hold_a_live_guard_stands_for() {
        let map = RenewalMap::default();
        let first = add(&map, true, true);
        let leased = add(&map, false, false);
        assert_eq!(
            map.release_one(&first, Which::Unguarded),
            Err(Kept::Guarded)
        );
        // Nothing was forgotten: both guards still release their own holds.
        assert_eq!(
            map.release_one(&leased, Which::Guard { watched: false }),
            Ok(())
        );
        assert!(first.is_live());
        assert_eq!(
            map.release_one(&first, Which::Guard { watched: true }),
            Ok(())
        );
        assert!(!first.is_live());
    }

    #[test]
    fn a_release_of_a_kind_with_none_left_takes_the_other_kind() {
        let map = RenewalMap::default();
        let record = add(&map, true, true);
        // A guard asks for a leased hold; only a watched one is left.
        assert_eq!(
            map.release_one(&record, Which::Guard { watched: false }),
            Ok(())
        );
        assert!(!record.is_live());
        assert!(map.snapshot().is_empty());
    }
}
