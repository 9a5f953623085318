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
//! Here: the bound and what a waiter offers. The waiter's states are in
//! `waiters.rs`, the reservation a release holds in `reserved.rs`.

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
    fn a_run_ends_after_its_time() {
        let mut run = Run {
            handed: 1,
            since: Instant::now().checked_sub(MAX_RUN),
        };
        assert!(!run.extend());
    }
}
