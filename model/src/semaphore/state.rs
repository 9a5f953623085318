//! The semaphore model's whole state: Redis, each client's thread with its
//! call and its connections, the pool's connections nobody reads any more,
//! and the release worker's give-backs, with the ghost state the
//! properties read.

use crate::call::Call;
use crate::keyspace::Keyspace;

/// A whole state. Its hash leaves [`State::events`] out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct State {
    /// The server's keyspace; its clock stays at 0 (expiries are relative).
    pub redis: Keyspace,
    /// Each client, by number.
    pub clients: Vec<Client>,
    /// Faults that may still be injected.
    pub faults_left: u8,
    /// Ghost: the latches of releases that returned an error before their
    /// script ran (`Permit::release`: "the permits may or may not be
    /// back"; a drop logs it): a permit each, taken for good unless a copy
    /// still runs.
    pub failed_releases: Vec<u16>,
    /// Ghost: permits of failed releases no copy of which can run any
    /// more: taken for good (a documented limit).
    pub lost_releases: u8,
    /// Ghost: an acquire returned a permit while Redis' latch of its call
    /// did not say `taken`.
    pub false_grant: bool,
    /// The next fresh request id (one above every id in use).
    pub next_id: u16,
    /// What the last step did that reachability checks look for.
    pub events: u64,
}

impl std::hash::Hash for State {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        self.redis.hash(h);
        self.clients.hash(h);
        self.faults_left.hash(h);
        self.failed_releases.hash(h);
        self.lost_releases.hash(h);
        self.false_grant.hash(h);
        self.next_id.hash(h);
    }
}

/// One client process with one thread.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Client {
    /// Permits its thread holds (`Permit` guards).
    pub held: u8,
    /// What its thread does.
    pub job: Job,
    /// The connection its thread waits on, if any.
    pub wire: Option<Wire>,
    /// Connections nobody reads any more whose requests may still run (a
    /// timed-out attempt closed, an undo written behind a late attempt:
    /// `Pool::follow` keeps it open).
    pub trailing: Vec<Wire>,
    /// The release worker's give-backs (`Engine::give_back_later`).
    pub worker: Vec<GiveBack>,
}

/// What a thread does.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Job {
    /// Nothing: it may call.
    Idle,
    /// An acquire call (`Semaphore::take`).
    Acquire(Acq),
    /// A permit going back (`Semaphore::give`).
    Release(Rel),
}

/// An acquire call: its `Request` (`server/request.rs`) and its waiting loop.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Acq {
    /// The call's request latch (`Request::latch`).
    pub latch: u16,
    /// Attempts sent (`Request::sent`): the last one's number.
    pub sent: u8,
    /// The number of the last attempt answered (`Request::answered`).
    pub answered: u8,
    /// Ticks until which the latch lives for sure (`alive_until`), once
    /// an attempt was sent.
    pub alive: Option<u8>,
    /// Connections of attempts whose reply did not come in time
    /// (`LateRequests`), kept open for the undo.
    pub late: Vec<Wire>,
    /// The pool's retries left for the attempt in flight.
    pub retries_left: u8,
    /// Ticks left of its wait (`None`: forever; 0 for a try).
    pub wait: Option<u8>,
    /// Ticks an outage has lasted (`Outage`), while one goes on.
    pub outage: Option<u8>,
    /// Whether it subscribed (`WaitOn::until`'s subscription).
    pub subscribed: bool,
    /// Where it stands.
    pub phase: Phase,
}

/// Where an acquire call stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Phase {
    /// About to look (`Take::attempt`, `Request::run`).
    Look,
    /// An attempt in flight on the thread's wire.
    Sent,
    /// Parked: until a message, the re-check, its wait's end or the
    /// outage's pause.
    Parked,
    /// The call ends with this (`Take::end`).
    End(Ending),
    /// Its give-back on a connection of its own (`Request::undo`,
    /// `Pool::run`): sent on the thread's wire when it has one.
    GiveBack {
        /// The pool's retries left.
        retries_left: u8,
    },
    /// The call is over (never kept in a state).
    Over,
}

/// How the waiting loop ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Ending {
    /// A look took the permit: `Ok(Some(permit))`.
    Taken,
    /// Its wait ran out: `Ok(None)`.
    NoPermit,
    /// An error (an outage past the tolerance or the wait, a latch that
    /// may have expired).
    Failed,
}

/// A release (`Semaphore::give`): one request id, the pool's retries.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Rel {
    /// Its latch (`unlock_latch`).
    pub latch: u16,
    /// The pool's retries left.
    pub retries_left: u8,
    /// Ghost: its script ran.
    pub ran: bool,
}

/// A give-back the worker carries on (`PendingRelease::sync_give_back`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GiveBack {
    /// The call's latch.
    pub latch: u16,
    /// Ticks until the latch may be gone (`Latch::Until`).
    pub until: u8,
    /// Sent in this tick: the worker's rounds pause at most a second, so
    /// each tick sees one while it may be sent (`lane/worker.rs`).
    pub tried: bool,
    /// Its attempt in flight, if any.
    pub wire: Option<Wire>,
}

/// One connection: its requests not run yet, in order (Redis runs one
/// connection's commands in order), and the reply its reader waits for.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Wire {
    /// Requests not run yet, first first.
    pub reqs: Vec<Call>,
    /// Someone waits for its first request's reply.
    pub awaited: bool,
    /// That reply, once the request ran.
    pub answer: Option<i64>,
    /// Held back (a fault): the reply does not come in time; the request
    /// still runs, within the next tick.
    pub held: bool,
    /// A tick passed while held: what it holds runs before the next one.
    pub aged: bool,
    /// Cut: nothing more runs or comes back.
    pub cut: bool,
}

impl Wire {
    /// A new connection carrying `call`, its reply awaited.
    pub fn send(call: Call) -> Wire {
        Wire {
            reqs: vec![call],
            awaited: true,
            answer: None,
            held: false,
            aged: false,
            cut: false,
        }
    }

    /// Whether its reader may read it now: a reply, or an error.
    pub fn readable(&self) -> bool {
        self.cut || (!self.held && self.answer.is_some())
    }
}
