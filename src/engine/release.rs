//! The release side: one hold given back, and, when that frees the lock
//! while a thread of this client is parked on it, the lock handed straight
//! to that thread (see `pubsub/handover.rs`). Every release is a step on
//! the lock's lane for the releasing thread (see `lane.rs`).

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Instant;

use super::lane::{Entry, PendingRelease, ReleaseFn, Turn, Unconfirmed};
use super::{target, Engine, LockRef, HANDOFF_GRACE};
use crate::error::{is_transient, Error, LossCause, Result};
use crate::hold::{Hold, Renewal};
use crate::kind::sealed::KindOps;
use crate::kind::{ReleasedTo, Successor, ANNOUNCED, GONE_ON_RETRY, HANDED_OVER, HOLDS_REMAIN};
use crate::names;
use crate::pubsub::Reserved;
use crate::renewals::{Kept, RenewKind, Which};
use crate::server::request::retry_bound;
use crate::server::Resends;
use crate::stats::Counters;

/// How a release waits for Redis to confirm it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Within the retry rule's bound; the caller learns the outcome.
    Wait,
    /// A guard's drop: one response timeout for the whole release (its
    /// turn on the lane included), then the client's release worker
    /// carries it on (see `lane/worker.rs`) and the drop returns.
    Drop,
    /// `LockGuard::unlock`: within the retry rule's bound, then handed to
    /// the worker like a drop's, with [`Error::ReleaseUnconfirmed`].
    Unlock,
}

