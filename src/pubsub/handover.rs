//! Direct hand-over between threads of one client: a release that frees a
//! lock while a thread of the same client is parked on it gives the lock
//! straight to that thread (the release script writes the parked thread's
//! field in place of its own) and unparks it. One round trip and one
//! wake-up, where an announced release costs a publish, the subscriber's
//! hop and a second acquire.
//!
//! Other processes see the lock go from one holder to the next, as if the
//! successor had acquired it at once; they wait for an announcement. So a
//! run of hand-overs is bounded ([`MAX_IN_A_ROW`], [`MAX_RUN`]): then a
//! release announces the lock to everyone, and every process's waiters
//! get their chance at it.
//!
//! When such an announcement reaches another process's subscriber too, the
//! announcing client holds its own threads back for a moment
//! ([`Courtesy`]), so that the other process's woken waiter, a pub/sub hop
//! further away, gets the lock rather than losing the race to a local
//! thread: clients take turns.
//!
//! Here: the bound, the courtesy and what a waiter offers. The waiter's
//! states are in `waiters.rs`, the reservation a release holds in
//! `reserved.rs`.

use std::sync::Arc;
use std::time::{Duration, Instant};

/// The most direct hand-overs in a row before a release must announce.
pub(super) const MAX_IN_A_ROW: u32 = 8;

/// The longest a run of direct hand-overs may last before a release must
/// announce, however few they were: bounds the wait of other processes
/// when holds are long.
pub(super) const MAX_RUN: Duration = Duration::from_millis(10);

/// What a release needs to hand a parked thread the lock: its holder field,
/// the lease its own acquire would have set (`lease_ms` in Redis; `lease`
/// as its hold is recorded: `None` when the watchdog renews it), and for a
/// fenced lock the counter its acquire would have drawn a token from.
#[derive(Debug, Clone)]
pub(crate) struct Offer {
    pub(crate) field: Arc<str>,
    pub(crate) lease_ms: u64,
    pub(crate) lease: Option<Duration>,
    pub(crate) token_key: Option<Arc<str>>,
}

/// The direct hand-overs on one channel since a release last announced it.
#[derive(Debug, Default)]
pub(super) struct Run {
    handed: u32,
    since: Option<Instant>,
}

impl Run {
    /// Counts one more hand-over; false, and a fresh run begins, when the
    /// run has reached its bound and this release must announce instead.
    pub(super) fn extend(&mut self) -> bool {
        let now = Instant::now();
        let since = *self.since.get_or_insert(now);
        if self.handed >= MAX_IN_A_ROW || now.saturating_duration_since(since) >= MAX_RUN {
            *self = Run::default();
            return false;
        }
        self.handed += 1;
        true
    }
}

/// The first courtesy a client offers, and its length while courtesies
/// are used: about what another redhold client needs to hear an
/// announcement, wake a waiter and acquire, with room for a busy machine.
pub(super) const COURTESY: Duration = Duration::from_millis(1);

/// The longest courtesy: a waiter that needs more than this to act on an
/// announcement (a JVM's woken thread on a loaded machine needs a few ms)
/// is not waited for any longer; courtesies still unused at this length
/// are then offered ever more rarely.
pub(super) const MAX_COURTESY: Duration = Duration::from_millis(8);

/// After this many courtesies in a row that nobody used at
/// [`MAX_COURTESY`], a client skips the next `2^MAX_UNUSED - 1` before it
/// offers one again.
const MAX_UNUSED: u32 = 6;

/// What a client that announces a lock owes other processes: after an
/// announcement that another process heard, its threads stand back for a
/// while, so that the other process's waiter, a pub/sub hop and a thread
/// wake-up further away, gets the lock.
///
/// How long is learnt. A courtesy is *used* when another process took the
/// lock during it: the local attempt after it finds the lock taken, or a
/// release message from another process arrived meanwhile (it took the lock
/// and gave it back within the pause). A courtesy nobody used was either
/// too short for the other process's waiter (a JVM thread can need several
/// ms to wake) or offered to a subscriber that only lingers and takes
/// nothing. So an unused courtesy doubles the next one, up to
/// [`MAX_COURTESY`]; a used one keeps its length. Unused at the longest,
/// courtesies are offered ever more rarely, and at every announcement again
/// once one is used.
///
/// Who heard an announcement is known only from the release's reply, and
/// this client's own subscriber may wake a local thread before that reply
/// is read. So when the previous announcement reached another process, the
/// courtesy starts before the release is sent ([`announcing`](Self::announcing)),
/// and the reply confirms or ends it.
#[derive(Debug)]
pub(super) struct Courtesy {
    /// The length of the next courtesy.
    length: Duration,
    /// Until when local threads stand back, for the latest announcement.
    until: Option<Instant>,
    /// Whether the latest announcement reached another process.
    others_listen: bool,
    /// Whether local threads were parked when the latest local release
    /// began (see [`announced`](Self::announced)).
    parked_at_release: bool,
    /// Release messages this client's subscriber heard since a local
    /// release of the lock began; the first is that release's own.
    heard: u32,
    /// Courtesies in a row that nobody used at [`MAX_COURTESY`].
    unused: u32,
    /// Announcements left to make without one.
    skip: u32,
}

