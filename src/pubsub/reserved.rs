//! A parked waiter reserved by a release that is about to hand it the lock
//! directly (see `handover.rs`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::channel::Channel;
use super::handover::Offer;
use super::waiter::Waiter;

/// A parked waiter taken out of the line by a release that is about to
/// hand it the lock. Dropped without [`hand_over`](Self::hand_over) (the
/// script did not hand it over, or failed), it is woken to try the lock
/// itself: if the hand-over did happen after all, that attempt re-enters
/// and the extra hold is given back.
#[derive(Debug)]
pub(crate) struct Reserved {
    channel: Arc<Channel>,
    /// The lock being handed over, among those that share the channel.
    lock: Arc<str>,
    waiter: Arc<Waiter>,
    offer: Offer,
    settled: bool,
}

impl Reserved {
    /// Reserves `waiter`, a waiter for `lock`, and wakes it to spin for
    /// the outcome.
    pub(super) fn new(
        channel: Arc<Channel>,
        lock: Arc<str>,
        waiter: Arc<Waiter>,
        offer: Offer,
    ) -> Reserved {
        waiter.wake_to_spin();
        Reserved {
            channel,
            lock,
            waiter,
            offer,
            settled: false,
        }
    }

    /// The reserved waiter's field and lease, for the release script.
    pub(crate) fn offer(&self) -> &Offer {
        &self.offer
    }

    /// When the waiter was reserved, before the release was sent: the
    /// moment its handed hold's lease is counted from
    /// ([`Wake::HandedOver`](super::Wake::HandedOver)'s `at`).
    pub(crate) fn reserved_at(&self) -> Option<Instant> {
        self.waiter.reserved_at.get().copied()
    }

    /// The script handed the lock over (with `token`, when it drew the
    /// waiter a fencing token): the waiter holds it now. Local newcomers
    /// stand back for `grace` (they would find it held).
    pub(crate) fn hand_over(mut self, grace: Duration, token: Option<u64>) {
        self.channel
            .with_lock(&self.lock, |waiters| waiters.handed_over(grace));
        self.settled = true;
        self.waiter.handed(token);
    }
}

impl Drop for Reserved {
    fn drop(&mut self) {
        if !self.settled {
            self.waiter.notify();
        }
    }
}
