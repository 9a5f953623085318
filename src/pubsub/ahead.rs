//! Acquire ahead: when a release is announced, the subscriber thread sends
//! the oldest parked waiter's acquire for it and wakes it at the same
//! moment, so that the waiter's wake-up overlaps the acquire's round trip
//! instead of coming before it. The waiter reads the reply itself (see
//! `server/in_flight.rs`) and goes on exactly as if it had sent the
//! request: it is its own acquire, with its own field and lease.
//!
//! Only a waiter that offered a packed acquire (a plain lock on a single
//! server without replica sync) is served this way, and only when a
//! command connection is idle: the subscriber thread never opens one. In
//! every other case the waiter is woken as before and sends its own.

use super::channel::Channel;
use crate::server::Server;
use crate::stats::Counters;

/// What the subscriber thread sends acquires ahead with.
#[derive(Debug, Clone, Copy)]
pub(super) struct Sender<'a> {
    pub(super) server: &'a Server,
    pub(super) counters: &'a Counters,
}

/// A release was announced on `channel` (message `"0"`): wakes the oldest
/// parked waiter, or keeps the wake-up for the next one to park, and, when
/// that waiter offered one, sends its acquire on its behalf.
pub(super) fn wake_one(channel: &Channel, Sender { server, counters }: Sender<'_>) {
    let Some((waiter, request)) = channel.wake_one_ahead() else {
        return;
    };
    // Awake and spinning while the request goes out and is answered.
    waiter.wake_to_spin();
    match server.send_ahead(&request) {
        Some(in_flight) => {
            Counters::bump(&counters.acquires_ahead);
            waiter.settle_sent(in_flight);
        }
        // Nothing sent: the waiter sends its own acquire.
        None => waiter.settle(false),
    }
}
