//! Releases carried on in the background: a guard's drop gives its first
//! attempt one response timeout; a release still unconfirmed then is handed
//! to one worker thread of the client, which retries it (same request id,
//! so the unlock latch keeps it exactly-once) until Redis confirms it, the
//! hold's TTL has certainly run out, or an attempt could reach Redis after
//! the latch may have expired. Then it is not sent again (a resend without
//! its latch would release a second hold): a hold it did not release is
//! one Redis counts beyond the generation's guards, given back by the
//! generation's last release or the thread's next acquire (see
//! `engine/release.rs` and `renewals.rs`).
//!
//! A pending release decrements the same hash field (`<uuid>:<thread>`) as
//! every later hold of that thread on that lock, so an acquire of the same
//! (lock, field) first settles the pending releases of that pair (see
//! [`PendingReleases::settle`]): until Redis confirmed them, its own attempt
//! fails like one that found Redis unreachable. Redis therefore never
//! counts a new hold that a late release could take away.

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::error::{is_transient, Error, Result};
use crate::kind::{Target, GONE_ON_RETRY};
use crate::names;
use crate::renewals::{HoldRecord, RenewalMap};
use crate::server::request::retry_bound;
use crate::server::Server;

/// Runs one attempt of a kind's release script: `(target, field, request id)`.
pub(crate) type ReleaseFn =
    Arc<dyn Fn(Target<'_>, &str, &str) -> Result<Option<i64>> + Send + Sync>;

/// The most releases waiting at once; a drop that finds the queue full
/// waits for its own release (within the retry rule's bound) instead.
pub(super) const MAX_PENDING: usize = 1024;
/// The worker's first pause between rounds, and its longest.
const FIRST_PAUSE: Duration = Duration::from_millis(100);
const MAX_PAUSE: Duration = Duration::from_secs(1);

/// One release not yet confirmed by Redis.
pub(crate) struct Pending {
    pub(crate) name: Arc<str>,
    pub(crate) field: Arc<str>,
    pub(crate) request_id: String,
    /// Attempts sent so far, by whoever sent them: later ones are retries.
    pub(crate) attempts_made: AtomicU32,
    /// The generation the hold belonged to (already forgotten locally).
    pub(crate) record: Arc<HoldRecord>,
    /// When the released hold's lease ran out, if it had one.
    pub(crate) lease_end: Option<Instant>,
    /// Until when the request's unlock latch lives for sure (its TTL from
    /// the first attempt's send): no attempt is sent that could reach
    /// Redis after it, since it would find no latch and release again.
    latch_alive_until: Option<Instant>,
    pub(crate) run: ReleaseFn,
    /// Held while one attempt is under way: attempts never overlap.
    busy: Mutex<()>,
    settled: AtomicBool,
}

impl Pending {
    /// A release of `record`'s hold that has made `attempts_made` attempts,
    /// the first sent at `first_sent` with a latch of `latch_ttl`.
    pub(crate) fn new(
        request_id: String,
        attempts_made: u32,
        (first_sent, latch_ttl): (Instant, Duration),
        record: Arc<HoldRecord>,
        lease_end: Option<Instant>,
        run: ReleaseFn,
    ) -> Pending {
        Pending {
            name: Arc::clone(&record.name),
            field: Arc::clone(&record.field),
            request_id,
            attempts_made: AtomicU32::new(attempts_made),
            record,
            lease_end,
            latch_alive_until: first_sent.checked_add(latch_ttl),
            run,
            busy: Mutex::new(()),
            settled: AtomicBool::new(false),
        }
    }
}

/// What the worker and the acquires share.
struct Shared {
    server: Arc<Server>,
    renewals: Arc<RenewalMap>,
    queue: Mutex<Vec<Arc<Pending>>>,
    wake: Condvar,
    /// Set at shutdown: the worker makes its last attempts until then.
    stop_at: Mutex<Option<Instant>>,
}

/// The client's pending releases and the worker that retries them (started
/// with the first one).
pub(crate) struct PendingReleases {
    shared: Arc<Shared>,
    worker: Mutex<Option<JoinHandle<()>>>,
}

impl std::fmt::Debug for PendingReleases {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PendingReleases")
            .field("pending", &self.shared.queue.lock().len())
            .finish()
    }
}

impl PendingReleases {
    pub(crate) fn new(server: Arc<Server>, renewals: Arc<RenewalMap>) -> Self {
        PendingReleases {
            shared: Arc::new(Shared {
                server,
                renewals,
                queue: Mutex::default(),
                wake: Condvar::new(),
                stop_at: Mutex::new(None),
            }),
            worker: Mutex::new(None),
        }
    }

