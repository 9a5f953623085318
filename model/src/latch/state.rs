//! The latch model's whole state: Redis, each client's thread with its
//! call and connections, its subscriber, and the ghost state the
//! properties read.

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
    /// Ghost: `count_down` calls made in this round (counted as they
    /// begin; when a `try_set_count` arms the latch, the calls under way
    /// then none of whose attempts has run).
    pub called: u8,
    /// Ghost: a wait returned "opened" before `count_down` was called as
    /// many times as the count set.
    pub opened_early: bool,
    /// Ghost: a tick passed with a waiter parked on the open latch and
    /// nothing on its way to wake it.
    pub overslept: bool,
    /// Ghost: the latch is armed for the threads: set before they start,
    /// or by the set call once it returned `true`.
    pub armed: bool,
    /// Ghost: a count-down brought the count to zero (in this round).
    pub opened: bool,
    /// Ghost: `try_set_count` calls made so far.
    pub set_calls: u8,
    /// Ghost: `try_set_count` scripts that set the count so far (at most
    /// one per call).
    pub sets_run: u8,
    /// Ghost: the `count_down` calls that returned their error before a
    /// reply confirmed their undo, no copy of which has run yet: their
    /// request latch, and the round (`sets_run`) they returned in.
    pub undos: Vec<(u16, u8)>,
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
        self.called.hash(h);
        self.opened_early.hash(h);
        self.overslept.hash(h);
        self.armed.hash(h);
        self.opened.hash(h);
        self.set_calls.hash(h);
        self.sets_run.hash(h);
        self.undos.hash(h);
        self.next_id.hash(h);
    }
}

/// One client process with one thread and its subscriber.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Client {
    /// `count_down` calls its thread has still to make.
    pub downs_left: u8,
    /// Waits its thread has still to make.
    pub waits_left: u8,
    /// `try_set_count` calls its thread has still to make once the latch
    /// opened (a new round).
    pub sets_left: u8,
    /// What its thread does.
    pub job: Job,
    /// The connection its thread waits on, if any.
    pub wire: Option<Wire>,
    /// Connections nobody reads any more whose request may still run (an
    /// attempt that timed out: the pool drops its connection, the server
    /// may still run what it read).
    pub trailing: Vec<Wire>,
    /// Its subscriber's hold on the latch's channel.
    pub sub: Sub,
    /// The publish at zero on its way to its subscriber.
    pub inbox: bool,
    /// Wake-ups kept for a waiter that joined and is not parked
    /// (`Waiters::permits`): at most the waiters that joined.
    pub permits: u8,
    /// The undos its release worker carries on (`Engine::give_back_later`).
    pub worker: Vec<Undo>,
}

/// A count-down's undo the release worker carries on
/// (`PendingRelease::sync_give_back`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Undo {
    /// The call's request latch.
    pub latch: u16,
    /// Ticks until the latch may be gone (`latch_alive_until`).
    pub until: u8,
    /// Sent in this tick: the worker's rounds pause at most a second, so
    /// each tick sees one while it may be sent (`lane/worker.rs`).
    pub tried: bool,
    /// Its attempt in flight, if any.
    pub wire: Option<Wire>,
}

/// A subscriber's hold on the latch's channel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Sub {
    /// Not subscribed (nobody waited yet).
    Off,
    /// Subscribed: a publish reaches it.
    On,
    /// Its connection dropped: it reconnects and subscribes again.
    Reconnecting,
}

/// What a thread does.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Job {
    /// Nothing: it may call.
    Idle,
    /// A `count_down` call, or the `try_set_count` that arms the latch.
    Down(Down),
    /// A wait (`wait` or `wait_for`).
    Wait(Wait),
}

/// A `count_down` call (or the `try_set_count` that arms the latch):
/// one request id, the pool's retries.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Down {
    /// Its request latch (`unlock_latch`).
    pub latch: u16,
    /// The pool's retries left.
    pub retries_left: u8,
    /// It is `try_set_count`, not `count_down`.
    pub set: bool,
    /// Ticks its request latch lives for sure (`latch_alive_until`: a TTL
    /// from the first send, no attempt answered).
    pub alive: u8,
    /// The call failed and sends its undo on the thread's connection
    /// (`Request::undo`, `Pool::run`): the pool's retries left for it.
    pub undo: Option<u8>,
}

/// A waiting call (`CountDownLatch::wait_on`, `WaitOn::until`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Wait {
    /// Ticks left of its wait (`None`: no limit).
    pub left: Option<u8>,
    /// The pool's retries left for the look in flight.
    pub retries_left: u8,
    /// Ticks an outage has lasted, while one goes on.
    pub outage: Option<u8>,
    /// Whether it subscribed (joined the channel's waiters).
    pub subscribed: bool,
    /// Where it stands.
    pub phase: Phase,
}

/// Where a waiting call stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Phase {
    /// About to look (`count`: a `GET`).
    Look,
    /// A look in flight on the thread's connection.
    Sent,
    /// Parked for `ticks` whole ticks so far.
    Parked {
        /// Ticks passed since it parked.
        ticks: u8,
    },
}

/// One request on a connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Req {
    /// `latch_count_down.lua` under this request latch.
    CountDown(u16),
    /// `latch_try_set.lua` under this request latch.
    TrySet(u16),
    /// `GET` of the latch (`CountDownLatch::count`).
    Get,
    /// `latch_count_down_undo.lua` for the call under this request latch.
    Undo(u16),
}

impl Req {
    /// Its request latch, if it has one.
    pub fn latch_mut(&mut self) -> Option<&mut u16> {
        match self {
            Req::CountDown(id) | Req::TrySet(id) | Req::Undo(id) => Some(id),
            Req::Get => None,
        }
    }
}

/// One connection: its request not run yet, and the reply its reader
/// waits for.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Wire {
    /// The request, until it runs.
    pub req: Option<Req>,
    /// The undo written behind it (`Pool::follow`): it runs next.
    pub then: Option<Req>,
    /// Someone waits for its reply.
    pub awaited: bool,
    /// That reply, once the request ran (a `GET` of nothing is 0).
    pub answer: Option<i64>,
    /// Held back (a fault): the reply does not come in time; the request
    /// still runs, within the next tick.
    pub held: bool,
    /// A tick passed while held: what it holds runs before the next one.
    pub aged: bool,
    /// Cut: nothing more runs or comes back.
    pub cut: bool,
    /// Ghost: a `GET` that read 0 (open) while fewer count-downs than the
    /// count had been called in the round.
    pub early: bool,
}

impl Wire {
    /// A new connection carrying `req`, its reply awaited.
    pub fn send(req: Req) -> Wire {
        Wire {
            req: Some(req),
            then: None,
            awaited: true,
            answer: None,
            held: false,
            aged: false,
            cut: false,
            early: false,
        }
    }

    /// Whether its reader may read it now: a reply, or an error.
    pub fn readable(&self) -> bool {
        self.cut || (!self.held && self.answer.is_some())
    }

    /// The same connection, nobody reading it any more.
    pub fn unread(mut self) -> Wire {
        self.awaited = false;
        self.answer = None;
        self
    }
}
