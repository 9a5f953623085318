//! The client's lanes, one per (lock name, holder field) in use, and what
//! they share: the server, the renewal map, the bound on what they keep,
//! and the release worker that settles what nobody else does.
//!
//! A lane exists while someone uses it or it keeps an entry; an idle lane
//! is dropped, so the registry holds only lanes in use. Every entry point
//! checks for a forked child first: a child must not touch a lane (its
//! locks may have been copied held by a thread the child does not have).

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

use parking_lot::{Condvar, Mutex};

use super::entry::{Entry, NoRoom};
use super::one::Lane;
use super::pending::{earlier_request_on_its_way, Settling};
use crate::error::Result;
use crate::renewals::RenewalMap;
use crate::server::Server;

/// The most entries all lanes keep at once (releases and undos): a drop
/// that finds no room waits for its own release instead, and an undo
/// without room is written but no longer awaited.
const MAX_ENTRIES: usize = 2048;

/// A lock name and a holder field.
type LaneKey = (Arc<str>, Arc<str>);

/// The client's lanes.
pub(crate) struct Lanes {
    shared: Arc<Shared>,
}

/// What the lanes, their turns and the worker share.
pub(crate) struct Shared {
    server: Arc<Server>,
    renewals: Arc<RenewalMap>,
    lanes: Mutex<HashMap<LaneKey, Arc<Lane>>>,
    /// Entries in every lane, and how many of them are releases.
    entries: AtomicUsize,
    releases: AtomicUsize,
    pub(super) control: Mutex<Control>,
    /// Wakes the worker: an entry was added, or shutdown began.
    pub(super) wake: Condvar,
}

/// The worker's state.
#[derive(Debug, Default)]
pub(super) struct Control {
    /// Set at shutdown: the worker makes its last attempts until then.
    pub(super) stop_at: Option<Instant>,
    /// An entry was added since the worker last looked.
    pub(super) nudged: bool,
    pub(super) worker: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for Lanes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lanes")
            .field("in_use", &self.shared.lanes.lock().len())
            .field("entries", &self.shared.entries.load(Ordering::Relaxed))
            .finish()
    }
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared").finish_non_exhaustive()
    }
}

impl Lanes {
    /// No lanes yet; the worker starts with the first entry.
    pub(crate) fn new(server: Arc<Server>, renewals: Arc<RenewalMap>) -> Lanes {
        Lanes {
            shared: Arc::new(Shared {
                server,
                renewals,
                lanes: Mutex::default(),
                entries: AtomicUsize::new(0),
                releases: AtomicUsize::new(0),
                control: Mutex::default(),
                wake: Condvar::new(),
            }),
        }
    }

