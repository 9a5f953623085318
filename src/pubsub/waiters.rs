//! The local threads waiting for one lock on one channel: how many there
//! are, which of them are parked (oldest first), the wake-ups kept for
//! those about to park, the grace a local release gives the waiter it
//! wakes, and the run of direct hand-overs (see `handover.rs`).
//!
//! A [`Waiters`] lives under its channel's mutex, beside those of the other
//! locks that share the channel (see `locks.rs`); a parked thread sleeps on
//! its own [`Waiter`] handle, without that mutex.
//!
//! A parked waiter's life: `WAITING`, then `NOTIFIED` (try the lock), or
//! `RESERVED` by a release that will hand it the lock and then `HANDED`
//! (it holds the lock) or `NOTIFIED` (the hand-over did not happen). A
//! reserved waiter waits for the outcome whatever its deadline or
//! interrupt say: the lock may be its own already.
//!
//! A reserved waiter is woken at once, before the release script is even
//! sent, and spins (for at most [`RESERVED_SPIN`]) until the release
//! settles it: so its wake-up overlaps the release's round trip instead of
//! following it. The futex wake of a thread whose core sleeps costs tens of
//! microseconds, a good part of a loopback round trip.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use super::handover::{Courtesy, Offer, Run};
use super::waiter::{Waiter, Wakeup, RESERVED, WAITING};

/// The waiters of one lock on one channel.
#[derive(Debug, Default)]
pub(super) struct Waiters {
    /// Local threads between `subscribe` and the end of their wait.
    count: usize,
    /// The ones among them parked right now, oldest first.
    parked: VecDeque<Arc<Waiter>>,
    /// Wake-ups that arrived while no waiter was parked, kept for the next
    /// one to park (at most one per waiter), so none is lost.
    permits: usize,
    /// Until when a local thread that did not wait must stand back: a
    /// release found waiters parked here, and the one woken should get the
    /// lock rather than a thread that comes back for it at once; or a
    /// release handed the lock to one of them directly.
    handoff_until: Option<Instant>,
    /// The direct hand-overs since a release last announced the lock.
    run: Run,
    /// What announcements owe other processes (see `handover.rs`).
    courtesy: Courtesy,
}

impl Waiters {
    /// How many threads wait.
    pub(super) fn count(&self) -> usize {
        self.count
    }

    /// One more thread waits.
    pub(super) fn join(&mut self) {
        self.count += 1;
    }

    /// One thread stopped waiting; the wake-ups kept never outnumber the
    /// waiters left.
    pub(super) fn leave(&mut self) {
        self.count -= 1;
        self.permits = self.permits.min(self.count);
    }

    /// Takes a kept wake-up, if there is one.
    pub(super) fn take_permit(&mut self) -> bool {
        if self.permits == 0 {
            return false;
        }
        self.permits -= 1;
        true
    }

    /// Parks the calling thread at the end of the line until `until` at
    /// the latest, with what a release needs to hand it the lock directly,
    /// if it may.
    pub(super) fn enqueue(&mut self, offer: Option<Offer>, until: Option<Instant>) -> Arc<Waiter> {
        self.enqueue_as(Wakeup::Thread(thread::current()), offer, until)
    }

    /// Parks a waiter woken by `wakeup` at the end of the line, until
    /// `until` at the latest.
    pub(super) fn enqueue_as(
        &mut self,
        wakeup: Wakeup,
        offer: Option<Offer>,
        until: Option<Instant>,
    ) -> Arc<Waiter> {
        let waiter = Arc::new(Waiter {
            wakeup,
            state: AtomicU8::new(WAITING),
            offer,
            reserved_at: OnceLock::new(),
            token: OnceLock::new(),
            until: parking_lot::Mutex::new(until),
        });
        self.parked.push_back(Arc::clone(&waiter));
        waiter
    }

    /// Takes `waiter` out of the line after it stopped sleeping on its own;
    /// false when a wake-up was handed to it meanwhile.
    pub(super) fn dequeue(&mut self, waiter: &Arc<Waiter>) -> bool {
        match self.parked.iter().position(|w| Arc::ptr_eq(w, waiter)) {
            Some(pos) => {
                self.parked.remove(pos);
                true
            }
            None => false,
        }
    }

    /// A local call took the lock with a TTL that ends at `expires`: every
    /// waiter parked here sleeps no later than that (one parked to an
    /// earlier end is not disturbed). Each parked on a TTL
    /// read before, which no longer says when the lock may be free: the
    /// one release message went to the call that took it, and the new
    /// holder's lease may be shorter, or its hold may expire unannounced
    /// (a guard kept past its lease, a renewal given up). Waking at the
    /// new TTL costs one attempt; sleeping past it leaves a free lock
    /// unclaimed.
    pub(super) fn bound_parked(&self, expires: Instant) {
        for waiter in &self.parked {
            waiter.wake_by(expires);
        }
    }

    /// Hands one wake-up to the oldest parked waiter, or keeps it for the
    /// next waiter to park.
    pub(super) fn wake_one(&mut self) {
        if let Some(waiter) = self.parked.pop_front() {
            waiter.notify();
        } else if self.permits < self.count {
            self.permits += 1;
        }
    }

    /// A release of the lock was announced: one wake-up, as
    /// [`wake_one`](Self::wake_one), and the courtesy learns that a release
    /// was heard (another process's, when it is not our own).
    pub(super) fn release_heard(&mut self) {
        self.courtesy.heard_release();
        self.wake_one();
    }

