//! The guard of one permit taken from a [`PermitExpirableSemaphore`].

use std::fmt;
use std::time::Duration;

use super::expirable::{format_id, PermitExpirableSemaphore};
use crate::error::Result;
use crate::names;

/// One permit of a [`PermitExpirableSemaphore`], with its id and lease;
/// dropping it gives the permit back (unless its lease ended: it went back
/// then).
///
/// Like a [`Permit`](crate::Permit) it belongs to no thread and may move
/// to another. [`release`](Self::release) gives it back with a `Result`;
/// [`forget`](Self::forget) leaves it taken until its lease ends or
/// someone calls [`PermitExpirableSemaphore::release`] with its
/// [`id`](Self::id).
#[must_use = "if unused the permit is given back at once"]
pub struct ExpirablePermit {
    semaphore: PermitExpirableSemaphore,
    id: [u8; 16],
    armed: bool,
    /// Taken by an async call: the drop queues the give-back on the
    /// client's threads instead of waiting for it.
    queued_drop: bool,
}

impl ExpirablePermit {
    /// A permit just taken from `semaphore` under `id`.
    pub(super) fn new(semaphore: PermitExpirableSemaphore, id: [u8; 16]) -> ExpirablePermit {
        ExpirablePermit {
            semaphore,
            id,
            armed: true,
            queued_drop: false,
        }
    }

    /// [`new`](Self::new), for an async call: its drop never waits.
    pub(super) fn taken_async(
        semaphore: PermitExpirableSemaphore,
        id: [u8; 16],
    ) -> ExpirablePermit {
        let mut permit = ExpirablePermit::new(semaphore, id);
        permit.queued_drop = true;
        permit
    }

    /// The permit's id, 32 lowercase hex digits, as Redisson's
    /// `acquire()` returns them: any client can release it by this id.
    pub fn id(&self) -> String {
        format_id(&self.id)
    }

    /// Sets the lease to end `lease` from now; whether the permit was
    /// still out.
    ///
    /// # Errors
    ///
    /// As [`PermitExpirableSemaphore::update_lease`].
    pub fn update_lease(&self, lease: Duration) -> Result<bool> {
        self.semaphore.update_lease(&self.id(), lease)
    }

    /// Gives the permit back now; `Ok(false)` when it was not out any more
    /// (its lease had ended, or someone released it by its id).
    ///
    /// # Errors
    ///
    /// A Redis error after the retry rule: the permit may or may not be
    /// back (a retry never gives it twice).
    pub fn release(mut self) -> Result<bool> {
        self.armed = false;
        self.give_back()
    }

    /// Leaves the permit taken: it goes back when its lease ends, or when
    /// someone releases it by its id.
    pub fn forget(mut self) {
        self.armed = false;
    }

    /// One release request, allowed after the client shut down (never in a
    /// forked child).
    fn give_back(&self) -> Result<bool> {
        let server = self.semaphore.client.engine().server();
        server.check_process()?;
        let _allowed = server.giving_back();
        self.semaphore.give(&self.id)
    }
}

impl Drop for ExpirablePermit {
    /// Gives the permit back within the retry rule's bound; a failure is
    /// logged (the permit goes back when its lease ends).
    fn drop(&mut self) {
        if !std::mem::take(&mut self.armed) {
            return;
        }
        if self.queued_drop {
            let permit = ExpirablePermit::new(self.semaphore.clone(), self.id);
            let engine = self.semaphore.client.engine();
            if engine.tasks().spawn(Box::new(move || drop(permit))).is_ok() {
                return;
            }
        }
        if let Err(e) = self.give_back() {
            log::warn!(
                "redhold: permit {} of semaphore {:?} could not be given back (its lease \
                 will end): {e}",
                self.id(),
                names::shorten(self.semaphore.name())
            );
        }
    }
}

impl fmt::Debug for ExpirablePermit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ExpirablePermit")
            .field("semaphore", &self.semaphore.name())
            .field("id", &self.id())
            .field("armed", &self.armed)
            .finish()
    }
}