    /// Takes the turn on the lane of `field` in `name` for a step of
    /// `call` (if any) and settles every entry, all by `deadline`: then the
    /// step may send. Fails like an outage when the turn or an entry is not
    /// ready by then.
    pub(crate) fn enter(
        &self,
        name: &Arc<str>,
        field: &Arc<str>,
        call: Option<u64>,
        deadline: Instant,
    ) -> Result<Turn<'_>> {
        let turn = self.take(name, field, call, Some(deadline))?;
        turn.settle(deadline)?;
        Ok(turn)
    }

    /// Takes the turn, waiting as long as others keep it (each step that
    /// does has a bound of its own), without settling anything: for the
    /// end of an acquire call, which must write its late attempts' undos
    /// whatever the server does.
    pub(crate) fn enter_unsettled(
        &self,
        name: &Arc<str>,
        field: &Arc<str>,
        call: Option<u64>,
    ) -> Result<Turn<'_>> {
        self.take(name, field, call, None)
    }

    /// The turn on a lane that keeps nothing and that nobody uses now, for
    /// a release that hands the lock to that lane's holder (a parked
    /// thread of this client): `None` otherwise, and no hand-over then.
    pub(crate) fn take_quiet(&self, name: &Arc<str>, field: &Arc<str>) -> Option<Turn<'_>> {
        self.shared.server.check_process().ok()?;
        let lane = self.shared.join(name, field);
        if !lane.try_take_turn() {
            self.shared.leave(&lane);
            return None;
        }
        let turn = Turn {
            shared: &self.shared,
            lane,
            call: None,
        };
        (!turn.has_entries()).then_some(turn)
    }

    /// Adds `entry` to its lane without the turn: a release not sent yet
    /// (it goes after everything the lane keeps), or a synchronizer's
    /// give-back on a lane of its own. Whoever takes the turn next, the
    /// worker at the latest, sends it. Given back when the client keeps too
    /// many entries already.
    pub(crate) fn hand_to_worker(
        &self,
        name: &Arc<str>,
        field: &Arc<str>,
        entry: Entry,
    ) -> std::result::Result<(), NoRoom> {
        if self.shared.server.check_process().is_err() {
            return Err(NoRoom);
        }
        let lane = self.shared.join(name, field);
        let pushed = self.shared.push(&lane, entry);
        self.shared.leave(&lane);
        pushed
    }

    /// [`hand_to_worker`](Self::hand_to_worker) of the entry `make` returns,
    /// if any, with `make` run under the lane's lock: a release that
    /// forgets its hold there is never seen half done by a step counting
    /// the holder's holds (see [`Turn::with_state`]). Fails in a forked
    /// child before `make` runs.
    pub(crate) fn hand_to_worker_with<T>(
        &self,
        name: &Arc<str>,
        field: &Arc<str>,
        make: impl FnOnce() -> (T, Option<Entry>),
    ) -> Result<(T, std::result::Result<(), NoRoom>)> {
        self.shared.server.check_process()?;
        let lane = self.shared.join(name, field);
        let outcome = {
            let mut state = lane.state.lock();
            let (made, entry) = make();
            let pushed = match entry {
                Some(entry) => self.shared.admit(&entry).map(|()| state.insert(entry)),
                None => Ok(()),
            };
            (made, pushed)
        };
        self.shared.nudge();
        self.shared.leave(&lane);
        Ok(outcome)
    }

    /// How many releases the server has not confirmed yet.
    pub(crate) fn pending_releases(&self) -> usize {
        self.shared.releases.load(Ordering::Relaxed)
    }

    /// Lets the worker make its last attempts until `deadline`, then waits
    /// for it to end (each attempt ends by the deadline too). What is
    /// still unconfirmed then is left to its TTL, with a warning.
    pub(crate) fn shutdown(&self, deadline: Instant) {
        let worker = {
            let mut control = self.shared.control.lock();
            control.stop_at = Some(deadline);
            control.worker.take()
        };
        self.shared.wake.notify_all();
        if let Some(worker) = worker {
            let _ = worker.join();
        }
    }

    fn take(
        &self,
        name: &Arc<str>,
        field: &Arc<str>,
        call: Option<u64>,
        deadline: Option<Instant>,
    ) -> Result<Turn<'_>> {
        // Before any lock is touched: in a forked child one may be held
        // by a thread that does not exist there.
        self.shared.server.check_process()?;
        let lane = self.shared.join(name, field);
        if !lane.take_turn(call, deadline) {
            self.shared.leave(&lane);
            return Err(earlier_request_on_its_way(name));
        }
        Ok(Turn {
            shared: &self.shared,
            lane,
            call,
        })
    }
}

impl Drop for Lanes {
    /// The last client clone is gone without `shutdown`: the worker gets one
    /// more round (one request's time) and ends on its own.
    fn drop(&mut self) {
        let config = self.shared.server.config();
        let grace = config
            .connect_timeout
            .saturating_add(config.response_timeout);
        let mut control = self.shared.control.lock();
        if control.stop_at.is_none() {
            control.stop_at = Some(
                Instant::now()
                    .checked_add(grace)
                    .unwrap_or_else(Instant::now),
            );
        }
        drop(control);
        self.shared.wake.notify_all();
    }
}

