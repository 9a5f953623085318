//! Waiting in a channel's line for one lock: a thread parks there, an
//! async call is woken there by a callback (see `waiter.rs`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::Channel;
use crate::interrupt::Interrupt;
use crate::pubsub::handover::Offer;
use crate::pubsub::waiter::{Waiter, Wake, Wakeup};

impl Channel {
    /// Puts an async call's waiter for `lock` in the line until `until` at
    /// the latest, woken by `callback`; or `Err` with the wake-up kept for
    /// it, when one was (a release came between its failed attempt and
    /// now).
    pub(crate) fn park_async(
        &self,
        lock: &str,
        offer: Option<Offer>,
        until: Option<Instant>,
        callback: Arc<dyn Fn() + Send + Sync>,
    ) -> Result<Arc<Waiter>, Wake> {
        let mut st = self.state.lock();
        let waiters = st.locks.entry(lock);
        if waiters.take_permit() {
            return Err(Wake::Notified);
        }
        Ok(waiters.enqueue_as(Wakeup::Callback(callback), offer, until))
    }

    /// An async call's `waiter` for `lock` stops waiting (its time is up,
    /// or the call ends): the wake it got, `TimedOut` once it left the line
    /// before any, or `None` while a release has it reserved (its callback
    /// runs once that is settled; the lock may be its own).
    pub(crate) fn leave_async(&self, lock: &str, waiter: &Arc<Waiter>) -> Option<Wake> {
        if let Some(wake) = waiter.outcome() {
            return Some(wake);
        }
        if self.state.lock().locks.entry(lock).dequeue(waiter) {
            return Some(Wake::TimedOut);
        }
        waiter.outcome()
    }

    /// Parks the calling thread, a waiter for `lock`, until a wake-up
    /// reaches it, a release hands it the lock (only with an `offer`),
    /// `timeout` passes or `interrupt` is triggered.
    pub(crate) fn park(
        &self,
        lock: &str,
        timeout: Duration,
        interrupt: Option<&Interrupt>,
        offer: Option<Offer>,
    ) -> Wake {
        // A timeout too long to represent is no timeout at all.
        let deadline = Instant::now().checked_add(timeout);
        let waiter = {
            let mut st = self.state.lock();
            let waiters = st.locks.entry(lock);
            if waiters.take_permit() {
                return Wake::Notified;
            }
            waiters.enqueue(offer, deadline)
        };
        let outcome = waiter.sleep(true, interrupt);
        if matches!(
            outcome,
            Wake::Notified | Wake::Unsettled | Wake::HandedOver { .. }
        ) || self.state.lock().locks.entry(lock).dequeue(&waiter)
        {
            return outcome;
        }
        // Handed a wake-up, or reserved for a hand-over, just as we gave up:
        // take what comes, so that no wake-up is lost and a lock handed to
        // us is known to be ours.
        waiter.sleep(false, None)
    }
}