/// What the release worker runs to carry a release of `lock` on: the
/// kind's release script (the kind's keys, cloned).
pub(super) fn background_release<K: KindOps>(lock: LockRef<'_, K>) -> ReleaseFn {
    let name = Arc::clone(lock.name);
    let kind = lock.kind.clone();
    Arc::new(move |at, field, id| {
        kind.release(at, field, id)
            .map_err(|e| crate::kind::wrong_kind(&name, K::DESCRIPTION, e))
    })
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
        mode: Mode,
    ) -> Result<()> {
        self.server.check_open()?;
        // A hold of a generation that is over is not released at all: the
        // holder's current holds (same hash field) would be the ones
        // released.
        if !hold.record.is_live() {
            return Err(self.lost(lock.name, hold));
        }
        let which = match hold.renewal {
            Renewal::Unguarded => Which::Unguarded,
            _ => Which::Guard {
                watched: hold.is_watched(),
            },
        };
        let started = Instant::now();
        let config = self.server.config();
        let deadline = crate::config::deadline_after(
            started,
            match mode {
                Mode::Drop => config.response_timeout,
                Mode::Wait | Mode::Unlock => retry_bound(config),
            },
        );
        let field = &hold.record.field;
        let request_id = self.next_request_id();
        let pending = |attempts_made: u32, first_sent: Option<Instant>| {
            let lease_end = match hold.renewal {
                Renewal::Leased { expires_at } => expires_at,
                _ => None,
            };
            let request = Unconfirmed {
                field: Arc::clone(field),
                request_id: request_id.clone(),
                attempts_made,
                first_sent,
                latch_ttl: Resends::Retries.latch_ttl(config),
            };
            PendingRelease::new(
                request,
                Some((Arc::clone(&hold.record), lease_end)),
                background_release(lock),
                self.request_ids(),
            )
        };
        // Forget the hold first, on the lane (under its turn, or with the
        // entry that carries the release on): if the release then fails,
        // the lock expires on its own instead of being renewed forever, and
        // no step of the same holder counts the hold as a guard's while
        // Redis still has it, or as Redis's while it is released.
        let turn = match self.lanes.enter(lock.name, field, None, deadline) {
            Ok(turn) => turn,
            // An earlier request of this holder on the lock is not
            // confirmed: this one goes after it, from the worker.
            Err(Error::Redis(e)) if is_transient(&e) && mode != Mode::Wait => {
                let (forgotten, pushed) =
                    self.lanes.hand_to_worker_with(lock.name, field, || {
                        match self.renewals.release_one(&hold.record, which) {
                            Ok(()) => (Ok(()), Some(Entry::Release(Arc::new(pending(0, None))))),
                            Err(kept) => (Err(kept), None),
                        }
                    })?;
                self.kept(lock, hold, forgotten)?;
                if pushed.is_err() {
                    log::warn!(
                        "redhold: too many releases pending; the lock {:?} expires after its TTL",
                        names::shorten(lock.name)
                    );
                }
                return self.carried_on(lock, mode, started, e);
            }
            Err(e) => return Err(e),
        };
        self.kept(lock, hold, self.renewals.release_one(&hold.record, which))?;
        let successor = self.successor(lock, hold);
        let to = successor.as_ref().map(|(reserved, _)| {
            let offer = reserved.offer();
            Successor {
                field: &offer.field,
                lease_ms: offer.lease_ms,
                token_key: offer.token_key.as_deref(),
            }
        });
        let made = AtomicU32::new(0);
        let sent_at = Instant::now();
        let released = self.run_release(lock, &made, Some(deadline), |at| {
            lock.kind.release_to(at, field, &request_id, to)
        });
        match released {
            // Unconfirmed: until Redis confirms it, the next request of this
            // thread on the lock waits for it (see `lane.rs`).
            Err(Error::Redis(e)) if is_transient(&e) => {
                let attempts = made.load(Ordering::SeqCst);
                let sent = (attempts > 0).then_some(sent_at);
                if mode == Mode::Wait && sent.is_none() {
                    return Err(Error::Redis(e));
                }
                let pending = Arc::new(pending(attempts, sent));
                if turn.push(Entry::Release(Arc::clone(&pending))).is_ok() {
                    if let Some((_, successor_lane)) = &successor {
                        // It may still hand the lock over, writing the
                        // successor's field: that lane waits for it too.
                        let _ = successor_lane.push(Entry::Release(pending));
                    }
                    return self.carried_on(lock, mode, started, e);
                }
                // No room: wait for it here, within the retry rule.
                let again = self.run_release(lock, &made, None, |at| {
                    lock.kind
                        .release(at, field, &request_id)
                        .map(ReleasedTo::code)
                });
                if again.is_err() {
                    log::warn!(
                        "redhold: too many releases pending; the lock {:?} expires after its TTL",
                        names::shorten(lock.name)
                    );
                }
                self.released(&turn, lock, hold, again?, None, deadline)
            }
            released => self.released(&turn, lock, hold, released?, successor, deadline),
        }
    }

    /// The error of a release whose hold the renewal map did not forget.
    fn kept<K: KindOps>(
        &self,
        lock: LockRef<'_, K>,
        hold: &Hold,
        forgotten: std::result::Result<(), Kept>,
    ) -> Result<()> {
        match forgotten {
            Ok(()) => Ok(()),
            Err(Kept::Stale) => Err(self.lost(lock.name, hold)),
            // Every hold has a live guard: only that guard may give it back.
            Err(Kept::Guarded) => Err(not_held(lock.name)),
        }
    }

    /// What a release left to the worker tells its caller: a drop returns,
    /// an unlock says it is unconfirmed.
    fn carried_on<K: KindOps>(
        &self,
        lock: LockRef<'_, K>,
        mode: Mode,
        started: Instant,
        source: redis::RedisError,
    ) -> Result<()> {
        match mode {
            Mode::Drop => {
                log::debug!(
                    "redhold: release of {:?} unconfirmed after {:?}; carried on in the \
                     background",
                    names::shorten(lock.name),
                    started.elapsed()
                );
                Ok(())
            }
            Mode::Unlock => Err(Error::ReleaseUnconfirmed {
                lock: names::shorten(lock.name),
                waited: started.elapsed(),
                source,
            }),
            // Internal give-backs and `Lock::unlock`: the error as it came
            // (the release stays on the lane until the server confirms it).
            Mode::Wait => Err(Error::Redis(source)),
        }
    }

    /// What a release's reply means for `hold` (and the `successor` it
    /// may have been handed to); more releases, on the same `turn` and by
    /// `deadline`, when holds no guard stands for remain.
    fn released<K: KindOps>(
        &self,
        turn: &Turn<'_>,
        lock: LockRef<'_, K>,
        hold: &Hold,
        released: ReleasedTo,
        successor: Option<(Reserved, Turn<'_>)>,
        deadline: Instant,
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
                if let Some((reserved, _successor_turn)) = successor {
                    // Recorded now, under the successor's turn, as Redis
                    // counts it: a re-entry by another thread of the same
                    // owner before the waiter wakes is one more hold of it.
                    let offer = reserved.offer();
                    if let Some(at) = reserved.reserved_at() {
                        self.renewals.add_handed(
                            lock.name,
                            &offer.field,
                            lock.kind.renew_kind(),
                            at,
                            offer.lease,
                        );
                    }
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
            Some(HOLDS_REMAIN)
                if !hold.record.is_live()
                    && hold.record.kind == RenewKind::Hash
                    && turn.with_state(|_, releases| releases) == 0 =>
            {
                // The generation's last hold, and no other release of the
                // field still to run (another thread of an owner may have
                // left one), yet Redis counts more under our field: holds
                // no guard stands for (a release never confirmed while its
                // latch lived). Left, they would keep the lock until its TTL.
                self.give_back_unguarded(turn, lock, &hold.record.field, deadline);
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

    /// Runs one release request of `lock`'s kind: `made` counts its
    /// attempts (for the unlock latch), which end at `deadline` when one
    /// is given. The caller holds the turn on the lane, whose earlier
    /// requests are confirmed (the undos behind late acquires included).
    pub(super) fn run_release<K: KindOps, T>(
        &self,
        lock: LockRef<'_, K>,
        made: &AtomicU32,
        deadline: Option<Instant>,
        script: impl FnOnce(crate::kind::Target<'_>) -> Result<T>,
    ) -> Result<T> {
        let mut at = target(&self.server, lock);
        at.deadline = deadline;
        at.attempts_made = Some(made);
        script(at).map_err(|e| crate::kind::wrong_kind(lock.name, K::DESCRIPTION, e))
    }

    /// A parked thread of this client to hand the lock to, when this
    /// release of `hold` is the generation's last and the kind allows it,
    /// with the turn on that thread's lane: the hand-over writes its field,
    /// so only while its lane keeps nothing unconfirmed.
    fn successor<K: KindOps>(
        &self,
        lock: LockRef<'_, K>,
        hold: &Hold,
    ) -> Option<(Reserved, Turn<'_>)> {
        if hold.record.is_live() {
            // Holds remain: this release does not free the lock.
            return None;
        }
        lock.kind.handover()?;
        let reserved = self
            .pubsub
            .reserve_successor(lock.kind.shared_channel()?, lock.name)?;
        // Dropped with the reservation otherwise: the waiter tries itself.
        let quiet = self.lanes.take_quiet(lock.name, &reserved.offer().field)?;
        Some((reserved, quiet))
    }
}

pub(super) fn not_held(name: &str) -> Error {
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
            owner: crate::owner::owner_in_field(&hold.record.field),
        }
    }
}
