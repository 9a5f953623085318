//! The one history of a schedule: every event of every actor, fault and
//! client, stamped with the test process's monotonic clock when recorded.
//!
//! Actors record an acquire *before* calling it (`Call`), the hold *after*
//! it returned and before the critical section (`Enter`), and the end of
//! the section *before* the release is sent (`Exit`). Child processes send
//! their events over a socket and wait for the parent's ack (see `wire`),
//! so a stamp is never earlier than the event for `Enter` and never later
//! for `Call` and `Exit`: each recorded hold lies inside the real one.

use std::sync::Arc;
use std::time::Instant;

use parking_lot::Mutex;

use crate::targets::Kind;
use crate::wire::Link;

/// Index of an actor, unique in a schedule: one holder, a thread doing
/// lock operations or an owner (`owners.rs`), whose threads and tasks
/// all record under its one id, as Redis counts all its holds in one
/// field.
pub(crate) type ActorId = u32;
/// Id of one hold (one successful acquire), unique in a schedule.
pub(crate) type HoldId = u64;

/// Something that happened, as an actor, the fault thread or a client
/// callback saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Event {
    /// Names an actor for reports: `p0.c1.t2` (process, client, thread).
    Actor { actor: ActorId, label: String },
    /// An acquire is about to be called.
    Call {
        actor: ActorId,
        op: u64,
        /// The tag of the client set used.
        client: String,
        kind: Kind,
        /// Short names joined by `+`.
        names: String,
        /// The call as code.
        method: String,
        /// 0: no lease (watched).
        lease_ms: u64,
        /// -1: unbounded (or interruptible).
        wait_ms: i64,
        /// The actor already held this target.
        reentrant: bool,
    },
    /// The acquire of `op` returned a hold; the section starts.
    Enter {
        actor: ActorId,
        op: u64,
        hold: HoldId,
        /// Fencing token, 0 for other kinds.
        token: u64,
    },
    /// The acquire of `op` returned without a hold (`busy`, `interrupted`,
    /// `shutdown`, `error:…`).
    Miss {
        actor: ActorId,
        op: u64,
        outcome: String,
    },
    /// The section of `hold` ends; the release (`how`) is sent next.
    /// `held` is what `guard.is_held()` said just before.
    Exit {
        actor: ActorId,
        hold: HoldId,
        how: String,
        held: bool,
    },
    /// The release of `hold` returned (`ok`, `lost`, `shutdown`, `dropped`, …).
    Released {
        actor: ActorId,
        hold: HoldId,
        result: String,
    },
    /// `guard.is_held()` turned false while the guard was kept.
    HeldFalse { actor: ActorId, hold: HoldId },
    /// Something the actor found wrong on its own (with its local clock).
    Flag { actor: ActorId, text: String },
    /// A `hold_count()` / `is_held_by_current_thread()` call starts.
    Probe { actor: ActorId },
    /// …and what it answered (`observed`), for `name` of `kind`.
    Count {
        actor: ActorId,
        client: String,
        kind: Kind,
        name: String,
        /// `hold_count` or `is_held_by_current_thread`.
        what: String,
        observed: u32,
    },
    /// A client's `on_lock_lost` callback ran for the lock called `name`
    /// (the full Redis name); `client` is the set's tag, `/s1` etc. for the
    /// red-lock clients on other servers.
    Lost { client: String, name: String },
    /// `force_unlock` is about to be called.
    ForceStart {
        actor: ActorId,
        kind: Kind,
        names: String,
    },
    /// `force_unlock` returned.
    ForceEnd { actor: ActorId, result: String },
    /// A client set is about to be shut down.
    ClientDown { client: String },
    /// A client set was built (`ids`: the clients' UUIDs).
    ClientUp { client: String, ids: String },
    /// The set's `shutdown()` returned; a scan of what it left in Redis
    /// starts now (see `remains.rs`).
    ClientGone { client: String },
    /// The scan after `client`'s shutdown found hash `name` (short name)
    /// on server `server` with fields of one of its clients: the thread
    /// numbers of those fields (`<uuid>:<tid>[:write]`), joined by `,`.
    Remains {
        client: String,
        server: u8,
        name: String,
        tids: String,
    },
    /// The library's thread number of `actor` (the `<tid>` of its holder
    /// fields), learned from Redis while it held a lock alone; an owner's
    /// id, for an owner.
    Tid { actor: ActorId, tid: u64 },
    /// A request of `actor` on `name` through `client` is held back at
    /// the fault proxy, and what must follow it may reach Redis up to
    /// `for_ms` from now (an in-flight case's late request and its undo's
    /// copy): a shutdown of `client` within that time may leave the
    /// actor's field in `name` until they ran.
    HeldBack {
        actor: ActorId,
        client: String,
        name: String,
        for_ms: u64,
    },
    /// A fault starts on server `server` (`kill-normal`, `kill-pubsub`,
    /// `sleep-<ms>`, `restart`).
    FaultStart { server: u8, kind: String },
    /// The fault ended (the command returned, the server is back).
    FaultEnd { server: u8, kind: String },
    /// An actor stopped after `ops` operations.
    Done { actor: ActorId, ops: u64 },
    /// Something the schedule itself wants in the report.
    Note { text: String },
}

/// An event and when the test process recorded it.
#[derive(Debug, Clone)]
pub(crate) struct Stamped {
    pub(crate) at: Instant,
    pub(crate) event: Event,
}

/// The schedule's history: events in recording order, which is stamp order.
#[derive(Debug)]
pub(crate) struct History {
    /// The schedule's start, for printing times.
    pub(crate) t0: Instant,
    events: Mutex<Vec<Stamped>>,
}

impl History {
    /// An empty history starting now.
    pub(crate) fn new() -> History {
        History {
            t0: Instant::now(),
            events: Mutex::new(Vec::with_capacity(1 << 16)),
        }
    }

    /// Stamps and appends `event`. The stamp is taken under the lock, so
    /// stamps never go backwards in the log.
    pub(crate) fn record(&self, event: Event) {
        let mut events = self.events.lock();
        events.push(Stamped {
            at: Instant::now(),
            event,
        });
    }

    /// A copy of everything so far.
    pub(crate) fn snapshot(&self) -> Vec<Stamped> {
        self.events.lock().clone()
    }
}

/// Where an actor records: straight into the history (same process), or
/// over a socket to the parent, which stamps and acks each event.
#[derive(Debug, Clone)]
pub(crate) enum Recorder {
    Local(Arc<History>),
    Remote(Arc<Link>),
}

impl Recorder {
    /// Records `event` and returns once it is stamped.
    pub(crate) fn record(&self, event: Event) {
        match self {
            Recorder::Local(history) => history.record(event),
            Recorder::Remote(link) => link.send(&event),
        }
    }

    /// A recorder for another thread: the same history, or a connection of
    /// its own (so threads do not queue behind each other's acks).
    pub(crate) fn fork(&self) -> Recorder {
        match self {
            Recorder::Local(history) => Recorder::Local(Arc::clone(history)),
            Recorder::Remote(link) => Recorder::Remote(Arc::new(link.reconnect())),
        }
    }
}
