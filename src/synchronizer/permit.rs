//! The guard of permits taken from a [`Semaphore`].

use std::fmt;

use super::semaphore::Semaphore;
use crate::error::Result;
use crate::names;

/// Permits taken from a [`Semaphore`]; dropping it gives them back.
///
/// Unlike a [`LockGuard`](crate::LockGuard), a permit belongs to no thread
/// (Redis does not record who took it), so it may move to another thread.
/// [`release`](Self::release) gives the permits back with a `Result`; a
/// drop does the same and logs a failure. [`forget`](Self::forget) keeps
/// them taken, as a Java `acquire()` without its `release()`: anyone may
/// [`Semaphore::release`] them later.
///
/// A permit given back after [`Client::shutdown`](crate::Client::shutdown)
/// still goes back to Redis while the server answers: the permits are not
/// the client's to keep.
#[must_use = "if unused the permits are given back at once"]
pub struct Permit {
    semaphore: Semaphore,
    permits: u32,
    /// Still to be given back (false once released or forgotten).
    armed: bool,
    /// Taken by an async call: the drop queues the give-back on the
    /// client's threads instead of waiting for it.
    queued_drop: bool,
}

impl Permit {
    /// `permits` (checked) permits just taken from `semaphore`.
    pub(super) fn new(semaphore: Semaphore, permits: u32) -> Permit {
        Permit {
            semaphore,
            permits,
            armed: true,
            queued_drop: false,
        }
    }

    /// [`new`](Self::new), for an async call: its drop never waits.
    pub(super) fn taken_async(semaphore: Semaphore, permits: u32) -> Permit {
        let mut permit = Permit::new(semaphore, permits);
        permit.queued_drop = true;
        permit
    }

    /// How many permits this guard gives back.
    pub fn permits(&self) -> u32 {
        self.permits
    }

    /// The semaphore the permits were taken from.
    pub fn semaphore(&self) -> &Semaphore {
        &self.semaphore
    }

    /// Gives the permits back now and wakes waiters.
    ///
    /// # Errors
    ///
    /// A Redis error after the retry rule: the permits may or may not be
    /// back (a retry of the same request never gives them twice).
    pub fn release(mut self) -> Result<()> {
        self.armed = false;
        self.give_back()
    }

    /// Keeps the permits taken: nothing is given back, now or on drop.
    pub fn forget(mut self) {
        self.armed = false;
    }

    /// One release request for this guard's permits, allowed after the
    /// client shut down (never in a forked child).
    fn give_back(&self) -> Result<()> {
        let server = self.semaphore.client.engine().server();
        server.check_process()?;
        let _allowed = server.giving_back();
        self.semaphore.give(self.permits)
    }
}

impl Drop for Permit {
    /// Gives the permits back within the retry rule's bound; a failure is
    /// logged (the permits stay taken until someone releases them).
    fn drop(&mut self) {
        if !std::mem::take(&mut self.armed) {
            return;
        }
        if self.queued_drop {
            let permit = Permit::new(self.semaphore.clone(), self.permits);
            let engine = self.semaphore.client.engine();
            if engine.tasks().spawn(Box::new(move || drop(permit))).is_ok() {
                return;
            }
        }
        if let Err(e) = self.give_back() {
            log::warn!(
                "redhold: {} permit(s) of semaphore {:?} could not be given back: {e}",
                self.permits,
                names::shorten(self.semaphore.name())
            );
        }
    }
}

impl fmt::Debug for Permit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Permit")
            .field("semaphore", &self.semaphore.name())
            .field("permits", &self.permits)
            .field("armed", &self.armed)
            .finish()
    }
}
