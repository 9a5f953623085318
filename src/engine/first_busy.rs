//! The answer of a waiter's first try, kept for the contended path: when
//! nothing was announced between that try and the waiter joining the
//! channel's waiters, trying again cannot succeed where it failed.

use std::time::Instant;

use crate::pubsub::QuietMark;

/// A first try that found the lock busy while this client was already
/// subscribed to the lock's channel. The contended path tries again once
/// the waiter has joined, in case the lock was released in between, unheard;
/// but when the channel stayed subscribed and heard nothing from the
/// `quiet` mark (taken before the try was sent) until the waiter joined, no
/// release came in between: one that comes later wakes the waiter. Then
/// the second try is skipped, and the waiter parks on the first try's TTL
/// (issue 27: one command fewer per hand-over between clients).
#[derive(Debug)]
pub(super) struct FirstBusy {
    pub(super) quiet: QuietMark,
    /// What the first try reported: the lock's TTL (ms), or a negative code.
    pub(super) ttl: i64,
    /// When the first try was sent.
    pub(super) at: Instant,
}

impl FirstBusy {
    /// The first try's TTL less the time since it was sent; `None` when
    /// it reported no plain TTL (no expiry, vanished, or a kind's code):
    /// then the lock is tried again as usual.
    pub(super) fn ttl_left(&self) -> Option<i64> {
        if self.ttl <= 0 {
            return None;
        }
        let spent = i64::try_from(self.at.elapsed().as_millis()).unwrap_or(i64::MAX);
        Some(self.ttl.saturating_sub(spent).max(1))
    }
}
