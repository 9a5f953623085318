//! The release worker: one thread per client, started with the first
//! entry any lane keeps, that settles what the lanes keep when nobody else
//! does (a guard dropped on a stalled server, an undo nobody waits for).
//!
//! Rounds: every lane with entries whose turn is free gets one settle
//! (in order, until an entry is not ready), within one response timeout.
//! It never waits for a turn someone holds (that step settles the lane
//! itself) and never starts a round without a pause unless the last one
//! settled everything it met: a lane it could not finish, or could not
//! take, costs a pause of 100 ms growing to 1 s while the server does not
//! answer, so it never spins.

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use super::entry::Entry;
use super::one::Lane;
use super::registry::Shared;
use crate::names;

/// The worker's first pause between rounds, and its longest.
const FIRST_PAUSE: Duration = Duration::from_millis(100);
const MAX_PAUSE: Duration = Duration::from_secs(1);

impl Shared {
    /// The worker's loop; ends at the shutdown deadline, or once nothing is
    /// left after shutdown began.
    pub(super) fn work(self: Arc<Self>) {
        // These are our own holds: given back even while shutting down.
        let _giving_back = self.server().giving_back();
        let mut pause = FIRST_PAUSE;
        loop {
            let stop_at = self.control.lock().stop_at;
            if stop_at.is_some_and(|at| Instant::now() >= at) {
                self.abandon_all();
                return;
            }
            let lanes = self.with_entries();
            if lanes.is_empty() {
                if stop_at.is_some() {
                    return;
                }
                self.rest(MAX_PAUSE, false);
                pause = FIRST_PAUSE;
                continue;
            }
            let mut failed = false;
            let mut left = false;
            for lane in &lanes {
                if !lane.try_take_turn() {
                    // A step has it and settles the lane itself.
                    left = true;
                    continue;
                }
                let deadline = attempt_deadline(self.server().config().response_timeout, stop_at);
                failed |= self.settle(lane, deadline).is_err();
                lane.give_back_turn();
            }
            for lane in &lanes {
                self.leave(lane);
            }
            if failed {
                self.rest(jittered(pause), true);
                pause = pause.saturating_mul(2).min(MAX_PAUSE);
            } else if left {
                self.rest(jittered(FIRST_PAUSE), true);
            } else {
                // Everything it met is settled: look again at once.
                pause = FIRST_PAUSE;
            }
        }
    }

    /// Sleeps `pause`, or until an entry is added (unless `full`: a pause
    /// after a failed round is not cut short by new entries) or shutdown.
    fn rest(&self, pause: Duration, full: bool) {
        let until = Instant::now().checked_add(pause);
        let mut control = self.control.lock();
        loop {
            if control.stop_at.is_some() || (!full && std::mem::take(&mut control.nudged)) {
                return;
            }
            let Some(until) = until else {
                return;
            };
            if self.wake.wait_until(&mut control, until).timed_out() {
                control.nudged = false;
                return;
            }
        }
    }
}

/// One response timeout from now, cut to the shutdown deadline.
fn attempt_deadline(response_timeout: Duration, stop_at: Option<Instant>) -> Instant {
    let one = crate::config::deadline_after(Instant::now(), response_timeout);
    stop_at.map_or(one, |stop| one.min(stop))
}

/// Between half of `pause` and all of it, at random.
fn jittered(pause: Duration) -> Duration {
    let half = pause / 2;
    let span = u64::try_from(half.as_nanos()).unwrap_or(u64::MAX);
    let random = RandomState::new().hash_one(Instant::now());
    half + Duration::from_nanos(random % span.saturating_add(1))
}

impl Shared {
    /// Starts the worker unless it runs; false when it cannot run (the
    /// client is shutting down, or the system refused the thread).
    pub(super) fn start_worker(self: &Arc<Self>) -> bool {
        let mut control = self.control.lock();
        if control.stop_at.is_some() {
            return false;
        }
        if control.worker.is_some() {
            return true;
        }
        // The worker holds the lanes' shared part, never the client.
        let shared = Arc::clone(self);
        match thread::Builder::new()
            .name("redhold-release".into())
            .spawn(move || shared.work())
        {
            Ok(handle) => {
                control.worker = Some(handle);
                true
            }
            Err(_) => false,
        }
    }

    /// Forgets every entry: shutdown came before the server confirmed them.
    pub(super) fn abandon_all(&self) {
        let lanes: Vec<Arc<Lane>> = self.all_lanes();
        let now = Instant::now();
        for lane in lanes {
            let entries: Vec<Arc<Entry>> = lane.state.lock().entries.drain(..).collect();
            for entry in entries {
                self.entry_settled(&entry);
                if !entry.is_harmless(now) {
                    log::warn!(
                        "redhold: a request on lock {:?} was not confirmed before shutdown; \
                         the lock expires after its TTL",
                        names::shorten(&lane.name)
                    );
                }
            }
        }
    }
}
