//! The one acquire / release path that every kind of lock shares, and the
//! parts of a client it needs: the server, pub/sub, the renewal map and
//! the counters. The contended path (subscribe, park, try again) is in
//! [`wait`].
//!
//! The engine knows locks only as a name and a kind ([`LockRef`]); the
//! handles and guards of the public API stand on it.

mod async_acquire;
mod attempt;
mod call_state;
mod finish;
mod first_busy;
mod give_back;
mod holder_field;
mod lane;
pub(crate) mod outage;
mod park_end;
mod record;
mod release;
pub(crate) mod request_ids;
mod unguarded;
mod wait;

use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::hold::Hold;
use crate::holding::Holder;
use crate::interrupt::Interrupt;
use crate::kind::sealed::KindOps;
use crate::kind::Target;
use crate::names;
use crate::pubsub::PubSub;
use crate::renewals::RenewalMap;
use crate::server::Server;
use crate::stats::Counters;
use crate::tasks::Tasks;
use crate::waiting::Waiting;

pub(crate) use async_acquire::AsyncAcquire;
pub(crate) use call_state::CallState;
pub(crate) use lane::ReleaseFn;
use lane::{Lanes, PendingRelease, Turn};
pub(crate) use release::Mode;
use request_ids::RequestIds;

/// How long a thread that did not wait stands back after a local release
/// found waiters parked, so that the woken waiter gets the lock instead of a
/// thread coming straight back for it (barging), or after a local release
/// handed the lock to one of them directly (the newcomer would only find it
/// held, so it parks behind them). A hand-off takes well under a
/// millisecond; the grace only bounds the cost when the wake-up is lost.
const HANDOFF_GRACE: Duration = Duration::from_millis(50);

/// One lock as the engine sees it: its name and its kind's keys.
#[derive(Debug)]
pub(crate) struct LockRef<'a, K> {
    pub(crate) name: &'a Arc<str>,
    pub(crate) kind: &'a K,
}

impl<K> Clone for LockRef<'_, K> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<K> Copy for LockRef<'_, K> {}

/// What every lock of one client shares to acquire, wait and release.
#[derive(Debug)]
pub(crate) struct Engine {
    server: Arc<Server>,
    pubsub: PubSub,
    renewals: Arc<RenewalMap>,
    counters: Arc<Counters>,
    /// Acquire calls under way: shutdown lets them leave their queues and
    /// give back holds taken as it began.
    waiting: Waiting,
    /// The client's id as it appears in holder fields: lowercase, hyphenated.
    id_text: String,
    /// Numbers release requests, for the unlock latch.
    requests: Arc<RequestIds>,
    /// Numbers acquire calls, for the lanes they keep (see `lane.rs`).
    next_call: AtomicU64,
    /// One ordered lane per (lock, holder): every request that names a
    /// holder's field goes through it, and what the server has not
    /// confirmed waits there, settled by the next step or the worker.
    lanes: Lanes,
    /// The threads async calls run their Redis calls and timers on.
    tasks: Tasks,
}

impl Engine {
    /// The engine of the client whose holder fields start with `id_text`.
    pub(crate) fn new(
        server: Arc<Server>,
        pubsub: PubSub,
        renewals: Arc<RenewalMap>,
        counters: Arc<Counters>,
        id_text: String,
        async_threads: usize,
    ) -> Engine {
        Engine {
            tasks: Tasks::new(async_threads),
            lanes: Lanes::new(Arc::clone(&server), Arc::clone(&renewals)),
            server,
            pubsub,
            renewals,
            counters,
            waiting: Waiting::default(),
            requests: Arc::new(RequestIds::new(&id_text)),
            id_text,
            next_call: AtomicU64::new(1),
        }
    }

    /// The deployment every lock of this client lives on.
    pub(crate) fn server(&self) -> &Server {
        &self.server
    }

    /// The holds this client knows of, renewed by its watchdog.
    pub(crate) fn renewals(&self) -> &RenewalMap {
        &self.renewals
    }

    /// What the client counts as it happens, for its stats.
    pub(crate) fn counters(&self) -> &Counters {
        &self.counters
    }

    /// The pub/sub service waiters park on.
    pub(crate) fn pubsub(&self) -> &PubSub {
        &self.pubsub
    }

    /// How long a lock taken without a lease survives without renewal.
    pub(crate) fn watchdog_timeout(&self) -> Duration {
        self.server.config().watchdog_timeout
    }

    /// Stops the pub/sub threads, waking every waiter with
    /// [`Error::Shutdown`], then gives the acquire calls under way `grace`
    /// to leave the queues they joined (a fair lock's) and give back holds
    /// they took as shutdown began. Returns whether all ended in time.
    pub(crate) fn shutdown(&self, grace: Duration) -> bool {
        self.pubsub.shutdown();
        let Some(deadline) = Instant::now().checked_add(grace) else {
            return true;
        };
        let left = self.waiting.wait_until_none(deadline);
        // Releases of dropped guards get what is left of the grace.
        self.lanes.shutdown(deadline);
        // The async calls have ended (counted among the calls above) or
        // been told to: their threads go last.
        self.tasks.shutdown();
        left
    }

    /// The threads async calls run on.
    pub(crate) fn tasks(&self) -> &Tasks {
        &self.tasks
    }

    /// How many releases of dropped guards Redis has not confirmed yet.
    pub(crate) fn pending_releases(&self) -> usize {
        self.lanes.pending_releases()
    }