impl Default for Courtesy {
    fn default() -> Self {
        Courtesy {
            length: COURTESY,
            until: None,
            others_listen: false,
            parked_at_release: false,
            heard: 0,
            unused: 0,
            skip: 0,
        }
    }
}

impl Courtesy {
    /// A local release of the lock is about to be sent: the release
    /// messages heard from now on are its own, then other processes'.
    pub(super) fn releasing(&mut self) {
        self.heard = 0;
        self.parked_at_release = false;
    }

    /// This client's subscriber heard a release of the lock announced.
    /// Beyond the local release's own message, another process took the
    /// lock and gave it back: the courtesy has served, and ends.
    pub(super) fn heard_release(&mut self) {
        self.heard = self.heard.saturating_add(1);
        if self.heard > 1 {
            self.until = None;
        }
    }

    /// A local release is about to announce the lock while local threads
    /// wait: starts the courtesy now if the previous announcement reached
    /// another process and one is due.
    pub(super) fn announcing(&mut self) {
        self.parked_at_release = true;
        if self.others_listen && self.skip == 0 {
            self.until = Instant::now().checked_add(self.length);
        }
    }

    /// A local release announced the lock; `others_heard`: another
    /// process's subscriber heard it; `waiting`: local threads wait for the
    /// lock now. A courtesy is owed when others heard and local threads
    /// waited, now or when the release began: this client's subscriber may
    /// already have woken the one that waited, before the reply was read.
    /// (Judged by `waiting` alone, such a release passed for one nobody
    /// local waited on, the courtesy ended before its time and the next
    /// one did not start early: a waiter in another process then lost
    /// announcement after announcement to the nearer local one.)
    pub(super) fn announced(&mut self, others_heard: bool, waiting: bool) {
        let waited = waiting || std::mem::take(&mut self.parked_at_release);
        self.others_listen = others_heard;
        if !(others_heard && waited) {
            self.until = None;
            return;
        }
        if self.skip > 0 {
            self.skip -= 1;
            self.until = None;
            return;
        }
        // Started by `announcing`, or starting now.
        self.until = self
            .until
            .or_else(|| Instant::now().checked_add(self.length));
    }

    /// How long local threads still stand back, if they do.
    pub(super) fn left(&self) -> Option<Duration> {
        let left = self.until?.checked_duration_since(Instant::now())?;
        (!left.is_zero()).then_some(left)
    }

    /// The local thread that stood back has tried the lock; `taken`: it
    /// found the lock taken. Used (kept at its length) when another
    /// process took the lock meanwhile, else the next one is longer, or
    /// once the longest went unused, offered more rarely.
    pub(super) fn ended(&mut self, taken: bool) {
        self.until = None;
        // Beyond the release's own message, another process released it.
        let used = taken || self.heard > 1;
        if used {
            self.unused = 0;
            self.skip = 0;
        } else if self.length < MAX_COURTESY {
            self.length = (self.length * 2).min(MAX_COURTESY);
        } else {
            self.unused = (self.unused + 1).min(MAX_UNUSED);
            self.skip = (1 << self.unused) - 1;
        }
    }

