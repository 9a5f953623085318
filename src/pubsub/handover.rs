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
/// the lease its own acquire would have set, and for a fenced lock the
/// counter its acquire would have drawn a token from.
#[derive(Debug, Clone)]
pub(crate) struct Offer {
    pub(crate) field: Arc<str>,
    pub(crate) lease_ms: u64,
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

/// How long a client that announced a lock to another process keeps its
/// own threads back: about what the other process needs to hear the
/// announcement, wake a waiter and acquire, with room for a busy machine.
pub(super) const COURTESY: Duration = Duration::from_millis(1);

/// After this many courtesies in a row that nobody used, a client skips
/// the next `2^MAX_UNUSED - 1` before it offers one again.
const MAX_UNUSED: u32 = 6;

/// What a client that announces a lock owes other processes: after an
/// announcement that another process heard, its threads stand back for
/// [`COURTESY`]. A subscriber that heard but took nothing (it only lingers
/// subscribed) makes the courtesy a pause for nothing, so courtesies that
/// go unused are offered ever more rarely, and offered again at every
/// announcement once one is used.
///
/// Who heard an announcement is known only from the release's reply, and
/// this client's own subscriber may wake a local thread before that reply
/// is read. So when the previous announcement reached another process, the
/// courtesy starts before the release is sent ([`announcing`](Self::announcing)),
/// and the reply confirms or ends it.
#[derive(Debug, Default)]
pub(super) struct Courtesy {
    /// Until when local threads stand back, for the latest announcement.
    until: Option<Instant>,
    /// Whether the latest announcement reached another process.
    others_listen: bool,
    /// Courtesies in a row that nobody used.
    unused: u32,
    /// Announcements left to make without one.
    skip: u32,
}

impl Courtesy {
    /// A local release is about to announce the lock while local threads
    /// wait: starts the courtesy now if the previous announcement reached
    /// another process and one is due.
    pub(super) fn announcing(&mut self) {
        if self.others_listen && self.skip == 0 {
            self.until = Instant::now().checked_add(COURTESY);
        }
    }

    /// A local release announced the lock while local threads wait;
    /// `others_heard`: another process's subscriber heard it.
    pub(super) fn announced(&mut self, others_heard: bool) {
        self.others_listen = others_heard;
        if !others_heard {
            self.until = None;
            return;
        }
        if self.skip > 0 {
            self.skip -= 1;
            self.until = None;
            return;
        }
        // Started by `announcing`, or starting now.
        self.until = self.until.or_else(|| Instant::now().checked_add(COURTESY));
    }

    /// How long local threads still stand back, if they do.
    pub(super) fn left(&self) -> Option<Duration> {
        let left = self.until?.checked_duration_since(Instant::now())?;
        (!left.is_zero()).then_some(left)
    }

    /// The local thread that stood back has tried the lock: `used` when it
    /// found it taken (another process's waiter got it), else nobody came.
    pub(super) fn ended(&mut self, used: bool) {
        self.until = None;
        if used {
            self.unused = 0;
            self.skip = 0;
        } else {
            self.unused = (self.unused + 1).min(MAX_UNUSED);
            self.skip = (1 << self.unused) - 1;
        }
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

    #[test]
    fn a_courtesy_is_offered_only_when_others_heard() {
        let mut courtesy = Courtesy::default();
        courtesy.announced(false);
        assert_eq!(courtesy.left(), None);
        courtesy.announced(true);
        assert!(courtesy.left().is_some_and(|left| left <= COURTESY));
    }

    #[test]
    fn unused_courtesies_are_offered_ever_more_rarely_until_one_is_used() {
        let mut courtesy = Courtesy::default();
        let offered = |courtesy: &mut Courtesy| {
            courtesy.announced(true);
            courtesy.left().is_some()
        };
        assert!(offered(&mut courtesy));
        courtesy.ended(false);
        // One unused: the next announcement skips it, the one after offers.
        assert!(!offered(&mut courtesy));
        assert!(offered(&mut courtesy));
        courtesy.ended(false);
        // Two unused in a row: three skipped.
        for _ in 0..3 {
            assert!(!offered(&mut courtesy));
        }
        assert!(offered(&mut courtesy));
        courtesy.ended(true);
        // Used: offered at every announcement again.
        assert!(offered(&mut courtesy));
        courtesy.ended(true);
        assert!(offered(&mut courtesy));
    }

    #[test]
    fn a_courtesy_starts_before_the_release_once_others_listen() {
        let mut courtesy = Courtesy::default();
        courtesy.announcing();
        assert_eq!(courtesy.left(), None, "nobody else was heard yet");
        courtesy.announced(true);
        courtesy.ended(true);
        courtesy.announcing();
        assert!(
            courtesy.left().is_some(),
            "the last announcement reached another process"
        );
        courtesy.announced(false);
        assert_eq!(courtesy.left(), None, "this one reached nobody else");
        courtesy.announcing();
        assert_eq!(courtesy.left(), None);
    }

    #[test]
    fn unused_courtesies_skip_a_bounded_number() {
        let mut courtesy = Courtesy::default();
        for _ in 0..20 {
            courtesy.ended(false);
        }
        let skipped = (0..1000)
            .take_while(|_| {
                courtesy.announced(true);
                courtesy.left().is_none()
            })
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
