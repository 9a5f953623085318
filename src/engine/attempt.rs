//! One acquire attempt, and what to do when its outcome is unknown.
//!
//! An acquire's reply can be lost (the connection dropped or timed out),
//! cut short or unreadable (garbled): the script may have run or not. Left
//! alone, a script that ran holds the lock with no guard and no watchdog
//! (blocking everyone for a lease), or counts a re-entry this thread will
//! never release. Every kind resolves it the same two ways (see
//! `docs/design.md`, "An acquire whose reply is lost"), which both rest on
//! one rule:
//!
//! - **A re-entry never takes the lock anew.** A thread that counts holds
//!   of the lock sends its acquire as a re-entry only: when Redis has lost
//!   those holds (an expiry, a restart, a force-unlock), the script changes
//!   nothing and says so, and the call ends their generation and sends a
//!   plain acquire. Otherwise a lock taken anew would count exactly the
//!   holds the thread had, which no count can tell from the old ones, and
//!   a guard of the lost holds could release it and say `Ok` although
//!   another holder came in between.
//! - **Repeat.** The attempt is sent again (the pool's retries, and a
//!   waiting call's next attempt after an outage): a script that ran has
//!   made the lock ours, so the repeat re-enters it and replies with the
//!   thread's hold count in Redis; [`Call::hold`](super::Call) gives back
//!   the holds counted beyond the guards. A repeat that finds the lock
//!   busy proves that no earlier attempt took it.
//! - **Settle.** A call that ends with an error while its last attempt's
//!   outcome is unknown reads, on a fresh connection, how many holds Redis
//!   counts under the thread's field (`HGET`, the same for every kind:
//!   plain, fair, fenced, spin, read and write holds all count there) and
//!   gives back every hold beyond those its guards stand for, or every
//!   hold Redis counts when that is fewer than the guards (the guards'
//!   holds were lost: what Redis has is the failed call's).

use std::cell::RefCell;
use std::time::{Duration, Instant};

use super::give_back::MAX_ORPHANS_RELEASED;
use super::lane::{Entry, Turn};
use super::{Call, Taken};
use crate::error::{reply_was_read, Error, Result};
use crate::kind::sealed::{unexpected_reply, KindOps};
use crate::kind::Target;
use crate::kind::{AcquireReply, AcquireRequest, Attempt};
use crate::names;
use crate::server::backend::Conn;
use crate::server::{Recorder, Resends, Trailing};

