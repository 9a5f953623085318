//! One waiter in a channel's line: a parked thread or an async call, its
//! state (`WAITING`, then `NOTIFIED`, or `RESERVED` and then `HANDED` or
//! `NOTIFIED`; see `waiters.rs`), and how it is woken.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::{self, Thread};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::handover::Offer;
use crate::interrupt::Interrupt;

pub(super) const WAITING: u8 = 0;
pub(super) const NOTIFIED: u8 = 1;
pub(super) const RESERVED: u8 = 2;
pub(super) const HANDED: u8 = 3;

/// How long a reserved waiter spins for its outcome before it parks again:
/// a release round trip on a loaded machine. Past it the release is slow
/// anyway (a retry, a stalled server), and the settlement's unpark wakes
/// the parked thread.
const RESERVED_SPIN: Duration = Duration::from_micros(500);

/// Why a parked waiter stopped waiting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wake {
    /// A release was announced (or the connection was re-established): try
    /// the lock again.
    Notified,
    /// A release reserved this waiter for a direct hand-over and did not
    /// confirm it (an error, a lost reply, no hand-over): try the lock as
    /// after [`Notified`](Self::Notified). The lock may be this waiter's
    /// already, in which case the attempt re-enters and gives the extra
    /// hold back; a waiter that cannot attempt (the client shut down) must
    /// clear its field instead.
    Unsettled,
    /// The wait time passed without news.
    TimedOut,
    /// The caller's [`Interrupt`] was triggered.
    Interrupted,
    /// A local release handed the lock to this waiter: it holds it now,
    /// with the lease its offer named, set no earlier than `at`, and the
    /// fencing token the release drew for it, if its offer named a counter.
    HandedOver { at: Instant, token: Option<u64> },
}

/// How a parked waiter is woken: a thread is unparked; an async call's
/// callback is run (under the channel's lock: it only schedules the call's
/// next step on the client's I/O threads, never polls a future itself).
pub(crate) enum Wakeup {
    /// A thread, parked in [`Waiter::sleep`].
    Thread(Thread),
    /// An async call, told to look at its waiter again.
    Callback(Arc<dyn Fn() + Send + Sync>),
}

impl std::fmt::Debug for Wakeup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Wakeup::Thread(thread) => f.debug_tuple("Thread").field(&thread.id()).finish(),
            Wakeup::Callback(_) => f.write_str("Callback"),
        }
    }
}

impl Wakeup {
    fn wake(&self) {
        match self {
            Wakeup::Thread(thread) => thread.unpark(),
            Wakeup::Callback(callback) => callback(),
        }
    }
}

/// One parked waiter: a thread, or an async call.
#[derive(Debug)]
pub(crate) struct Waiter {
    pub(super) wakeup: Wakeup,
    /// `WAITING`, `NOTIFIED`, `RESERVED` or `HANDED` (see the module doc).
    pub(super) state: AtomicU8,
    /// What a release needs to hand this waiter the lock, if it may.
    pub(super) offer: Option<Offer>,
    /// When a release reserved this waiter, before its script was sent.
    pub(super) reserved_at: OnceLock<Instant>,
    /// The fencing token a release drew for this waiter when it handed it
    /// the lock; set before `HANDED`.
    pub(super) token: OnceLock<u64>,
    /// When this waiter's park ends without news: the TTL it parked on,
    /// or earlier once a local call took the lock with a TTL of its own
    /// (see [`Waiters::bound_parked`](super::waiters::Waiters::bound_parked)).
    /// `None`: no end.
    pub(super) until: Mutex<Option<Instant>>,
}