    /// Wakes every waiter, parked or about to park.
    pub(super) fn wake_all(&mut self) {
        for waiter in self.parked.drain(..) {
            waiter.notify();
        }
        self.permits = self.count;
    }

    /// Wakes every parked waiter once, and keeps one wake-up for each
    /// waiter not parked right now (about to park after a failed attempt),
    /// none for those woken here: a semaphore's or a latch's message, which
    /// every waiter must look at once, not twice.
    pub(super) fn wake_each_once(&mut self) {
        let not_parked = self.count.saturating_sub(self.parked.len());
        for waiter in self.parked.drain(..) {
            waiter.notify();
        }
        self.permits = self.permits.max(not_parked);
    }

    /// Takes the oldest parked waiter that may be handed the lock out of
    /// the line, for a release about to hand it over; `None` when there is
    /// none, or when the run of hand-overs has reached its bound and this
    /// release must announce the lock to every process instead.
    pub(super) fn reserve(&mut self) -> Option<(Arc<Waiter>, Offer)> {
        // A local release is about to be sent: its message is the next one.
        self.courtesy.releasing();
        let found = self
            .parked
            .iter()
            .enumerate()
            .find_map(|(pos, w)| Some((pos, w.offer.clone()?)));
        let Some((pos, offer)) = found else {
            if !self.parked.is_empty() {
                // Announced with waiters parked here (none takes a hand-over).
                self.courtesy.announcing();
            }
            return None;
        };
        if !self.run.extend() {
            // The run's bound: announced with waiters parked here.
            self.courtesy.announcing();
            return None;
        }
        let waiter = self.parked.remove(pos)?;
        let _ = waiter.reserved_at.set(Instant::now());
        waiter.state.store(RESERVED, Ordering::Release);
        Some((waiter, offer))
    }

    /// A local thread released the lock and announced it: if waiters are
    /// parked here, the oldest is about to be woken, so newcomers stand back
    /// for `grace`; if none is, nobody needs to. When `others_heard` (another
    /// process's subscriber heard the announcement), the one woken may owe
    /// them a [`Courtesy`] first.
    pub(super) fn expect_handoff(&mut self, grace: Duration, others_heard: bool) {
        self.run = Run::default();
        let waiting = !self.parked.is_empty() || self.permits > 0;
        self.handoff_until = if waiting {
            Instant::now().checked_add(grace)
        } else {
            None
        };
        self.courtesy.announced(others_heard, waiting);
    }

    /// How long a woken waiter still stands back for other processes.
    pub(super) fn courtesy_left(&self) -> Option<Duration> {
        self.courtesy.left()
    }

    /// The waiter that stood back has tried the lock (see [`Courtesy::ended`]).
    pub(super) fn courtesy_ended(&mut self, used: bool) {
        self.courtesy.ended(used);
    }

    /// A local release handed the lock to a waiter: newcomers stand back
    /// (they would only find it held) and park behind the others.
    pub(super) fn handed_over(&mut self, grace: Duration) {
        self.handoff_until = Instant::now().checked_add(grace);
    }

    /// Whether a newcomer should stand back (see [`expect_handoff`](Self::expect_handoff)),
    /// or stand back for another process during a [`Courtesy`]: the mark
    /// set by `expect_handoff` can come too late, once this client's
    /// subscriber has woken the waiter before the release's reply was read,
    /// and the releasing thread coming straight back then took the lock
    /// meant for the other process's waiter.
    pub(super) fn handoff_pending(&self) -> bool {
        self.handoff_until
            .is_some_and(|until| Instant::now() < until)
            || self.courtesy.left().is_some()
    }

    /// The woken waiter has made its attempt: newcomers may try again.
    pub(super) fn handoff_done(&mut self) {
        self.handoff_until = None;
    }

    /// How many waiters are parked now.
    #[cfg(test)]
    pub(super) fn parked_now(&self) -> usize {
        self.parked.len()
    }
}

#[cfg(test)]
mod tests {
    use super::super::waiter::NOTIFIED;
    use super::*;

    #[test]
    fn a_synchronizer_message_wakes_each_waiter_once() {
        let mut waiters = Waiters::default();
        waiters.join();
        waiters.join();
        waiters.join();
        let parked = [waiters.enqueue(None, None), waiters.enqueue(None, None)];
        // Two parked, one between its attempt and its park.
        waiters.wake_each_once();
        assert_eq!(waiters.parked_now(), 0);
        for waiter in &parked {
            assert_eq!(waiter.state.load(Ordering::Acquire), NOTIFIED);
        }
        // One kept wake-up, for the one not parked; none for those woken.
        assert!(waiters.take_permit());
        assert!(!waiters.take_permit());
    }

    #[test]
    fn newcomers_stand_back_while_a_courtesy_lasts() {
        let mut waiters = Waiters::default();
        waiters.join();
        let _parked = waiters.enqueue(None, None);
        // A release with a thread parked, heard by another process.
        assert!(waiters.reserve().is_none(), "no offer: it announces");
        waiters.expect_handoff(Duration::from_millis(50), true);
        // The woken thread has made its attempt, yet the courtesy is on:
        // a thread of this client coming back must not take the lock.
        waiters.handoff_done();
        assert!(waiters.handoff_pending());
        // Its own message, then the other process's release: over.
        waiters.release_heard();
        assert!(waiters.handoff_pending());
        waiters.release_heard();
        assert!(!waiters.handoff_pending());
    }
}
