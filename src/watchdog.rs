//! The watchdog: one thread per client that renews every lock held without a
//! lease, every third of the watchdog timeout, in batches.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, RecvTimeoutError, Sender};
use parking_lot::Mutex;

use crate::error::{Error, Result};
use crate::lost_callbacks::{LostHold, LostNotifier};
use crate::names;
use crate::renewals::{HoldRecord, RenewalMap};
use crate::scripts;
use crate::server::{slot, Server};
use crate::stats::Counters;

/// Locks renewed per script call: 10,000 held locks cost 100 round trips.
pub(crate) const RENEW_BATCH: usize = 100;

/// Handle on the watchdog thread.
pub(crate) struct Watchdog {
    /// Dropping the sender stops the thread.
    stop: Mutex<Option<Sender<()>>>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl fmt::Debug for Watchdog {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Watchdog")
            .field("running", &self.thread.lock().is_some())
            .finish()
    }
}

/// What the watchdog thread needs, and nothing of the client that owns it.
pub(crate) struct Renewer {
    pub(crate) server: Arc<Server>,
    pub(crate) renewals: Arc<RenewalMap>,
    pub(crate) timeout: Duration,
    pub(crate) counters: Arc<Counters>,
    /// Where lost locks are reported for the `on_lock_lost` callback, which
    /// runs on its own thread: it cannot delay the renewals.
    pub(crate) on_lost: LostNotifier,
}

impl Watchdog {
    /// Starts the watchdog thread.
    pub(crate) fn start(renewer: Renewer) -> Result<Watchdog> {
        let (stop, stopped) = bounded::<()>(0);
        let period = renewer.timeout / 3;
        let thread = thread::Builder::new()
            .name("redhold-watchdog".into())
            .spawn(move || {
                // Ends when the client drops or shuts down the sender.
                while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(period) {
                    renewer.pass();
                    Counters::bump(&renewer.counters.renewal_passes);
                }
            })
            .map_err(|source| Error::Spawn {
                thread: "redhold-watchdog",
                source,
            })?;
        Ok(Watchdog {
            stop: Mutex::new(Some(stop)),
            thread: Mutex::new(Some(thread)),
        })
    }

    /// Stops the thread and waits for it (at most one pass in flight).
    pub(crate) fn shutdown(&self) {
        drop(self.stop.lock().take());
        if let Some(thread) = self.thread.lock().take() {
            if thread.join().is_err() {
                log::error!("the redhold watchdog thread panicked");
            }
        }
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        drop(self.stop.lock().take());
    }
}

/// What one renewal pass did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PassReport {
    pub(crate) renewed: usize,
    pub(crate) lost: usize,
    pub(crate) round_trips: usize,
}

impl Renewer {
    /// Renews every held lock once. A lock Redis no longer has for us is
    /// marked lost at once; a lock we cannot reach Redis for is marked lost
    /// only when its TTL must have run out.
    pub(crate) fn pass(&self) -> PassReport {
        let mut report = PassReport::default();
        let mut lost_names = Vec::new();
        let records = self.renewals.snapshot();
        let timeout_ms = crate::config::saturating_millis(self.timeout);
        let mut unreachable = false;
        for batch in self.batches(records) {
            let batch = batch.as_slice();
            let started = Instant::now();
            let outcome = if unreachable {
                None
            } else {
                report.round_trips += 1;
                // Waiting for an answer past the first lease's end would
                // only delay reporting that lock lost.
                let deadline = batch
                    .iter()
                    .filter_map(|record| record.last_confirmed().checked_add(self.timeout))
                    .min();
                match self.renew_batch(batch, timeout_ms, deadline) {
                    Ok(flags) if flags.len() == batch.len() => Some(flags),
                    Ok(flags) => {
                        log::error!(
                            "redhold watchdog: renewal replied {} results for {} locks",
                            flags.len(),
                            batch.len()
                        );
                        None
                    }
                    Err(e) => {
                        log::warn!("redhold watchdog: cannot renew locks: {}", e.report());
                        unreachable = e.is_connection_error();
                        None
                    }
                }
            };
            for (i, record) in batch.iter().enumerate() {
                let lost = match outcome.as_ref().map(|flags| flags[i]) {
                    Some(true) => {
                        record.confirmed_at(started);
                        report.renewed += 1;
                        false
                    }
                    Some(false) => true,
                    // No answer: the lock lives in Redis until its TTL, counted
                    // from the last confirmation, runs out. Judged now, not at
                    // `started`: the failed attempt may have taken a while.
                    None => record.last_confirmed().elapsed() >= self.timeout,
                };
                if lost && self.renewals.mark_lost(record) {
                    lost_names.push(Arc::clone(record));
                }
            }
        }
        report.lost = lost_names.len();
        for record in lost_names {
            log::warn!(
                "redhold: lock {:?} was lost (expired or deleted) while held",
                names::shorten(&record.name)
            );
            self.on_lost
                .notify(LostHold::new(&record.name, &record.field));
        }
        report
    }

    /// Splits the held locks into script calls: up to [`RENEW_BATCH`] locks
    /// each, and on a cluster only locks of one slot per call (a script may
    /// only touch keys of one slot there).
    fn batches(&self, records: Vec<Arc<HoldRecord>>) -> Vec<Vec<Arc<HoldRecord>>> {
        let chunked = |group: &[Arc<HoldRecord>]| {
            group
                .chunks(RENEW_BATCH)
                .map(<[_]>::to_vec)
                .collect::<Vec<_>>()
        };
        if !self.server.is_cluster() {
            return chunked(&records);
        }
        let mut by_slot: BTreeMap<u16, Vec<Arc<HoldRecord>>> = BTreeMap::new();
        for record in records {
            by_slot
                .entry(slot::of(record.name.as_bytes()))
                .or_default()
                .push(record);
        }
        by_slot.values().flat_map(|group| chunked(group)).collect()
    }

    fn renew_batch(
        &self,
        batch: &[Arc<HoldRecord>],
        timeout_ms: u64,
        deadline: Option<Instant>,
    ) -> Result<Vec<bool>> {
        let (flags, acknowledged) = self.server.pool().run_write(
            deadline,
            None,
            |conn| {
                let mut call = scripts::RENEW.prepare_invoke();
                call.arg(timeout_ms);
                for record in batch {
                    call.key(&*record.name)
                        .arg(record.kind.mode())
                        .arg(&*record.field);
                }
                let flags: Vec<i64> = call.invoke(conn)?;
                Ok(flags.into_iter().map(|f| f == 1).collect::<Vec<bool>>())
            },
            |flags| flags.contains(&true),
        )?;
        if let (Some(acknowledged), Some(wanted)) =
            (acknowledged, self.server.pool().replicas_wanted())
        {
            if acknowledged < wanted {
                log::warn!(
                    "redhold watchdog: only {acknowledged} of {wanted} replicas acknowledged \
                     a renewal in time"
                );
            }
        }
        Ok(flags)
    }
}
