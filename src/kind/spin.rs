//! The spin lock: the plain lock's layout with no pub/sub at all; waiters
//! try again after an exponential backoff.

use std::time::Duration;

use super::hash;
use super::sealed::KindOps;
use super::{AcquireReply, AcquireRequest, Target};
use crate::config::Config;
use crate::error::Result;
use crate::names;

/// The shortest pause between two attempts.
const MIN_BACKOFF: Duration = Duration::from_millis(1);

/// A lock whose waiters poll with exponential backoff instead of listening
/// for releases: the kind of [`SpinLock`](crate::SpinLock).
///
/// For servers where pub/sub is unavailable or too costly (many waiters on
/// many names). A release still publishes on the plain lock's channel, so
/// plain-lock waiters on the same name are woken. A waiter notices a release
/// within its current backoff: 1 ms, doubling to 128 ms by default.
#[derive(Debug, Clone)]
pub struct Spin {
    /// The plain lock's channel, which releases still announce themselves
    /// on (for plain-lock waiters on the same name).
    channel: String,
    initial: Duration,
    max: Duration,
}

impl Spin {
    /// The same kind with another backoff range. The first pause is at
    /// least 1 ms: a zero backoff would hammer Redis in a tight loop.
    pub(crate) fn with_backoff(mut self, initial: Duration, max: Duration) -> Self {
        self.initial = initial.max(MIN_BACKOFF);
        self.max = max.max(self.initial);
        self
    }
}

impl KindOps for Spin {
    type Grant = ();

    const DESCRIPTION: &'static str = "spin lock";

    fn for_name(name: &str, _config: &Config) -> Self {
        Spin {
            channel: names::lock_channel(name),
            initial: Duration::from_millis(1),
            max: Duration::from_millis(128),
        }
    }

    fn backoff(&self, failures: u32) -> Option<Duration> {
        let factor = 1u32 << failures.min(20);
        Some(self.initial.saturating_mul(factor).min(self.max))
    }

    fn try_acquire(&self, at: Target<'_>, request: AcquireRequest<'_>) -> Result<AcquireReply<()>> {
        // `may_queue` means nothing here: there is no queue.
        hash::acquire(at, request)
    }

    fn release(&self, at: Target<'_>, field: &str, request_id: &str) -> Result<Option<i64>> {
        hash::release(at, &self.channel, field, request_id)
    }

    fn force_release(&self, at: Target<'_>) -> Result<bool> {
        hash::force_release(at, &self.channel)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spin(initial_ms: u64, max_ms: u64) -> Spin {
        Spin {
            channel: names::lock_channel("spin"),
            initial: MIN_BACKOFF,
            max: Duration::from_millis(128),
        }
        .with_backoff(
            Duration::from_millis(initial_ms),
            Duration::from_millis(max_ms),
        )
    }

    fn pauses_ms(spin: &Spin, n: u32) -> Vec<u128> {
        (0..n)
            .map(|i| spin.backoff(i).map_or(0, |d| d.as_millis()))
            .collect()
    }

    #[test]
    fn the_backoff_doubles_up_to_its_maximum() {
        assert_eq!(
            pauses_ms(&spin(1, 128), 10),
            [1, 2, 4, 8, 16, 32, 64, 128, 128, 128]
        );
        assert_eq!(
            spin(1, 128).backoff(u32::MAX),
            Some(Duration::from_millis(128))
        );
        assert_eq!(pauses_ms(&spin(5, 12), 4), [5, 10, 12, 12]);
    }

    #[test]
    fn odd_ranges_are_made_sane() {
        // A zero first pause would spin without pause.
        assert_eq!(pauses_ms(&spin(0, 4), 4), [1, 2, 4, 4]);
        assert_eq!(pauses_ms(&spin(0, 0), 2), [1, 1]);
        // A maximum below the first pause is raised to it.
        assert_eq!(pauses_ms(&spin(10, 2), 3), [10, 10, 10]);
    }
}
