//! The client model's whole state: Redis, the connections in flight, and
//! each client's threads, lanes and release worker, with the ghost state
//! the properties read. Every timer is kept as ticks left (time is always
//! "now"), so that states that differ only by when they happened are one.

use crate::call::Call;
use crate::keyspace::Keyspace;

/// A connection's index in [`State::wires`] (renumbered canonically after
/// every step).
pub type WireId = u8;

/// A release request id (its unlock latch), renumbered canonically.
pub type ReqId = u16;

/// A whole state. Its hash leaves [`State::events`] out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct State {
    /// The server's keyspace; its clock stays at 0 (keys' expiries are
    /// relative to now).
    pub redis: Keyspace,
    /// The master's replica, lagging it (`replica.rs`): a copy of the
    /// keyspace as last replicated, kept only while a failover may still
    /// promote it (`None` otherwise: its contents no longer matter).
    pub replica: Option<Keyspace>,
    /// Every connection with a request or a reply still to matter.
    pub wires: Vec<Wire>,
    /// Each client, by number.
    pub clients: Vec<Client>,
    /// Faults that may still be injected.
    pub faults_left: u8,
    /// Sticky violations of rules about a transition (a state property
    /// reads them).
    pub broken: Broken,
    /// What the last step did that the reachability checks look for;
    /// cleared in the canonical form, so it is never part of a state.
    pub events: u8,
    /// The next request id to hand out (one above every id in use once
    /// renumbered).
    pub next_id: ReqId,
}

impl std::hash::Hash for State {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        self.redis.hash(h);
        self.replica.hash(h);
        self.wires.hash(h);
        self.clients.hash(h);
        self.faults_left.hash(h);
        self.broken.hash(h);
        self.next_id.hash(h);
    }
}

/// Violations of rules about one transition.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Broken {
    /// An `unlock` answered `Ok` for a hold another holder had entered.
    pub ok_after_intrusion: bool,
    /// A fencing token granted was not above every earlier one.
    pub token_regressed: bool,
}

/// One connection: its requests not yet run (in order: Redis runs one
/// connection's commands in order) and its replies not yet read.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Wire {
    /// The client that opened it.
    pub client: u8,
    /// Requests not run yet, first first.
    pub requests: Vec<Request>,
    /// Replies of requests run, not read yet.
    pub replies: Vec<Answer>,
    /// Held back (a fault): its request may run after the next tick.
    pub held: bool,
    /// A tick passed while held: it runs (or is cut) before the next one.
    pub aged: bool,
    /// Opened during a partition: connected, never answered.
    pub silent: bool,
    /// Cut: nothing more runs or comes back; a reader gets an error.
    pub cut: bool,
}

/// A request on a connection.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Request {
    /// A script call.
    Script(Call),
    /// `HGET name field` of a thread's own field (an acquire's settle).
    Look(u8),
    /// `WAIT 1 timeout` sent after an acquire that took the lock, with
    /// `sync_replicas` (`Pool::run_write`).
    Wait {
        /// The acquire's answer, read with the WAIT's count once it runs.
        answer: Answer,
        /// The replica has every write made before it.
        synced: bool,
    },
}

/// What a reply says, as the client reads it.
#[allow(missing_docs)] // Each field is named for what the variant's doc says.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Answer {
    /// An acquire took (or re-entered) the lock: the holder's holds now,
    /// and its fencing token.
    Took { holds: u8, token: Option<i64> },
    /// An acquire found the lock busy with this many ticks of TTL left
    /// (rounded up; 0 when the key has none).
    Busy { ticks: u8 },
    /// A re-entry-only acquire found the holder's holds gone.
    HoldsGone,
    /// A release's code (nil: `None`) and a hand-over's token.
    Released {
        code: Option<i64>,
        token: Option<i64>,
    },
    /// A look's count.
    Count(i64),
    /// An acquire that took the lock, whose `WAIT` counted fewer replicas
    /// than asked (`Error::ReplicasNotSynced`).
    NotSynced,
}

