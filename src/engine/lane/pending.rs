//! A release the server has not confirmed, on its lane: resent with the
//! same request id (the unlock latch keeps it exactly-once) only while its
//! latch outlives the attempt, and settled by a reply or once no copy of it
//! can still run (see `entry.rs` for the table).

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::engine::request_ids::RequestIds;
use crate::error::{is_transient, Error, Result};
use crate::kind::{Target, GONE_ON_RETRY, HOLDS_REMAIN};
use crate::names;
use crate::renewals::{HoldRecord, RenewKind, RenewalMap};
use crate::server::Server;

/// Runs one attempt of a kind's release script: `(target, field, request id)`.
pub(crate) type ReleaseFn =
    Arc<dyn Fn(Target<'_>, &str, &str) -> Result<Option<i64>> + Send + Sync>;

/// What one attempt to settle an entry found.
#[derive(Debug)]
pub(crate) enum Outcome {
    /// Settled: the entry leaves the lane.
    Settled,
    /// Not settled, but it moved on (one more hold no guard stands for is
    /// to be given back, as a new request): try it again at once.
    Again,
    /// Not yet (the server is away, or a resend could outlive its latch):
    /// the error a caller waiting on the lane reports, like an outage.
    NotYet(Error),
}

/// What an entry's attempt needs: the server, the renewal map, and the
/// lane's lock name.
pub(crate) struct Settling<'a> {
    pub(crate) server: &'a Server,
    pub(crate) renewals: &'a RenewalMap,
    pub(crate) name: &'a Arc<str>,
}

/// How many holds no guard stands for a background release gives back
/// after its own, at most, when it hears "holds remain" for the
/// generation's last hold: more means something else writes our field.
const MORE_UNGUARDED: u32 = 7;

/// Who a release is for, and what a reply means for them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Purpose {
    /// A guard's release: its generation is marked lost when Redis had no
    /// hold of ours left.
    Guard,
    /// Holds Redis counts under the field that no guard stands for; with
    /// `more` left, a reply "holds remain" while no guard holds the lock
    /// gives back one more.
    Unguarded { more: u32 },
    /// The give-back that ends a synchronizer call: it reads the call's
    /// latch and gives back what the call took.
    SyncGiveBack,
}

/// A release (or give-back) whose reply has not come yet, or that was not
/// sent yet. Every attempt carries the same request id, so the unlock latch
/// keeps it exactly-once.
pub(crate) struct PendingRelease {
    /// The field it releases a hold of. A release that may hand the lock
    /// over waits on the successor's lane too, which has another field.
    field: Arc<str>,
    /// Settled on one lane: the other (a successor's) lets it go too.
    done: AtomicBool,
    pub(crate) request_id: Mutex<String>,
    /// Attempts sent so far, by whoever sent them: later ones are retries.
    pub(crate) attempts_made: AtomicU32,
    /// When the first attempt was sent; `None` while none was.
    first_sent: Mutex<Option<Instant>>,
    /// How long the request's latch lives from the first send (for a
    /// synchronizer's give-back: from the call's latch, given as a moment).
    latch: Latch,
    /// The generation the hold belonged to (already forgotten locally).
    pub(crate) record: Option<Arc<HoldRecord>>,
    /// When the released hold's lease ran out, if it had one.
    pub(crate) lease_end: Option<Instant>,
    pub(crate) run: ReleaseFn,
    purpose: Mutex<Purpose>,
    /// Makes a fresh request id for [`Purpose::Unguarded`]'s next give-back.
    requests: Option<Arc<RequestIds>>,
}

/// A release request as its sender leaves it to the lane.
#[derive(Debug)]
pub(crate) struct Unconfirmed {
    /// The field it releases a hold of.
    pub(crate) field: Arc<str>,
    pub(crate) request_id: String,
    /// Attempts sent so far.
    pub(crate) attempts_made: u32,
    /// When the first was sent; `None`: none was.
    pub(crate) first_sent: Option<Instant>,
    /// How long its latch lives from the first send.
    pub(crate) latch_ttl: Duration,
}

/// How long a pending request's latch lives for sure.
#[derive(Debug, Clone, Copy)]
enum Latch {
    /// This long from the first attempt's send.
    FromFirstSend(Duration),
    /// Until this moment (a synchronizer call's latch, written already).
    Until(Instant),
}

