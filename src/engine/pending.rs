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

use std::sync::atomic::{AtomicBool, AtomicU32};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use super::undos::LateUndos;
use crate::error::Result;
use crate::kind::Target;
use crate::renewals::{HoldRecord, RenewalMap};
use crate::server::Server;

mod worker;

/// Runs one attempt of a kind's release script: `(target, field, request id)`.
pub(crate) type ReleaseFn =
    Arc<dyn Fn(Target<'_>, &str, &str) -> Result<Option<i64>> + Send + Sync>;

/// The most releases waiting at once; a drop that finds the queue full
/// waits for its own release (within the retry rule's bound) instead.
const MAX_PENDING: usize = 1024;
/// The worker's first pause between rounds, and its longest.
const FIRST_PAUSE: Duration = Duration::from_millis(100);
const MAX_PAUSE: Duration = Duration::from_secs(1);

/// One release not yet confirmed by Redis, or a synchronizer call's
/// give-back (`record` then `None`: see [`Pending::give_back`]).
pub(crate) struct Pending {
    pub(crate) name: Arc<str>,
    pub(crate) field: Arc<str>,
    pub(crate) request_id: String,
    /// Attempts sent so far, by whoever sent them: later ones are retries.
    pub(crate) attempts_made: AtomicU32,
    /// The generation the hold belonged to (already forgotten locally);
    /// `None` for a give-back.
    pub(crate) record: Option<Arc<HoldRecord>>,
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
            record: Some(record),
            lease_end,
            latch_alive_until: first_sent.checked_add(latch_ttl),
            run,
            busy: Mutex::new(()),
            settled: AtomicBool::new(false),
        }
    }

    /// The give-back that ends a synchronizer call (on `name`) that could
    /// not send it in time: `run` reads the call's latch, which lives
    /// until `latch_alive_until`, gives back what the call took and closes
    /// the latch; sent again until it runs, or until its latch may be gone
    /// (then what was taken stays taken, and a warning says so).
    pub(crate) fn give_back(name: Arc<str>, latch_alive_until: Instant, run: ReleaseFn) -> Pending {
        Pending {
            name,
            field: Arc::from(""),
            request_id: String::new(),
            attempts_made: AtomicU32::new(1),
            record: None,
            lease_end: None,
            latch_alive_until: Some(latch_alive_until),
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
    /// The undos behind late acquires: a release waits for those of its
    /// lock and field (see `worker.rs`).
    undos: Arc<LateUndos>,
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
    pub(crate) fn new(
        server: Arc<Server>,
        renewals: Arc<RenewalMap>,
        undos: Arc<LateUndos>,
    ) -> Self {
        PendingReleases {
            shared: Arc::new(Shared {
                server,
                renewals,
                undos,
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