/// One client process.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Client {
    /// False once it crashed.
    pub up: bool,
    /// Cut off from the server.
    pub partitioned: bool,
    /// Release messages on their way to its subscriber (at most 2), on
    /// the one channel: a message does not say which lock it is for.
    pub inbox: u8,
    /// Wake-ups kept for waiters about to park, per lock on the channel
    /// (`Waiters::permits`, one `Waiters` per lock, `pubsub/locks.rs`): at
    /// most one per waiter of that lock that joined.
    pub permits: [u8; 2],
    /// Per lock, ticks until the TTL its last local taking of that lock
    /// set ends (`Waiters::last_take_ends`; 0 once passed): read by a
    /// waiter of that lock that parks after a taking since its mark.
    /// Forgotten (0) while no mark can read it (see `normalize`).
    pub last_take: [u8; 2],
    /// Its subscriber listens on the locks' channel: from the first
    /// waiter's join (of either lock) until a tick after the last one
    /// left (the channel lingers, `pubsub/registry.rs`).
    pub subscribed: bool,
    /// Its threads.
    pub threads: Vec<Thread>,
    /// Its release worker (`lane/worker.rs`).
    pub worker: Worker,
}

/// One thread: its holds in the renewal map, what it does, its lane.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Thread {
    /// The live generation of its holds (`renewals.rs`), if any.
    pub gen: Option<Gen>,
    /// What it does.
    pub job: super::job::Job,
    /// The lane of (the lock, its field) (`engine/lane/`).
    pub lane: Lane,
    /// What the properties need to know about it.
    pub ghost: Ghost,
}

/// A generation of holds, as the renewal map keeps it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Gen {
    /// Holds counted (each with a live guard).
    pub count: u8,
    /// Ticks until the client takes the holds for expired: the lease's
    /// end, or the watchdog's timeout after the last renewal.
    pub left: u8,
    /// For a leased thread, ticks until Redis has certainly dropped the
    /// holds (`RenewalMap`'s `leased_until`): no earlier than `left`, and
    /// later once a re-entry the call did not keep set the key's TTL anew
    /// (`RenewalMap::before_acquire`). Always 0 for a watched thread.
    pub may_last: u8,
    /// The fencing token of its last grant.
    pub token: Option<i64>,
    /// Holds of it a local release handed to a parked waiter that has not
    /// claimed them yet (`RenewalMap::add_handed`, a148de8): counted, no
    /// guard's yet.
    pub handed: u8,
}

/// The properties' view of a thread.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Ghost {
    /// The live generation's holds were wiped by a fault (a restart): its
    /// guards may overlap another holder (a documented limit).
    pub wiped: bool,
    /// Another holder entered the lock while the live generation lasted.
    pub intruded: bool,
    /// Ticks it has been parked on a free lock with no message coming.
    pub starving: u8,
    /// A cut lost the undo behind one of its late acquires: Redis may
    /// count a hold nobody stands for until it expires (a documented
    /// limit, `docs/reliability.md`).
    pub leak_excused: bool,
    /// A failover promoted a replica that had fewer of the live
    /// generation's holds than the master: without `sync_replicas`, its
    /// guards may overlap another holder (the documented limit).
    pub failover_lost: bool,
}

/// A lane: its turn, and the requests not confirmed yet, in order.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Lane {
    /// Who holds the turn.
    pub taken: Option<Taker>,
    /// The acquire call of this thread keeps the lane for its late
    /// attempts: only its steps may send (`Turn::keep_for_late_call`).
    pub late_call: Option<u8>,
    /// Unconfirmed requests: sent ones first, then unsent releases.
    pub entries: Vec<Entry>,
}