impl PendingRelease {
    /// `request`, a release of one hold of the generation `record` (with
    /// the hold's lease end), carried on with `run`; `requests` makes the
    /// ids of the give-backs that may follow it.
    pub(crate) fn new(
        request: Unconfirmed,
        record: Option<(Arc<HoldRecord>, Option<Instant>)>,
        run: ReleaseFn,
        requests: Arc<RequestIds>,
    ) -> PendingRelease {
        let (record, lease_end) = record.map_or((None, None), |(r, end)| (Some(r), end));
        PendingRelease {
            field: request.field,
            done: AtomicBool::new(false),
            request_id: Mutex::new(request.request_id),
            attempts_made: AtomicU32::new(request.attempts_made),
            first_sent: Mutex::new(request.first_sent),
            latch: Latch::FromFirstSend(request.latch_ttl),
            record,
            lease_end,
            run,
            purpose: Mutex::new(Purpose::Guard),
            requests: Some(requests),
        }
    }

    /// Gives back, one by one, up to `more` + 1 holds no guard stands for,
    /// each with a fresh request id.
    pub(crate) fn unguarded(self, more: u32) -> PendingRelease {
        *self.purpose.lock() = Purpose::Unguarded { more };
        self
    }

    /// The give-back that ends a synchronizer call that could not send it
    /// in time: `run` reads the call's latch, which lives until
    /// `latch_alive_until`, gives back what the call took and closes the
    /// latch; sent until it runs, or until its latch may be gone (then
    /// what was taken stays taken, and a warning says so).
    pub(crate) fn sync_give_back(latch_alive_until: Instant, run: ReleaseFn) -> PendingRelease {
        PendingRelease {
            field: Arc::from(""),
            done: AtomicBool::new(false),
            request_id: Mutex::new(String::new()),
            attempts_made: AtomicU32::new(1),
            first_sent: Mutex::new(Some(Instant::now())),
            latch: Latch::Until(latch_alive_until),
            record: None,
            lease_end: None,
            run,
            purpose: Mutex::new(Purpose::SyncGiveBack),
            requests: None,
        }
    }

    /// Whether no attempt was sent yet.
    pub(super) fn is_unsent(&self) -> bool {
        self.first_sent.lock().is_none()
    }

    /// Until when the request's latch lives for sure, once it was sent.
    fn latch_alive_until(&self) -> Option<Instant> {
        match self.latch {
            Latch::FromFirstSend(ttl) => (*self.first_sent.lock())?.checked_add(ttl),
            Latch::Until(at) => Some(at),
        }
    }

    /// One attempt, ending by `deadline`: sent only while its latch
    /// outlives it; settled by a reply, or once no copy can still run.
    pub(super) fn attempt(&self, at: &Settling<'_>, deadline: Instant, others: u32) -> Outcome {
        if self.done.load(Ordering::SeqCst) {
            return Outcome::Settled;
        }
        let outcome = self.attempt_once(at, deadline, others);
        if matches!(outcome, Outcome::Settled) {
            self.done.store(true, Ordering::SeqCst);
        }
        outcome
    }

    fn attempt_once(&self, at: &Settling<'_>, deadline: Instant, others: u32) -> Outcome {
        let now = Instant::now();
        let sent = self.first_sent.lock().is_some();
        match self.latch_alive_until() {
            // Every copy of it ran by now, or never will: its outcome is
            // unknown, and a hold it did not release is one Redis counts
            // beyond the guards (given back by the orphan rules).
            Some(until) if sent && now >= until => return self.unconfirmed(at),
            // Sent now, it could reach Redis after its latch is gone and
            // release a second hold. Not sent: wait for the latch's end,
            // when no earlier copy can run any more.
            Some(until) if sent && deadline >= until => {
                return Outcome::NotYet(earlier_request_on_its_way(at.name));
            }
            _ => {}
        }
        if !sent {
            if self.certainly_expired(at.server) {
                return self.unconfirmed(at);
            }
            *self.first_sent.lock() = Some(now);
        }
        let request_id = self.request_id.lock().clone();
        let target = Target {
            server: at.server,
            name: at.name,
            deadline: Some(deadline),
            attempts_made: Some(&self.attempts_made),
            late: None,
            undo_above: None,
            recorder: None,
        };
        match (self.run)(target, &self.field, &request_id) {
            Ok(reply) => self.answered(at, reply, others),
            Err(Error::Redis(e)) if is_transient(&e) => Outcome::NotYet(Error::Redis(e)),
            Err(e) => {
                // Not an outage (a forked child, a wrong kind): retrying
                // would not help.
                log::warn!(
                    "redhold: releasing lock {:?} in the background failed: {}",
                    names::shorten(at.name),
                    e.report()
                );
                Outcome::Settled
            }
        }
    }