    /// The length of the next courtesy.
    #[cfg(test)]
    pub(super) fn length(&self) -> Duration {
        self.length
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_ends_after_its_bound_and_starts_again() {
        let mut run = Run::default();
        for _ in 0..MAX_IN_A_ROW {
            assert!(run.extend());
        }
        assert!(!run.extend(), "the release after the bound announces");
        assert!(run.extend(), "and a new run begins");
    }

    /// One announcement heard by another process while a local thread
    /// waited: whether a courtesy is offered, and its length.
    fn offered(courtesy: &mut Courtesy) -> Option<Duration> {
        courtesy.releasing();
        courtesy.announced(true, true);
        courtesy.left().map(|_| courtesy.length())
    }

    #[test]
    fn a_courtesy_is_offered_only_when_others_heard() {
        let mut courtesy = Courtesy::default();
        courtesy.announced(false, true);
        assert_eq!(courtesy.left(), None);
        courtesy.announced(true, true);
        assert!(courtesy.left().is_some_and(|left| left <= COURTESY));
    }

    #[test]
    fn a_courtesy_is_owed_when_a_thread_waited_as_the_release_began() {
        // This client's subscriber woke the parked thread before the reply
        // was read: nobody waits now, but somebody did.
        let mut courtesy = Courtesy::default();
        courtesy.releasing();
        courtesy.announcing();
        courtesy.announced(true, false);
        assert!(courtesy.left().is_some(), "the woken thread stands back");
        // And the next announcement's courtesy starts before its release.
        courtesy.ended(true);
        courtesy.releasing();
        courtesy.announcing();
        assert!(courtesy.left().is_some());
        // A release with nobody local waiting, then or now, owes none.
        courtesy.ended(true);
        courtesy.releasing();
        courtesy.announced(true, false);
        assert_eq!(courtesy.left(), None);
    }

    #[test]
    fn unused_courtesies_grow_then_are_offered_ever_more_rarely_until_one_is_used() {
        let mut courtesy = Courtesy::default();
        // Each unused one doubles the next, up to the longest.
        let mut expected = COURTESY;
        loop {
            assert_eq!(offered(&mut courtesy), Some(expected));
            courtesy.ended(false);
            if expected == MAX_COURTESY {
                break;
            }
            expected = (expected * 2).min(MAX_COURTESY);
        }
        // Unused at the longest: the next announcement skips it.
        assert_eq!(offered(&mut courtesy), None);
        assert_eq!(offered(&mut courtesy), Some(MAX_COURTESY));
        courtesy.ended(false);
        // Two in a row: three skipped.
        for _ in 0..3 {
            assert_eq!(offered(&mut courtesy), None);
        }
        assert_eq!(offered(&mut courtesy), Some(MAX_COURTESY));
        courtesy.ended(true);
        // Used: offered at every announcement again, at the length that
        // served.
        assert_eq!(offered(&mut courtesy), Some(MAX_COURTESY));
        courtesy.ended(true);
        assert_eq!(offered(&mut courtesy), Some(MAX_COURTESY));
    }

    #[test]
    fn a_used_courtesy_keeps_its_length() {
        let mut courtesy = Courtesy::default();
        for _ in 0..5 {
            assert_eq!(offered(&mut courtesy), Some(COURTESY));
            courtesy.ended(true);
        }
    }

    #[test]
    fn another_process_releasing_during_the_courtesy_used_it_and_ends_it() {
        let mut courtesy = Courtesy::default();
        assert!(offered(&mut courtesy).is_some());
        // The release's own message: nothing from the other process yet.
        courtesy.heard_release();
        assert!(courtesy.left().is_some());
        // The other process took the lock and gave it back.
        courtesy.heard_release();
        assert_eq!(courtesy.left(), None, "the courtesy has served");
        // The local attempt then finds the lock free, but it was used.
        courtesy.ended(false);
        assert_eq!(offered(&mut courtesy), Some(COURTESY));
    }

    #[test]
    fn the_count_of_releases_heard_starts_again_at_each_local_release() {
        let mut courtesy = Courtesy::default();
        courtesy.heard_release();
        courtesy.heard_release();
        assert!(offered(&mut courtesy).is_some());
        courtesy.heard_release();
        courtesy.ended(false);
        assert_eq!(
            offered(&mut courtesy),
            Some(COURTESY * 2),
            "only its own message was heard: unused"
        );
    }

    #[test]
    fn a_courtesy_starts_before_the_release_once_others_listen() {
        let mut courtesy = Courtesy::default();
        courtesy.releasing();
        courtesy.announcing();
        assert_eq!(courtesy.left(), None, "nobody else was heard yet");
        courtesy.announced(true, true);
        courtesy.ended(true);
        courtesy.releasing();
        courtesy.announcing();
        assert!(
            courtesy.left().is_some(),
            "the last announcement reached another process"
        );
        courtesy.announced(false, true);
        assert_eq!(courtesy.left(), None, "this one reached nobody else");
        courtesy.releasing();
        courtesy.announcing();
        assert_eq!(courtesy.left(), None);
    }

    #[test]
    fn unused_courtesies_skip_a_bounded_number() {
        let mut courtesy = Courtesy::default();
        for _ in 0..40 {
            courtesy.ended(false);
        }
        let skipped = (0..1000)
            .take_while(|_| offered(&mut courtesy).is_none())
            .count();
        assert_eq!(skipped, (1 << MAX_UNUSED) - 1);
    }

    #[test]
    fn a_run_ends_after_its_time() {
        let mut run = Run {
            handed: 1,
            since: Instant::now().checked_sub(MAX_RUN),
        };
        assert!(!run.extend());
    }
}
