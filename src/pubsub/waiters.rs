//! The local threads waiting on one channel: how many there are, which of
//! them are parked (oldest first), the wake-ups kept for those about to
//! park, and the grace a local release gives the waiter it wakes.
//!
//! A [`Waiters`] lives under its channel's mutex; a parked thread sleeps on
//! its own [`Waiter`] handle, without that mutex.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::{self, Thread};
use std::time::{Duration, Instant};

use crate::interrupt::Interrupt;

/// Why a parked waiter stopped waiting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wake {
    /// A release was announced (or the connection was re-established): try
    /// the lock again.
    Notified,
    /// The wait time passed without news.
    TimedOut,
    /// The caller's [`Interrupt`] was triggered.
    Interrupted,
}

/// One parked thread.
#[derive(Debug)]
pub(super) struct Waiter {
    thread: Thread,
    /// Set (under the channel mutex) when a wake-up was handed to this waiter.
    notified: AtomicBool,
}

impl Waiter {
    /// Sleeps until a wake-up is handed to this waiter, `deadline` passes
    /// (never, when `None`) or `interrupt` is triggered.
    pub(super) fn sleep(&self, deadline: Option<Instant>, interrupt: Option<&Interrupt>) -> Wake {
        let _registered = interrupt.map(Interrupt::register);
        loop {
            if self.notified.load(Ordering::Acquire) {
                return Wake::Notified;
            }
            if interrupt.is_some_and(Interrupt::is_triggered) {
                return Wake::Interrupted;
            }
            match deadline {
                Some(deadline) => {
                    let now = Instant::now();
                    if now >= deadline {
                        return Wake::TimedOut;
                    }
                    thread::park_timeout(deadline - now);
                }
                None => thread::park(),
            }
        }
    }

    fn notify(&self) {
        self.notified.store(true, Ordering::Release);
        self.thread.unpark();
    }
}

/// The waiters of one channel.
#[derive(Debug)]
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
    /// lock rather than a thread that comes back for it at once.
    handoff_until: Option<Instant>,
}

impl Waiters {
    /// The first waiter of a channel.
    pub(super) fn one() -> Waiters {
        Waiters {
            count: 1,
            parked: VecDeque::new(),
            permits: 0,
            handoff_until: None,
        }
    }

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

    /// Parks the calling thread at the end of the line.
    pub(super) fn enqueue(&mut self) -> Arc<Waiter> {
        let waiter = Arc::new(Waiter {
            thread: thread::current(),
            notified: AtomicBool::new(false),
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

    /// Hands one wake-up to the oldest parked waiter, or keeps it for the
    /// next waiter to park.
    pub(super) fn wake_one(&mut self) {
        if let Some(waiter) = self.parked.pop_front() {
            waiter.notify();
        } else if self.permits < self.count {
            self.permits += 1;
        }
    }

    /// Wakes every waiter, parked or about to park.
    pub(super) fn wake_all(&mut self) {
        for waiter in self.parked.drain(..) {
            waiter.notify();
        }
        self.permits = self.count;
    }

    /// A local thread released the lock: if waiters are parked here, the
    /// oldest is about to be woken, so newcomers stand back for `grace`.
    pub(super) fn expect_handoff(&mut self, grace: Duration) {
        if !self.parked.is_empty() || self.permits > 0 {
            self.handoff_until = Instant::now().checked_add(grace);
        }
    }

    /// Whether a newcomer should stand back (see [`expect_handoff`](Self::expect_handoff)).
    pub(super) fn handoff_pending(&self) -> bool {
        self.handoff_until
            .is_some_and(|until| Instant::now() < until)
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