    /// What a reply means; settled, or re-armed for one more unguarded hold
    /// (only when no other release of the lane is still to run: holds Redis
    /// counts beyond the guards are theirs to release first).
    fn answered(&self, at: &Settling<'_>, reply: Option<i64>, others: u32) -> Outcome {
        let purpose = *self.purpose.lock();
        match (purpose, reply) {
            (Purpose::Guard, Some(GONE_ON_RETRY) | None) => {
                // Redis had no hold of ours: it was lost before its
                // release; the generation's other guards are stale too.
                if let Some(record) = &self.record {
                    at.renewals.mark_lost(record);
                }
                log::warn!(
                    "redhold: the lock {:?} had been lost before its release on guard drop",
                    names::shorten(at.name)
                );
            }
            // The generation's last release, no other release of the
            // field still to run, yet Redis counts more holds under it (a
            // release never confirmed while its latch lived): give those
            // back too, as no guard stands for them.
            (Purpose::Guard, Some(HOLDS_REMAIN))
                if others == 0
                    && self
                        .record
                        .as_ref()
                        .is_some_and(|r| !r.is_live() && r.kind == RenewKind::Hash)
                    && at.renewals.counted(at.name, &self.field) == 0 =>
            {
                *self.purpose.lock() = Purpose::Unguarded {
                    more: MORE_UNGUARDED,
                };
                return self.answered(at, reply, others);
            }
            (Purpose::Unguarded { more }, Some(HOLDS_REMAIN))
                if more > 0 && others == 0 && at.renewals.counted(at.name, &self.field) == 0 =>
            {
                // More holds no guard stands for: one more give-back, a new
                // request (the lane is still ours: no guard came meanwhile).
                if let Some(requests) = &self.requests {
                    *self.request_id.lock() = requests.next();
                    self.attempts_made.store(0, Ordering::SeqCst);
                    *self.first_sent.lock() = None;
                    *self.purpose.lock() = Purpose::Unguarded { more: more - 1 };
                    return Outcome::Again;
                }
            }
            _ => {}
        }
        Outcome::Settled
    }

    /// No reply can come any more: logged, and left to the orphan rules.
    fn unconfirmed(&self, at: &Settling<'_>) -> Outcome {
        match *self.purpose.lock() {
            Purpose::SyncGiveBack => log::warn!(
                "redhold: semaphore {:?}: an acquire whose reply was lost could not be \
                 given back while its request latch lived; what it took stays taken",
                names::shorten(at.name)
            ),
            _ => log::debug!(
                "redhold: a release of lock {:?} was never confirmed while its latch lived; \
                 a hold it did not release is given back as one no guard stands for",
                names::shorten(at.name)
            ),
        }
        Outcome::Settled
    }

    /// Whether the hold a release never sent has expired in Redis for
    /// sure: its generation ended here (nothing renews the key any more)
    /// and the longest TTL it may have had, counted generously, is over.
    fn certainly_expired(&self, server: &Server) -> bool {
        let Some(record) = &self.record else {
            return false;
        };
        if record.is_live() {
            return false;
        }
        let config = server.config();
        let slack = config
            .connect_timeout
            .saturating_add(config.response_timeout)
            .saturating_mul(2);
        let renewed_until = record
            .last_confirmed()
            .checked_add(config.watchdog_timeout.saturating_add(slack));
        let now = Instant::now();
        renewed_until.is_some_and(|at| now >= at)
            && self
                .lease_end
                .is_none_or(|end| end.checked_add(slack).is_some_and(|at| now >= at))
    }
}

/// The error of a request that waits behind an earlier one of the same
/// lock and holder that the server has not confirmed: a timeout, as an
/// outage is (a waiting call rides it out; the others fail fast).
pub(crate) fn earlier_request_on_its_way(name: &str) -> Error {
    Error::Redis(redis::RedisError::from(std::io::Error::new(
        std::io::ErrorKind::TimedOut,
        format!(
            "an earlier request of this holder on lock {:?} is not confirmed yet",
            names::shorten(name)
        ),
    )))
}
