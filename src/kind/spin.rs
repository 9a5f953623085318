//! The spin lock: the plain lock's layout with no pub/sub at all; waiters
//! try again after an exponential backoff.

use std::time::Duration;

use super::reentrant::{acquire_hash, force_release_hash, release_hash};
use super::sealed::KindOps;
use super::{Attempt, Target};
use crate::client::Client;
use crate::error::Result;
use crate::names;

/// A lock whose waiters poll with exponential backoff instead of listening
/// for releases: [`SpinLock`](crate::SpinLock), made by
/// [`Client::spin_lock`](crate::Client::spin_lock).
///
/// For servers where pub/sub is unavailable or too costly (many waiters on
/// many names). A release still publishes on the plain lock's channel, so
/// plain-lock waiters on the same name are woken. A waiter notices a release
/// within its current backoff: 1 ms, doubling to 128 ms by default.
#[derive(Debug)]
pub struct Spin {
    channel: String,
    initial: Duration,
    max: Duration,
}

impl Spin {
    /// The same kind with another backoff range.
    pub(crate) fn with_backoff(mut self, initial: Duration, max: Duration) -> Self {
        self.initial = initial;
        self.max = max.max(initial);
        self
    }
}

impl KindOps for Spin {
    type Grant = ();

    fn for_name(name: &str, _client: &Client) -> Self {
        Spin {
            channel: names::lock_channel(name),
            initial: Duration::from_millis(1),
            max: Duration::from_millis(128),
        }
    }

    fn wait_channel(&self, _field: &str) -> Option<String> {
        None
    }

    fn backoff(&self, failures: u32) -> Option<Duration> {
        let factor = 1u32 << failures.min(20);
        Some(self.initial.saturating_mul(factor).min(self.max))
    }

    fn try_acquire(
        &self,
        at: Target<'_>,
        lease_ms: u64,
        field: &str,
        _: bool,
    ) -> Result<Attempt<()>> {
        acquire_hash(at, lease_ms, field).map(|ttl| match ttl {
            None => Attempt::Acquired(()),
            Some(ttl) => Attempt::Busy(ttl),
        })
    }

    fn release(
        &self,
        at: Target<'_>,
        lease_ms: u64,
        field: &str,
        request_id: &str,
    ) -> Result<Option<i64>> {
        release_hash(at, &self.channel, lease_ms, field, request_id)
    }

    fn force_release(&self, at: Target<'_>) -> Result<bool> {
        force_release_hash(at, &self.channel)
    }
}