    /// Queues `pending` for the worker; gives it back when the queue is
    /// full or the worker cannot start (the caller then waits for it).
    pub(crate) fn push(&self, pending: Pending) -> std::result::Result<(), Pending> {
        let mut worker = self.worker.lock();
        if self.shared.stop_at.lock().is_some() {
            return Err(pending);
        }
        if worker.is_none() {
            let shared = Arc::clone(&self.shared);
            match thread::Builder::new()
                .name("redhold-release".into())
                .spawn(move || shared.work())
            {
                Ok(handle) => *worker = Some(handle),
                Err(_) => return Err(pending),
            }
        }
        let mut queue = self.shared.queue.lock();
        if queue.len() >= MAX_PENDING {
            return Err(pending);
        }
        queue.push(Arc::new(pending));
        self.shared.wake.notify_one();
        Ok(())
    }

    /// Settles every pending release of `field` on `name` before the
    /// calling thread acquires that lock again: one attempt each (within
    /// `deadline`), in order. An error when one is still unconfirmed: the
    /// acquire must not go ahead (its caller treats it as an outage).
    pub(crate) fn settle(&self, name: &str, field: &str, deadline: Option<Instant>) -> Result<()> {
        let mine: Vec<Arc<Pending>> = {
            let queue = self.shared.queue.lock();
            if queue.is_empty() {
                return Ok(());
            }
            queue
                .iter()
                .filter(|p| &*p.name == name && &*p.field == field)
                .cloned()
                .collect()
        };
        for pending in mine {
            let _busy = pending.busy.lock();
            self.shared.attempt(&pending, deadline)?;
        }
        Ok(())
    }

    /// How many releases are pending.
    pub(crate) fn len(&self) -> usize {
        self.shared.queue.lock().len()
    }

    /// Lets the worker make its last attempts until `deadline`, then waits
    /// for it to end (each attempt ends by the deadline too). Releases still
    /// unconfirmed then are left to their TTL, with a warning.
    pub(crate) fn shutdown(&self, deadline: Instant) {
        let worker = {
            let mut worker = self.worker.lock();
            *self.shared.stop_at.lock() = Some(deadline);
            self.shared.wake.notify_all();
            worker.take()
        };
        if let Some(worker) = worker {
            let _ = worker.join();
        }
    }
}

impl Drop for PendingReleases {
    /// The last client clone is gone without `shutdown`: the worker gets one
    /// more round (one request's time) and ends on its own.
    fn drop(&mut self) {
        let config = self.shared.server.config();
        let grace = config
            .connect_timeout
            .saturating_add(config.response_timeout);
        let mut stop_at = self.shared.stop_at.lock();
        if stop_at.is_none() {
            *stop_at = Some(
                Instant::now()
                    .checked_add(grace)
                    .unwrap_or_else(Instant::now),
            );
        }
        self.shared.wake.notify_all();
    }
}

impl Shared {
    /// The worker: rounds of one attempt per pending release, with a
    /// growing pause while Redis does not answer.
    fn work(self: Arc<Self>) {
        // These are our own holds: given back even while shutting down.
        let _giving_back = self.server.giving_back();
        let mut pause = FIRST_PAUSE;
        loop {
            let stop_at = *self.stop_at.lock();
            let round: Vec<Arc<Pending>> = self.queue.lock().clone();
            if round.is_empty() || stop_at.is_some_and(|at| Instant::now() >= at) {
                if stop_at.is_some() {
                    self.abandon_all();
                    return;
                }
                let mut queue = self.queue.lock();
                if queue.is_empty() {
                    self.wake.wait_for(&mut queue, MAX_PAUSE);
                }
                pause = FIRST_PAUSE;
                continue;
            }
            let mut failed = false;
            for pending in round {
                // An acquire of the same lock may be settling it right now.
                let Some(_busy) = pending.busy.try_lock() else {
                    continue;
                };
                let deadline = attempt_deadline(&self.server, stop_at);
                failed |= self.attempt(&pending, Some(deadline)).is_err();
            }
            if failed {
                let mut queue = self.queue.lock();
                self.wake.wait_for(&mut queue, jittered(pause));
                pause = pause.saturating_mul(2).min(MAX_PAUSE);
            }
        }
    }

