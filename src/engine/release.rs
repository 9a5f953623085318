//! The release side: one hold given back, and, when that frees the lock
//! while a thread of this client is parked on it, the lock handed straight
//! to that thread (see `pubsub/handover.rs`).

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Instant;

use super::give_back::MAX_ORPHANS_RELEASED;
use super::pending::{Pending, ReleaseFn};
use super::{target, Engine, LockRef, HANDOFF_GRACE};
use crate::error::{is_transient, Error, LossCause, Result};
use crate::hold::{Hold, Renewal};
use crate::kind::sealed::KindOps;
use crate::kind::{ReleasedTo, Successor, ANNOUNCED, GONE_ON_RETRY, HANDED_OVER, HOLDS_REMAIN};
use crate::names;
use crate::pubsub::Reserved;
use crate::renewals::{Kept, RenewKind, Which};
use crate::server::Resends;
use crate::stats::Counters;

/// How a release waits for Redis to confirm it.
#[derive(Clone, Copy)]
pub(crate) enum Mode<'a> {
    /// Within the retry rule's bound; the caller learns the outcome.
    Wait,
    /// A guard's drop: the first attempt gets one response timeout, then
    /// the client's release worker carries it on (see `pending.rs`) with
    /// the script this makes, and the drop returns.
    Drop(&'a dyn Fn() -> ReleaseFn),
    /// `LockGuard::unlock`: within the retry rule's bound, then handed to
    /// the worker like a drop's, with [`Error::ReleaseUnconfirmed`].
    Unlock(&'a dyn Fn() -> ReleaseFn),
}

impl Engine {
    /// Releases one hold. Retries are safe: the script remembers each
    /// request's reply for a while (the unlock latch).
    ///
    /// See [`Mode`] for how long it waits for Redis to confirm it.
    pub(crate) fn release<K: KindOps>(
        &self,
        lock: LockRef<'_, K>,
        hold: &Hold,
        mode: Mode<'_>,
    ) -> Result<()> {
        self.server.check_open()?;
        // Forget the hold first: if the release then fails, the lock expires
        // on its own instead of being renewed forever. A hold of a
        // generation that is over is not released at all: the thread's
        // current holds (same hash field) would be the ones released.
        let which = match hold.renewal {
            Renewal::Unguarded => Which::Unguarded,
            _ => Which::Guard {
                watched: hold.is_watched(),
            },
        };
        match self.renewals.release_one(&hold.record, which) {
            Ok(()) => {}
            Err(Kept::Stale) => return Err(self.lost(lock.name, hold)),
            // Every hold has a live guard: only that guard may give it back.
            Err(Kept::Guarded) => return Err(not_held(lock.name)),
        }
        let successor = self.successor(lock, hold);
        let to = successor.as_ref().map(|reserved| {
            let offer = reserved.offer();
            Successor {
                field: &offer.field,
                lease_ms: offer.lease_ms,
                token_key: offer.token_key.as_deref(),
            }
        });
        let request_id = self.next_request_id();
        let made = AtomicU32::new(0);
        let started = Instant::now();
        let response_timeout = self.server.config().response_timeout;
        let quick = matches!(mode, Mode::Drop(_));
        let deadline = quick
            .then(|| started.checked_add(response_timeout))
            .flatten();
        let field = &hold.record.field;
        let mut released = self.run_release(lock, field, &made, deadline, |at| {
            lock.kind.release_to(at, field, &request_id, to)
        });
        let (Mode::Drop(make) | Mode::Unlock(make)) = mode else {
            return self.released(lock, hold, released?, successor);
        };
        let unconfirmed = |released: &Result<ReleasedTo>| matches!(released, Err(Error::Redis(e)) if is_transient(e));
        if !unconfirmed(&released) {
            return self.released(lock, hold, released?, successor);
        }
        // Unconfirmed: until Redis confirms it, an acquire of this lock by
        // this thread waits for it (see `pending.rs`).
        let pending = || {
            let lease_end = match hold.renewal {
                Renewal::Leased { expires_at } => expires_at,
                _ => None,
            };
            Pending::new(
                request_id.clone(),
                made.load(Ordering::SeqCst),
                (started, Resends::Retries.latch_ttl(self.server.config())),
                Arc::clone(&hold.record),
                lease_end,
                make(),
            )
        };
        if quick {
            if self.pending.push(pending()).is_ok() {
                log::debug!(
                    "redhold: release of {:?} unconfirmed after {response_timeout:?}; \
                     carried on in the background",
                    names::shorten(lock.name)
                );
                return Ok(());
            }
            // No room: wait for it here, within the retry rule.
            released = self.run_release(lock, field, &made, None, |at| {
                lock.kind
                    .release(at, field, &request_id)
                    .map(ReleasedTo::code)
            });
        }
        match released {
            Err(Error::Redis(source)) if is_transient(&source) => {
                if self.pending.push(pending()).is_err() {
                    log::warn!(
                        "redhold: too many releases pending; the lock {:?} expires after its TTL",
                        names::shorten(lock.name)
                    );
                }
                Err(Error::ReleaseUnconfirmed {
                    lock: names::shorten(lock.name),
                    waited: started.elapsed(),
                    source,
                })
            }
            released => self.released(lock, hold, released?, successor),
        }
    }

    /// What a release's reply means for `hold` (and the `successor` it
    /// may have been handed to).
    fn released<K: KindOps>(
        &self,
        lock: LockRef<'_, K>,
        hold: &Hold,
        released: ReleasedTo,
        successor: Option<Reserved>,
    ) -> Result<()> {
        // Dropped unsettled (an error, or no hand-over), the reserved
        // waiter wakes and tries the lock itself.
        let ReleasedTo {
            reply,
            token,
            heard,
        } = released;
        match reply {
            Some(HANDED_OVER) => {
                if let Some(reserved) = successor {
                    reserved.hand_over(HANDOFF_GRACE, token);
                    Counters::bump(&self.counters.direct_handoffs);
                }
                Ok(())
            }
            // A retry found our field gone and no latch: had an earlier
            // attempt released the hold, its reply would have been latched
            // and replayed. The hold was lost before this release (an
            // expiry, a restart), whatever our book says: reporting `Ok`
            // would tell the caller its critical section was exclusive.
            Some(GONE_ON_RETRY) => {
                self.renewals.mark_lost(&hold.record);
                Err(self.lost(lock.name, hold))
            }
            Some(HOLDS_REMAIN) if !hold.record.is_live() && hold.record.kind == RenewKind::Hash => {
                // The generation's last hold, yet Redis counts more under
                // our field: holds no guard stands for (a background
                // release that was never confirmed, see `pending.rs`).
                // Left, they would keep the lock until its TTL.
                self.release_unguarded(lock, &hold.record.field);
                Ok(())
            }
            Some(freed) => {
                if freed == ANNOUNCED {
                    if let Some(channel) = lock.kind.shared_channel() {
                        self.pubsub
                            .released(channel, lock.name, HANDOFF_GRACE, heard);
                    }
                }
                Ok(())
            }
            None => {
                // Redis has no hold of ours: the generation's other guards
                // are stale too.
                self.renewals.mark_lost(&hold.record);
                Err(self.lost(lock.name, hold))
            }
        }
    }

    /// Releases one hold of the calling thread that no guard stands for
    /// (given up with `leak`); [`Error::NotHeld`] when there is none.
    pub(crate) fn unlock<K: KindOps>(&self, lock: LockRef<'_, K>) -> Result<()> {
        names::validate(lock.name)?;
        self.server.check_open()?;
        let field = self.field(lock.kind);
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
            None => match self.release_script(lock, &field)? {
                Some(GONE_ON_RETRY) | None => Err(not_held(lock.name)),
                Some(_) => Ok(()),
            },
        }
    }

    /// Keeps `hold` without a guard, until [`unlock`](Self::unlock).
    pub(crate) fn leak(&self, hold: &Hold) {
        self.renewals.leak(&hold.record, hold.is_watched());
    }

    /// Gives back the holds Redis counts under `field` after the thread's
    /// last guard of the lock was released (a few at most, each a round
    /// trip). Best effort: a failure leaves them to the lock's TTL.
    #[cold]
    fn release_unguarded<K: KindOps>(&self, lock: LockRef<'_, K>, field: &str) {
        let _giving_back = self.server.giving_back();
        for _ in 0..MAX_ORPHANS_RELEASED {
            match self.release_script(lock, field) {
                Ok(Some(HOLDS_REMAIN)) => continue,
                Ok(_) => return,
                Err(e) => {
                    log::warn!(
                        "redhold: giving back a hold no guard stands for of {:?} failed: {}; \
                         the lock stays held until its TTL runs out",
                        names::shorten(lock.name),
                        e.report()
                    );
                    return;
                }
            }
        }
    }

    /// Runs the kind's release script once for `field`.
    pub(super) fn release_script<K: KindOps>(
        &self,
        lock: LockRef<'_, K>,
        field: &str,
    ) -> Result<Option<i64>> {
        let request_id = self.next_request_id();
        let made = AtomicU32::new(0);
        self.run_release(lock, field, &made, None, |at| {
            lock.kind.release(at, field, &request_id)
        })
    }

    /// Runs one release request of `lock`'s kind for `field`: `made`
    /// counts its attempts (for the unlock latch), which end at `deadline`
    /// when one is given.
    ///
    /// Not before the undos written behind the thread's late acquires of
    /// the lock have run (`attempt.rs`): each gives back one hold only while
    /// the field counts more than the guards stood for when it was written,
    /// so a release that ran before its late acquire would leave that hold
    /// standing. Waiting for them fails like an outage (one response
    /// timeout at most, or `deadline`): a drop's release then goes on in
    /// the background, where the worker waits for them too.
    fn run_release<K: KindOps, T>(
        &self,
        lock: LockRef<'_, K>,
        field: &str,
        made: &AtomicU32,
        deadline: Option<Instant>,
        script: impl FnOnce(crate::kind::Target<'_>) -> Result<T>,
    ) -> Result<T> {
        self.undos.settle(lock.name, field, deadline)?;
        let mut at = target(&self.server, lock);
        at.deadline = deadline;
        at.attempts_made = Some(made);
        script(at).map_err(|e| crate::kind::wrong_kind(lock.name, K::DESCRIPTION, e))
    }

    /// A parked thread of this client to hand the lock to, when this
    /// release of `hold` is the generation's last and the kind allows it.
    fn successor<K: KindOps>(&self, lock: LockRef<'_, K>, hold: &Hold) -> Option<Reserved> {
        if hold.record.is_live() {
            // Holds remain: this release does not free the lock.
            return None;
        }
        lock.kind.handover()?;
        self.pubsub
            .reserve_successor(lock.kind.shared_channel()?, lock.name)
    }
}

fn not_held(name: &str) -> Error {
    Error::NotHeld {
        lock: names::shorten(name),
    }
}

impl Engine {
    /// The error of a hold found lost, with its cause: a lease that has
    /// passed ran out; otherwise one `EXISTS` (only on this rare path) tells
    /// a lock someone else holds now from one that is gone.
    fn lost(&self, name: &str, hold: &Hold) -> Error {
        let lease_over = match hold.renewal {
            Renewal::Leased {
                expires_at: Some(at),
            } => Instant::now() >= at,
            _ => false,
        };
        let cause = if lease_over {
            LossCause::LeaseExpired
        } else {
            let exists: Result<bool> = self
                .server
                .run(|conn| redis::cmd("EXISTS").arg(name).query(conn));
            match exists {
                Ok(true) => LossCause::TakenOver,
                Ok(false) => LossCause::Vanished,
                Err(e) => {
                    log::warn!(
                        "redhold: cannot tell why {:?} was lost: {}",
                        names::shorten(name),
                        e.report()
                    );
                    LossCause::Unknown
                }
            }
        };
        Error::LockLost {
            lock: names::shorten(name),
            cause,
        }
    }
}
