//! Holds in Redis that no guard stands for, given back: one leaked with
//! `LockGuard::leak` (`Lock::unlock`), or holds a generation's last
//! release finds still counted under the field (a release never confirmed
//! while its latch lived). Each is a release on the lock's lane; what a
//! drop's deadline does not leave time for goes on from the worker.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Instant;

use super::give_back::MAX_ORPHANS_RELEASED;
use super::lane::{Entry, PendingRelease, Turn, Unconfirmed};
use super::release::{background_release, not_held, Mode};
use super::{Engine, LockRef};
use crate::error::{is_transient, Error, Result};
use crate::hold::{Hold, Renewal};
use crate::holding::Holder;
use crate::kind::sealed::KindOps;
use crate::kind::{GONE_ON_RETRY, HOLDS_REMAIN};
use crate::names;
use crate::server::request::retry_bound;
use crate::server::Resends;

impl Engine {
    /// Releases one hold of the calling thread that no guard stands for
    /// (given up with `leak`); [`Error::NotHeld`] when there is none.
    pub(crate) fn unlock<K: KindOps>(&self, lock: LockRef<'_, K>, holder: Holder) -> Result<()> {
        names::validate(lock.name)?;
        self.server.check_open()?;
        let field = self.field(holder, lock.kind);
        match self.renewals.find(lock.name, &field) {
            Some(record) => self.release(
                lock,
                &Hold {
                    record,
                    renewal: Renewal::Unguarded,
                },
                Mode::Wait,
            ),
            // No hold known here, so no live guard either; Redis may still
            // count one that no guard stands for (see `release_orphans`):
            // give that back. A retry that finds it gone proves nothing
            // was ours.
            None => {
                let deadline = crate::config::deadline_after(
                    Instant::now(),
                    retry_bound(self.server.config()),
                );
                let turn = self.lanes.enter(lock.name, &field, None, deadline)?;
                match self.release_script(&turn, lock, &field, Some(deadline))? {
                    Some(GONE_ON_RETRY) | None => Err(not_held(lock.name)),
                    Some(_) => Ok(()),
                }
            }
        }
    }

    /// Keeps `hold` without a guard, until [`unlock`](Self::unlock).
    pub(crate) fn leak(&self, hold: &Hold) {
        if self.server.check_process().is_ok() {
            self.renewals.leak(&hold.record, hold.is_watched());
        }
    }

    /// Gives back the holds Redis counts under `field` after the thread's
    /// last guard of the lock was released (a few at most, each a round
    /// trip), by `deadline`: what is not done by then is left on the lane
    /// for the worker, so a drop keeps its bound.
    #[cold]
    pub(super) fn give_back_unguarded<K: KindOps>(
        &self,
        turn: &Turn<'_>,
        lock: LockRef<'_, K>,
        field: &Arc<str>,
        deadline: Instant,
    ) {
        let _giving_back = self.server.giving_back();
        for done in 0..MAX_ORPHANS_RELEASED {
            let more = MAX_ORPHANS_RELEASED - done - 1;
            match self.give_back_request(turn, lock, field, Some(deadline), more) {
                Ok(Some(HOLDS_REMAIN)) => continue,
                Ok(_) => return,
                Err(e) => {
                    log::debug!(
                        "redhold: giving back holds no guard stands for of {:?} goes on in the \
                         background: {}",
                        names::shorten(lock.name),
                        e.report()
                    );
                    return;
                }
            }
        }
    }

    /// Runs the kind's release script once for `field` on `turn`'s lane,
    /// within `deadline` (the retry rule's bound without one), to give back
    /// a hold no guard stands for. One whose outcome is unknown stays on
    /// the lane until the server confirms it.
    pub(super) fn release_script<K: KindOps>(
        &self,
        turn: &Turn<'_>,
        lock: LockRef<'_, K>,
        field: &Arc<str>,
        deadline: Option<Instant>,
    ) -> Result<Option<i64>> {
        self.give_back_request(turn, lock, field, deadline, 0)
    }

    /// [`release_script`](Self::release_script), and `more` holds after it
    /// while it replies "holds remain" and no guard holds the lock: the
    /// rest goes on from the worker (unsent, when this one could not be
    /// sent by `deadline`).
    fn give_back_request<K: KindOps>(
        &self,
        turn: &Turn<'_>,
        lock: LockRef<'_, K>,
        field: &Arc<str>,
        deadline: Option<Instant>,
        more: u32,
    ) -> Result<Option<i64>> {
        let request_id = self.next_request_id();
        let made = AtomicU32::new(0);
        let sent_at = Instant::now();
        let released = self.run_release(lock, &made, deadline, |at| {
            lock.kind.release(at, field, &request_id)
        });
        if let Err(Error::Redis(e)) = &released {
            let made = made.load(Ordering::SeqCst);
            if is_transient(e) && (made > 0 || more > 0) {
                let request = Unconfirmed {
                    field: Arc::clone(field),
                    request_id,
                    attempts_made: made,
                    first_sent: (made > 0).then_some(sent_at),
                    latch_ttl: Resends::Retries.latch_ttl(self.server.config()),
                };
                let pending = PendingRelease::new(
                    request,
                    None,
                    background_release(lock),
                    self.request_ids(),
                )
                .unguarded(more);
                if turn.push(Entry::Release(Arc::new(pending))).is_err() {
                    log::warn!(
                        "redhold: too many releases pending; a hold of {:?} no guard stands \
                         for stays until its TTL",
                        names::shorten(lock.name)
                    );
                }
            }
        }
        released
    }
}