impl Waiter {
    /// Sleeps until a wake-up or the lock is handed to this waiter, its
    /// park's end ([`until`](Self::until)) passes or `interrupt` is
    /// triggered. Once out of the line (`in_line` false: a wake-up is on
    /// its way) it waits for that wake-up alone.
    pub(super) fn sleep(&self, in_line: bool, interrupt: Option<&Interrupt>) -> Wake {
        let _registered = interrupt.map(Interrupt::register);
        let mut spin_until = None;
        loop {
            match self.state.load(Ordering::Acquire) {
                NOTIFIED if self.reserved_at.get().is_some() => return Wake::Unsettled,
                NOTIFIED => return Wake::Notified,
                // Set before `HANDED`, so always there; without it the
                // caller's next attempt re-enters and gives back the extra hold.
                HANDED => {
                    return self
                        .reserved_at
                        .get()
                        .map_or(Wake::Notified, |at| Wake::HandedOver {
                            at: *at,
                            token: self.token.get().copied(),
                        })
                }
                RESERVED => {
                    // The release that reserved us settles it within its
                    // call; until then the lock may already be ours.
                    let until = *spin_until.get_or_insert_with(|| Instant::now() + RESERVED_SPIN);
                    if !self.spin_while_reserved(until) {
                        thread::park();
                    }
                    continue;
                }
                _ => {}
            }
            if interrupt.is_some_and(Interrupt::is_triggered) {
                return Wake::Interrupted;
            }
            let until = if in_line { self.until() } else { None };
            match until {
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

    /// Spins until the reservation is settled or `until` passes; whether
    /// it was settled. Yields now and then, so that on a machine with few
    /// cores the releasing thread and the server still get to run.
    fn spin_while_reserved(&self, until: Instant) -> bool {
        let mut spins = 0u32;
        while self.state.load(Ordering::Acquire) == RESERVED {
            spins = spins.wrapping_add(1);
            if spins.is_multiple_of(64) {
                if Instant::now() >= until {
                    return false;
                }
                thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
        }
        true
    }

    /// Wakes a reserved waiter to spin for its outcome (see the module
    /// doc), so that it is running by the time the release's reply comes.
    /// An async call has nothing to spin: it is told once settled.
    pub(super) fn wake_to_spin(&self) {
        if let Wakeup::Thread(thread) = &self.wakeup {
            thread.unpark();
        }
    }

    /// Wakes the waiter to try the lock: a release was announced, or a
    /// reservation ends without a hand-over.
    pub(super) fn notify(&self) {
        self.state.store(NOTIFIED, Ordering::Release);
        self.wakeup.wake();
    }

    /// Where an async call's waiter stands, without waiting: the wake it
    /// got, or `None` while it waits (or is reserved: the release that
    /// reserved it settles it soon and tells it).
    pub(crate) fn outcome(&self) -> Option<Wake> {
        match self.state.load(Ordering::Acquire) {
            NOTIFIED if self.reserved_at.get().is_some() => Some(Wake::Unsettled),
            NOTIFIED => Some(Wake::Notified),
            HANDED => Some(
                self.reserved_at
                    .get()
                    .map_or(Wake::Notified, |at| Wake::HandedOver {
                        at: *at,
                        token: self.token.get().copied(),
                    }),
            ),
            _ => None,
        }
    }

    /// Ends this parked waiter's park by `at`, if it would end later, and
    /// wakes it to look: a thread sleeps on to the new end, an async call
    /// moves its timer there.
    pub(super) fn wake_by(&self, at: Instant) {
        {
            let mut until = self.until.lock();
            if until.is_some_and(|until| until <= at) {
                return;
            }
            *until = Some(at);
        }
        self.wakeup.wake();
    }

    /// When this waiter's park ends without news (`None`: never).
    pub(crate) fn until(&self) -> Option<Instant> {
        *self.until.lock()
    }

    /// Settles a reservation with the lock handed over (and the fencing
    /// token drawn for this waiter, if any): the waiter holds it now.
    pub(super) fn handed(&self, token: Option<u64>) {
        if let Some(token) = token {
            let _ = self.token.set(token);
        }
        self.state.store(HANDED, Ordering::Release);
        self.wakeup.wake();
    }
}