/// Who holds a lane's turn.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Taker {
    /// A thread acting for the lane's holder (itself, or another thread
    /// of its owner), for a step or a release.
    Thread(u8),
    /// The release worker.
    Worker,
    /// Another thread of the client handing the lock to this one.
    Releaser(u8),
}

/// One unconfirmed request of a lane (`lane/entry.rs`).
#[allow(missing_docs)] // Each field is named for what the variant's doc says.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Entry {
    /// An undo written behind a late acquire on its connection (`None`
    /// once that failed, until a copy goes: [`super::undo`]); settled by
    /// its reply or a copy's, or its keep time's end; also the undo of an
    /// unreplicated acquire ([`super::unreplicated`]), with no connection
    /// from the start. Its releases of more than `above` holds (`None`:
    /// plain releases, a mutation only), with request ids `ids`, are what
    /// a copy sends again.
    Undo {
        wire: Option<WireId>,
        keep: u8,
        above: Option<u8>,
        ids: Vec<ReqId>,
    },
    /// A release, sent or not.
    Release(Pending),
    /// A hand-over's release kept on the releaser's lane (`lane`): this
    /// lane waits for it too.
    Shared { lane: u8, id: ReqId },
}

/// A release not confirmed (`lane/pending.rs`, `PendingRelease`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Pending {
    /// Its request id (latch).
    pub id: ReqId,
    /// Attempts sent so far (2: two or more).
    pub attempts: u8,
    /// Ticks until `latch_alive_until`; `None` while never sent.
    pub alive: Option<u8>,
    /// Whom it releases for.
    pub purpose: Purpose,
    /// Ticks until the released hold has certainly expired (an unsent
    /// release of a generation that is over is then dropped).
    pub certain: u8,
    /// Settled from the other lane that keeps it.
    pub done: bool,
}

/// Whom a pending release is for (`pending.rs`, `Purpose`).
#[allow(missing_docs)] // Each field is named for what the variant's doc says.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Purpose {
    /// A guard's release; `live`: its generation is the thread's live one.
    Guard { live: bool },
    /// Holds no guard stands for, `more` after this one at most.
    Unguarded { more: u8 },
}

/// The release worker of a client.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Worker {
    /// The lane it settles now (holding its turn), and how far.
    pub at: Option<(u8, super::job::Settle)>,
}

impl State {
    /// The thread `(c, t)`.
    pub fn thread(&self, c: u8, t: u8) -> &Thread {
        &self.clients[usize::from(c)].threads[usize::from(t)]
    }

    /// The thread `(c, t)`, to change.
    pub fn thread_mut(&mut self, c: u8, t: u8) -> &mut Thread {
        &mut self.clients[usize::from(c)].threads[usize::from(t)]
    }

    /// A new connection of client `c` with `request` on it.
    pub fn open(&mut self, c: u8, request: Request) -> WireId {
        let silent = self.clients[usize::from(c)].partitioned;
        self.wires.push(Wire {
            client: c,
            requests: vec![request],
            replies: Vec::new(),
            held: false,
            aged: false,
            silent,
            cut: false,
        });
        (self.wires.len() - 1) as WireId
    }

    /// The wire `w`.
    pub fn wire(&self, w: WireId) -> &Wire {
        &self.wires[usize::from(w)]
    }

    /// A request id no request uses (renumbered canonically later).
    pub fn fresh_id(&mut self) -> ReqId {
        self.next_id += 1;
        self.next_id - 1
    }
}

impl Wire {
    /// Whether its replies may be read now: a held-back reply comes only
    /// after the tick.
    pub fn visible(&self) -> bool {
        !self.held || self.aged
    }
}

impl Thread {
    /// A thread that holds nothing and does nothing.
    pub fn new() -> Thread {
        Thread {
            gen: None,
            job: super::job::Job::Idle,
            lane: Lane::default(),
            ghost: Ghost::default(),
        }
    }
}

impl Default for Thread {
    fn default() -> Self {
        Thread::new()
    }
}