    /// One attempt of `pending` (the caller holds its `busy` lock).
    fn attempt(&self, pending: &Arc<Pending>, deadline: Option<Instant>) -> Result<()> {
        if pending.settled.load(Ordering::SeqCst) {
            return Ok(());
        }
        if !self.latch_outlives(pending, deadline) {
            // Sent now, the request could find its latch gone and release
            // a second hold. It is not sent again: it ran or it never
            // will. A hold it did not release is one Redis counts beyond
            // the generation's guards, which the generation's last release
            // or the thread's next acquire of the lock gives back.
            log::debug!(
                "redhold: the release of lock {:?} was not confirmed while its latch lived; \
                 not sent again",
                names::shorten(&pending.name)
            );
            self.settled(pending);
            return Ok(());
        }
        let target = Target {
            server: &self.server,
            name: &pending.name,
            deadline,
            attempts_made: Some(&pending.attempts_made),
            late: None,
            undo_above: None,
            recorder: None,
        };
        let outcome = (pending.run)(target, &pending.field, &pending.request_id);
        match outcome {
            Ok(Some(GONE_ON_RETRY)) | Ok(None) => {
                // Redis had no hold of ours: the hold was lost before its
                // release; the generation's other guards are stale too.
                self.renewals.mark_lost(&pending.record);
                log::warn!(
                    "redhold: the lock {:?} had been lost before its release on guard drop",
                    names::shorten(&pending.name)
                );
                self.settled(pending);
                Ok(())
            }
            Ok(Some(_)) => {
                self.settled(pending);
                Ok(())
            }
            Err(Error::Redis(e)) if is_transient(&e) => {
                if self.certainly_expired(pending) {
                    log::warn!(
                        "redhold: releasing lock {:?} on guard drop was never confirmed ({e}); \
                         its TTL has run out meanwhile",
                        names::shorten(&pending.name)
                    );
                    self.settled(pending);
                }
                Err(Error::Redis(e))
            }
            Err(e) => {
                // Not an outage (a forked child, a wrong kind): retrying
                // would not help.
                log::warn!(
                    "redhold: releasing lock {:?} on guard drop failed: {}",
                    names::shorten(&pending.name),
                    e.report()
                );
                self.settled(pending);
                Err(e)
            }
        }
    }

    /// Whether an attempt that ends by `deadline` (the retry rule's bound
    /// without one) reaches Redis while the request's latch surely lives.
    fn latch_outlives(&self, pending: &Pending, deadline: Option<Instant>) -> bool {
        let arrives_by =
            deadline.or_else(|| Instant::now().checked_add(retry_bound(self.server.config())));
        match (arrives_by, pending.latch_alive_until) {
            (Some(arrives_by), Some(alive_until)) => arrives_by < alive_until,
            _ => false,
        }
    }

    /// Whether the released hold has expired in Redis for sure: its
    /// generation ended here (nothing renews the key any more) and the
    /// longest TTL it may have had, counted generously, is over.
    fn certainly_expired(&self, pending: &Pending) -> bool {
        if pending.record.is_live() {
            return false;
        }
        let config = self.server.config();
        let slack = config
            .connect_timeout
            .saturating_add(config.response_timeout)
            .saturating_mul(2);
        let renewed_until = pending
            .record
            .last_confirmed()
            .checked_add(config.watchdog_timeout.saturating_add(slack));
        let now = Instant::now();
        renewed_until.is_some_and(|at| now >= at)
            && pending
                .lease_end
                .is_none_or(|end| end.checked_add(slack).is_some_and(|at| now >= at))
    }

    fn settled(&self, pending: &Arc<Pending>) {
        pending.settled.store(true, Ordering::SeqCst);
        self.queue.lock().retain(|p| !Arc::ptr_eq(p, pending));
    }

    /// Shutdown came before Redis confirmed these: their locks expire
    /// after their TTL (the watchdog no longer renews them).
    fn abandon_all(&self) {
        for pending in self.queue.lock().drain(..) {
            pending.settled.store(true, Ordering::SeqCst);
            log::warn!(
                "redhold: the release of lock {:?} was not confirmed before shutdown; \
                 the lock expires after its TTL",
                names::shorten(&pending.name)
            );
        }
    }
}

/// One response timeout from now, cut to the shutdown deadline.
fn attempt_deadline(server: &Server, stop_at: Option<Instant>) -> Instant {
    let now = Instant::now();
    let one = now
        .checked_add(server.config().response_timeout)
        .unwrap_or(now);
    stop_at.map_or(one, |stop| one.min(stop))
}

/// Between half of `pause` and all of it, at random.
fn jittered(pause: Duration) -> Duration {
    let half = pause / 2;
    let span = u64::try_from(half.as_nanos()).unwrap_or(u64::MAX);
    let random = RandomState::new().hash_one(Instant::now());
    half + Duration::from_nanos(random % span.saturating_add(1))
}