impl<K: KindOps> Call<'_, K> {
    /// One acquire attempt, a step on the lock's lane for this thread: it
    /// goes once every earlier request of the thread on the lock is
    /// confirmed (a release still on its way would decrement the same
    /// field after it), and fails like an outage until then. An acquire
    /// that the replicas did not confirm in time (`sync_replicas`) is
    /// undone before the error is returned. Notes whether its outcome is
    /// unknown, for [`settle_unsure`].
    ///
    /// A thread that counts holds of the lock sends a re-entry only: when
    /// Redis has lost those holds, their generation is over (its guards
    /// are stale) and a second request takes the lock anew.
    ///
    /// [`settle_unsure`]: Self::settle_unsure
    pub(super) fn try_acquire(&self, may_queue: bool) -> Result<Taken<K::Grant>> {
        let engine = self.engine;
        engine.server.check_open()?;
        let turn = self.step()?;
        let started = Instant::now();
        // A generation whose leases all ran out is over, whatever the call
        // takes and however it ends: a guard of it releasing a hold taken
        // since would answer `Ok` for a lock others may have entered
        // meanwhile (model defect 10). A live one lasts at least as long
        // as this acquire's TTL, which a re-entry sets even when the call
        // does not keep its hold (model defect 11).
        let reaches = started.checked_add(Duration::from_millis(self.lease_ms));
        let holds_here = engine
            .renewals
            .before_acquire(self.lock.name, &self.field, reaches)
            > 0;
        let mut reply = self.send_acquire(&turn, may_queue, holds_here);
        if holds_here && matches!(reply, Ok(AcquireReply::HoldsGone)) {
            self.holds_gone();
            // Releases of those holds left by another thread of an owner
            // meanwhile have nothing to release now.
            turn.drop_unsent_releases();
            reply = self.send_acquire(&turn, may_queue, false);
        }
        if !self.late.borrow().is_empty() {
            // Until their undos are written, no other call's step may
            // send on this lane (see `lane.rs`).
            turn.keep_for_late_call();
        }
        match reply? {
            AcquireReply::Ran(Attempt::Acquired { grant, holds }) => {
                Ok(Taken::Held(self.hold(Some(&turn), started, grant, holds)))
            }
            AcquireReply::Ran(Attempt::Busy(ttl)) => Ok(Taken::Busy(ttl)),
            // Only a re-entry replies so.
            AcquireReply::HoldsGone => Err(unexpected_reply(self.lock.name, "holds gone")),
        }
    }

    /// The thread's holds of the lock are gone from Redis: their
    /// generation ends, and its guards report the loss.
    fn holds_gone(&self) {
        let renewals = &self.engine.renewals;
        if let Some(record) = renewals.find(self.lock.name, &self.field) {
            if renewals.mark_lost(&record) {
                log::warn!(
                    "redhold: lock {:?} was lost (expired or deleted) while held; \
                     found on re-entry",
                    names::shorten(self.lock.name)
                );
            }
        }
    }

    /// Sends one acquire request (see [`AcquireRequest`]) on the step's
    /// `turn`.
    fn send_acquire(
        &self,
        turn: &Turn<'_>,
        may_queue: bool,
        holds_here: bool,
    ) -> Result<AcquireReply<K::Grant>> {
        let request = AcquireRequest {
            lease_ms: self.lease_ms,
            field: &self.field,
            may_queue,
            holds_here,
        };
        let kept_before = self.late.borrow().kept();
        let attempt = self
            .lock
            .kind
            .try_acquire(self.target(), request)
            .map_err(|e| crate::kind::wrong_kind(self.lock.name, K::DESCRIPTION, e));
        // A reply read whole says what happened; anything else may hide a
        // script that ran.
        self.unsure
            .set(matches!(&attempt, Err(Error::Redis(e)) if !reply_was_read(e)));
        self.unsure_is_late
            .set(self.unsure.get() && self.late.borrow().kept() > kept_before);
        if let Err(Error::ReplicasNotSynced { .. }) = &attempt {
            self.undo_unreplicated(turn);
        }
        attempt
    }

    /// The call ends with an error: when its last attempt's outcome is
    /// unknown, gives back every hold Redis counts under the thread's field
    /// beyond those this client counts, so that no hold stays in Redis
    /// that no guard owns and a re-entry's count agrees with Redis. One
    /// look, within one response timeout (Redis is likely away when the
    /// call failed on the network): when it fails, a hold the attempt may
    /// have taken expires after its lease, renewed by nobody. Runs on the
    /// call's last `turn`, whose earlier requests are all confirmed.
    #[cold]
    pub(super) fn settle_unsure(&self, turn: &Turn<'_>) {
        if !self.unsure.replace(false) || self.unsure_is_late.get() {
            // Nothing unknown, or the last attempt may still run: a look
            // now could come before it. Its undo follows it instead.
            return;
        }
        let here = self.engine.renewals.counted(self.lock.name, &self.field);
        let config = self.engine.server.config();
        let deadline = Instant::now().checked_add(config.response_timeout);
        let in_redis = self
            .engine
            .server
            .pool()
            .run_until(deadline, |conn| {
                redis::cmd("HGET")
                    .arg(&**self.lock.name)
                    .arg(&*self.field)
                    .query::<Option<i64>>(conn)
            })
            .map(|count| u32::try_from(count.unwrap_or(0)).unwrap_or(0));
        match in_redis {
            Ok(in_redis) => {
                // A thread's count in Redis only drops by its releases
                // (settled before the attempt) or all at once (expiry, a
                // wipe, a force-unlock), and a re-entry never takes the
                // lock anew. Below the holds counted here, those holds are
                // gone, and whatever Redis has is this call's: the call
                // failed, so none has a guard.
                let extra = if in_redis < here {
                    self.holds_gone();
                    in_redis
                } else {
                    in_redis - here
                };
                for _ in 0..extra.min(MAX_ORPHANS_RELEASED) {
                    if !self.give_back_one(turn, "a hold whose acquire reply was lost") {
                        return;
                    }
                }
            }
            Err(e) => log::warn!(
                "redhold: cannot tell whether an acquire of {:?} whose reply was lost \
                 took the lock ({}); if it did, the hold expires after its lease",
                names::shorten(self.lock.name),
                e.report()
            ),
        }
    }

    /// The call is over, with the lock, without it or with an error: every
    /// attempt of it that timed out may still run on a stalled server (or
    /// arrive late over a slow path), after the attempt that ended the call.
    /// An undo follows each (see [`undo_behind`](Self::undo_behind)),
    /// counting the holds Redis must keep once it has run: those the
    /// thread's guards stand for now (the call's own included when it took
    /// the lock), and one for each release on the lane not yet confirmed
    /// (it runs after the undo, or ran before it: then the late hold is
    /// left to the orphan rules, never a guarded one released). Then other
    /// calls' steps may send on the lane again.
    pub(super) fn undo_late(&self, turn: &Turn<'_>) {
        let (late, cut) = {
            let mut late = self.late.borrow_mut();
            (late.take(), late.cut_since_answer())
        };
        if !late.is_empty() {
            let keep_until =
                Instant::now() + Resends::Retries.latch_ttl(self.engine.server.config());
            // A late attempt that re-enters a hold of the thread's sets the
            // key's TTL when it runs, up to its undo's keep time.
            let reaches = keep_until.checked_add(Duration::from_millis(self.lease_ms));
            self.engine
                .renewals
                .late_attempts_may_reach(self.lock.name, &self.field, reaches);
            let above = turn.with_state(|_, releases| {
                let here = self.engine.renewals.counted(self.lock.name, &self.field);
                here.saturating_add(releases)
            });
            self.undo_behind(turn, late, above, cut, keep_until);
        }
        turn.late_undone();
    }

    /// Undoes an acquire the replicas did not confirm (`sync_replicas`):
    /// every hold of the field above those the guards and the lane's
    /// releases stand for (`above:N`, as behind a late attempt; several,
    /// as the pool may have run the acquire twice, its first reply cut),
    /// left on the lane as an undo whose connection is still to be made:
    /// the lane's next settle sends it, one copy at a time, read like an
    /// undo behind a late attempt (see `lane/entry.rs`), and no later
    /// request of the field runs before it is confirmed. Conditional, so
    /// that a copy sent again across a failover, to a replica that never
    /// had the acquire, gives back no hold a guard stands for; waiting for
    /// no replica, as it stands on the master, which the next acquire
    /// checks.
    #[cold]
    fn undo_unreplicated(&self, turn: &Turn<'_>) {
        let engine = self.engine;
        let above = turn.with_state(|_, releases| {
            let here = engine.renewals.counted(self.lock.name, &self.field);
            here.saturating_add(releases)
        });
        let keep_until = Instant::now() + Resends::Retries.latch_ttl(engine.server.config());
        let recorder = RefCell::new(Recorder::default());
        let at = Target {
            undo_above: Some(above),
            recorder: Some(&recorder),
            ..self.target()
        };
        // The pool runs the acquire once per attempt, at most.
        let attempts = engine
            .server
            .config()
            .retry_attempts
            .saturating_add(1)
            .min(8);
        for _ in 0..attempts {
            let _ = self
                .lock
                .kind
                .release(at, &self.field, &engine.next_request_id());
        }
        let (commands, count) = recorder.into_inner().into_commands();
        let undo = Trailing::unwritten(&commands, count, keep_until);
        if turn.push(Entry::Undo(Box::new(undo.into()))).is_err() {
            log::warn!(
                "redhold: too many requests unconfirmed; an unreplicated acquire of {:?} is \
                 not undone, and its hold expires after its lease",
                names::shorten(self.lock.name)
            );
            return;
        }
        // Sent now, within one response timeout; what is not confirmed by
        // then stays on the lane for its next settle (or the worker's).
        if let Err(e) = turn.settle(engine.step_deadline()) {
            log::debug!(
                "redhold: the undo of an unreplicated acquire of {:?} is not confirmed yet: {}",
                names::shorten(self.lock.name),
                e.report()
            );
        }
    }

    /// Writes an undo behind each attempt of the call that a stalled server
    /// may run late: the kind's release with the condition "only while the
    /// field counts more than `above` holds", and its give-up (a fair
    /// queue's entry; nothing for other kinds), recorded, then written on
    /// the attempt's own connection, so that it runs right after the
    /// attempt, whenever that is. Each waits on the lane until its reply is
    /// read: no later request of the field may run before it, or its count
    /// check could not tell a later hold from the late one.
    ///
    /// Attempts cut before their reply since the call's last answer (`cut`:
    /// they ran or not, and no answer counted them; the call skipped its
    /// settling look, a late attempt being still on its way) may each hold
    /// one more: the last late attempt's undo gives back that many more,
    /// with the same condition, so never one a guard stands for. The
    /// undos are kept until `keep_until` (the late attempts' latch life).
    #[cold]
    fn undo_behind(
        &self,
        turn: &Turn<'_>,
        late: Vec<Conn>,
        above: u32,
        cut: usize,
        keep_until: Instant,
    ) {
        let engine = self.engine;
        let last = late.len().saturating_sub(1);
        for (n, conn) in late.into_iter().enumerate() {
            let recorder = RefCell::new(Recorder::default());
            let at = Target {
                undo_above: Some(above),
                recorder: Some(&recorder),
                ..self.target()
            };
            // Recorded, not sent: the errors say so. A fair lock's late
            // acquire may have queued the thread: it leaves the queue too
            // (the call's own give-up may have come before it).
            let releases = if n == last { 1 + cut } else { 1 };
            for _ in 0..releases {
                let _ = self
                    .lock
                    .kind
                    .release(at, &self.field, &engine.next_request_id());
            }
            let _ = self.lock.kind.give_up(at, &self.field);
            let (commands, count) = recorder.into_inner().into_commands();
            let trailing = match Trailing::follow(conn, &commands, count, keep_until) {
                Ok(trailing) => trailing,
                // Written in part, maybe, behind a request still on its
                // way: no copy may go while that part may run.
                Err(e) if e.is_timeout() => {
                    log::warn!(
                        "redhold: an acquire of {:?} may run late on a stalled server, and \
                         its undo could not follow it ({e}); if it runs, the hold expires \
                         after its lease",
                        names::shorten(self.lock.name)
                    );
                    continue;
                }
                // The connection failed before the undo was written: the
                // late request ran or never will, and the undo goes on
                // another connection at the entry's first settle.
                Err(_) => Trailing::unwritten(&commands, count, keep_until),
            };
            if turn.push(Entry::Undo(Box::new(trailing.into()))).is_err() {
                // Its connection closes; the server still runs what it
                // got, but nobody waits for it.
                log::warn!(
                    "redhold: too many requests unconfirmed; the undo behind a late acquire \
                     of {:?} is no longer awaited",
                    names::shorten(self.lock.name)
                );
            }
        }
    }
}
