//! The plain reentrant lock (Redisson's `RLock`).

use super::hash;
use super::sealed::KindOps;
use super::{AcquireReply, AcquireRequest, Handover, ReleasedTo, Successor, Target};
use crate::config::Config;
use crate::error::Result;
use crate::names;

/// The plain reentrant lock, the kind of [`Lock`](crate::Lock) by default.
/// Waiters are woken one at a time by pub/sub, in no particular order.
#[derive(Debug, Clone)]
pub struct Reentrant {
    channel: String,
}

impl KindOps for Reentrant {
    type Grant = ();

    const DESCRIPTION: &'static str = "plain lock";

    fn for_name(name: &str, _config: &Config) -> Self {
        Reentrant {
            channel: names::lock_channel(name),
        }
    }

    fn shared_channel(&self) -> Option<&str> {
        Some(&self.channel)
    }

    fn try_acquire(&self, at: Target<'_>, request: AcquireRequest<'_>) -> Result<AcquireReply<()>> {
        hash::acquire(at, request)
    }

    fn release(&self, at: Target<'_>, field: &str, request_id: &str) -> Result<Option<i64>> {
        hash::release(at, &self.channel, field, request_id)
    }

    fn handover(&self) -> Option<Handover<'_>> {
        Some(Handover::Field)
    }

    fn handed_over_grant(&self, _token: Option<u64>) -> Option<()> {
        Some(())
    }

    fn release_to(
        &self,
        at: Target<'_>,
        field: &str,
        request_id: &str,
        successor: Option<Successor<'_>>,
    ) -> Result<ReleasedTo> {
        hash::release_to(at, &self.channel, field, request_id, successor)
    }

    fn force_release(&self, at: Target<'_>) -> Result<bool> {
        hash::force_release(at, &self.channel)
    }
}