impl Shared {
    pub(super) fn server(&self) -> &Server {
        &self.server
    }

    /// The lane of `field` in `name`, made if need be, counted as used.
    pub(super) fn join(&self, name: &Arc<str>, field: &Arc<str>) -> Arc<Lane> {
        let mut lanes = self.lanes.lock();
        let lane = lanes
            .entry((Arc::clone(name), Arc::clone(field)))
            .or_insert_with(|| Arc::new(Lane::new(name, field)));
        lane.users.fetch_add(1, Ordering::Relaxed);
        Arc::clone(lane)
    }

    /// One use of `lane` is over; an idle lane nobody uses is dropped.
    pub(super) fn leave(&self, lane: &Arc<Lane>) {
        let mut lanes = self.lanes.lock();
        if lane.users.fetch_sub(1, Ordering::Relaxed) == 1 && lane.is_idle() {
            let key = (Arc::clone(&lane.name), Arc::clone(&lane.field));
            if lanes.get(&key).is_some_and(|l| Arc::ptr_eq(l, lane)) {
                lanes.remove(&key);
            }
        }
    }

    /// Every lane in use now.
    pub(super) fn all_lanes(&self) -> Vec<Arc<Lane>> {
        self.lanes.lock().values().cloned().collect()
    }

    /// The lanes that keep entries, each counted as used (see [`leave`]).
    ///
    /// [`leave`]: Self::leave
    pub(super) fn with_entries(&self) -> Vec<Arc<Lane>> {
        let lanes = self.lanes.lock();
        lanes
            .values()
            .filter(|lane| lane.has_entries())
            .map(|lane| {
                lane.users.fetch_add(1, Ordering::Relaxed);
                Arc::clone(lane)
            })
            .collect()
    }

    /// Adds `entry` to `lane` unless the client keeps too many, and makes
    /// sure the worker will see it.
    pub(super) fn push(
        self: &Arc<Self>,
        lane: &Lane,
        entry: Entry,
    ) -> std::result::Result<(), NoRoom> {
        self.admit(&entry)?;
        lane.push(entry);
        self.nudge();
        Ok(())
    }

    /// Counts `entry` in, unless the client keeps too many or the worker
    /// cannot run; the caller then adds it to its lane and nudges.
    fn admit(self: &Arc<Self>, entry: &Entry) -> std::result::Result<(), NoRoom> {
        if self.entries.fetch_add(1, Ordering::SeqCst) >= MAX_ENTRIES || !self.start_worker() {
            self.entries.fetch_sub(1, Ordering::SeqCst);
            return Err(NoRoom);
        }
        if entry.is_release() {
            self.releases.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    }

    /// Makes sure the worker looks at the lanes again soon.
    fn nudge(&self) {
        self.control.lock().nudged = true;
        self.wake.notify_one();
    }

    /// Settles `lane`'s entries by `deadline` (the caller holds its turn).
    pub(super) fn settle(&self, lane: &Lane, deadline: Instant) -> Result<()> {
        let at = Settling {
            server: &self.server,
            renewals: &self.renewals,
            name: &lane.name,
        };
        lane.settle(&at, deadline, |entry| self.entry_settled(entry))
    }

    /// An entry left its lane.
    pub(super) fn entry_settled(&self, entry: &Entry) {
        self.entries.fetch_sub(1, Ordering::SeqCst);
        if entry.is_release() {
            self.releases.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// The turn on one lane: only its holder sends requests that name the
/// lane's field, and adds what the server has not confirmed. Given back
/// when dropped.
#[derive(Debug)]
pub(crate) struct Turn<'a> {
    pub(super) shared: &'a Arc<Shared>,
    pub(super) lane: Arc<Lane>,
    pub(super) call: Option<u64>,
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        self.lane.give_back_turn();
        self.shared.leave(&self.lane);
    }
}