    /// Carries on, in the release worker, the give-back `undo` that ends a
    /// synchronizer call on `name` and could not be sent now (Redis is
    /// away): sent again until it runs or its request latch may be gone
    /// (`latch_alive_until`). False when the worker cannot take it.
    pub(crate) fn give_back_later(
        &self,
        name: &Arc<str>,
        latch_alive_until: Instant,
        undo: redis::Cmd,
    ) -> bool {
        let run: ReleaseFn = Arc::new(move |at: Target<'_>, _: &str, _: &str| {
            at.server.check_process()?;
            at.server
                .pool()
                .run_until(at.deadline, |conn| undo.query::<redis::Value>(conn))?;
            Ok(Some(1))
        });
        // A lane of its own (no holder field): nobody else sends on it.
        let give_back = PendingRelease::sync_give_back(latch_alive_until, run);
        self.lanes
            .hand_to_worker(
                name,
                &Arc::from(""),
                lane::Entry::Release(Arc::new(give_back)),
            )
            .is_ok()
    }

    /// Settles what the lane of `field` in `name` keeps (releases still on
    /// their way, undos behind late acquires), within one response timeout,
    /// so that what Redis then counts for the holder is what it holds; an
    /// error while one is still unconfirmed. Fails in a forked child
    /// before it touches anything.
    pub(crate) fn settle_pending(&self, name: &Arc<str>, field: &Arc<str>) -> Result<()> {
        self.server.check_process()?;
        let deadline = self.step_deadline();
        self.lanes.enter(name, field, None, deadline).map(drop)
    }

    /// The deadline of a step that may wait one response timeout for its
    /// lane (an acquire attempt, a settle).
    fn step_deadline(&self) -> Instant {
        crate::config::deadline_after(Instant::now(), self.server.config().response_timeout)
    }

    /// Counts a call that may take something in Redis as the client shuts
    /// down, so that shutdown waits for it to give that back (see
    /// [`shutdown`](Self::shutdown)), until the returned value drops; it
    /// may move between threads (an async call's steps).
    pub(crate) fn count_call(self: &Arc<Self>) -> CountedCall {
        self.waiting.count_in();
        CountedCall {
            engine: Arc::clone(self),
        }
    }

    /// Takes the lock, waiting at most `wait` (forever when `None`), with
    /// `lease` or, without one, renewed by the watchdog. `Ok(None)` when the
    /// wait ran out.
    pub(crate) fn acquire<K: KindOps>(
        &self,
        lock: LockRef<'_, K>,
        holder: Holder,
        lease: Option<Duration>,
        wait: Option<Duration>,
        interrupt: Option<&Interrupt>,
    ) -> Result<Option<(Hold, K::Grant)>> {
        let state = self.begin_call(lock, holder, lease)?;
        let call = Call {
            engine: self,
            lock,
            state: &state,
        };
        if interrupt.is_some_and(Interrupt::is_triggered) {
            return Err(call.interrupted());
        }
        // Counted until the call has left any queue it joined and given
        // back a hold it must not keep, so that shutdown can wait for that.
        let _waiting = self.waiting.enter();
        let waits = wait != Some(Duration::ZERO);
        let outcome = if waits {
            call.acquire_waiting(wait, interrupt)
        } else {
            // A try that will not wait joins no queue: nothing to leave.
            call.try_acquire(false).map(|taken| match taken {
                Taken::Held(held) => Some(held),
                Taken::Busy(_) => None,
            })
        };
        call.finish(outcome, waits)
    }
}

/// A call counted for shutdown until dropped: see [`Engine::count_call`].
#[derive(Debug)]
pub(crate) struct CountedCall {
    engine: Arc<Engine>,
}

impl Drop for CountedCall {
    fn drop(&mut self) {
        self.engine.waiting.count_out();
    }
}

/// Where `lock`'s kind runs its scripts.
pub(crate) fn target<'a, K>(server: &'a Server, lock: LockRef<'a, K>) -> Target<'a> {
    Target {
        server,
        name: lock.name,
        deadline: None,
        attempts_made: None,
        late: None,
        undo_above: None,
        recorder: None,
    }
}

/// One acquire call: the engine, the lock, and what the call keeps between
/// its steps ([`CallState`], which an async call carries from one of the
/// client's threads to the next).
struct Call<'a, K> {
    engine: &'a Engine,
    lock: LockRef<'a, K>,
    state: &'a CallState,
}

impl<K> std::ops::Deref for Call<'_, K> {
    type Target = CallState;

    fn deref(&self) -> &CallState {
        self.state
    }
}

/// What one acquire attempt (one step on the lane) ends with: the hold
/// and its grant, or the lock busy with this TTL left.
enum Taken<G> {
    Held((Hold, G)),
    Busy(i64),
}

impl<K: KindOps> Call<'_, K> {
    /// This call's turn on its lane, every earlier request of the holder
    /// on the lock confirmed: a step may send. Fails like an outage when
    /// they are not within one response timeout.
    fn step(&self) -> Result<Turn<'_>> {
        self.engine.lanes.enter(
            self.lock.name,
            &self.field,
            Some(self.id),
            self.engine.step_deadline(),
        )
    }

    fn target(&self) -> Target<'_> {
        Target {
            late: Some(&self.late),
            ..target(&self.engine.server, self.lock)
        }
    }

    fn interrupted(&self) -> Error {
        Error::Interrupted {
            lock: names::shorten(self.lock.name),
        }
    }
}
