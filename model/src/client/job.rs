//! What a thread (or the release worker) is doing: the program counters
//! of the library's acquire call, release and lane settle, one variant per
//! place where the code waits for something outside itself (a reply, a
//! turn, time). Between two such places a thread runs atomically (local
//! work is far shorter than a tick).

use super::config::ReleaseMode;
use super::state::{ReqId, WireId};

/// A thread's job.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Job {
    /// Nothing: it may begin a call, or drop a guard.
    Idle,
    /// An acquire call (`Engine::acquire`).
    Acquire(Call),
    /// A release of one hold (`Engine::release`).
    Release(Rel),
    /// Its process crashed.
    Dead,
}

/// An acquire call (`engine.rs`, `Call`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Call {
    /// A waiting call (`lock`, `try_lock_for`), not a bare try.
    pub waits: bool,
    /// Ticks left of the wait; `None`: no limit.
    pub wait_left: Option<u8>,
    /// Connections of attempts whose reply did not come in time
    /// (`LateRequests`): each may still run, and gets an undo behind it.
    pub late: Vec<WireId>,
    /// The last attempt's outcome is unknown.
    pub unsure: bool,
    /// ... and its connection is among `late`.
    pub unsure_is_late: bool,
    /// Attempts cut before their reply since the call's last answer
    /// (`LateRequests::cut_since_answer`): each may have taken a hold no
    /// answer counted (at most 2 kept).
    pub cut: u8,
    /// Failed attempts in a row (the outage's looks).
    pub outages: u8,
    /// Joined the waiters (`acquire_slow`: subscribed).
    pub joined: bool,
    /// The last park ended with a wake-up handed to this waiter.
    pub handed_wake: bool,
    /// The first try found the lock busy while subscribed
    /// (`first_busy.rs`): its TTL in ticks, and whether nothing was heard
    /// on the channel since.
    pub first_busy: Option<(u8, bool)>,
    /// How the call came out, once decided.
    pub result: Option<Outcome>,
    /// A local call took the lock since this waiter marked the count of
    /// its client's takings (`Subscription::take_mark`, before each
    /// attempt once joined, and at joining, before the quiet look): its
    /// next park ends no later than the last taking's TTL
    /// (`Waiters::enqueue_as`, `Park { until, since }`). Read and cleared
    /// as it parks (every park follows a fresh mark).
    pub taken_since_mark: bool,
    /// Where it is.
    pub at: CallAt,
}

/// How an acquire call came out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// With the lock.
    Got,
    /// Busy until its wait ran out (or a bare try).
    NotGot,
    /// With an error.
    Failed,
}

/// Where an acquire call is.
#[allow(missing_docs)] // Each field is named for what the variant's doc says.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum CallAt {
    /// A step (`try_acquire`) begins: it takes the lane's turn.
    Step,
    /// The step waits for the turn, until this tick ends.
    StepTurn { expired: bool },
    /// The step settles the lane's entries.
    StepSettle(Settle),
    /// The acquire request is out.
    Sent(Send, AcquireSent),
    /// Holds counted twice are given back on the step's turn
    /// (`release_orphans`): `left` more after the one out.
    Orphans { left: u8, send: RelSend },
    /// The acquire took the lock but its `WAIT` counted too few
    /// replicas: it is undone on the step's turn, an undo entry (its
    /// first request id `id`) pushed onto the lane, which is settled
    /// (`Call::undo_unreplicated`); the call then fails with
    /// `ReplicasNotSynced`.
    Unsynced { settle: Settle, id: ReqId },
    /// Joining the waiters after a first try found the lock busy.
    Join,
    /// Parked on the lock's channel (a spin lock sleeps its backoff).
    Parked(Park),
    /// The call ends (`finish.rs`): waiting for the turn, without deadline.
    FinishTurn,
    /// ... settling the lane (one response timeout).
    FinishSettle(Settle),
    /// ... looking at the holds Redis counts (`settle_unsure`).
    FinishLook(Send),
    /// ... giving back the holds beyond the guards.
    FinishGiveBack { left: u8, send: RelSend },
}

/// The acquire request out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct AcquireSent {
    /// Sent as a re-entry only.
    pub holds_here: bool,
    /// The generation's leases had run out when the step began
    /// (`Entry::expired_by`).
    pub expired_at_start: bool,
    /// Ticks since the step began (the hold's lease counts from then).
    pub started_ago: u8,
    /// An attempt of this request timed out and was kept (`late.rs`).
    pub kept: bool,
}

/// A parked waiter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Park {
    /// Ticks until it wakes by itself (the lock's TTL, or a backoff).
    pub ticks: u8,
    /// Reserved by a local release about to hand it the lock.
    pub reserved: bool,
    /// How it was woken, once it was.
    pub woke: Option<Wake>,
}

/// How a park ended (`pubsub::Wake`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Wake {
    /// Its time ran out.
    TimedOut,
    /// A release message (or a reconnect) woke it.
    Notified,
    /// A reservation was dropped with the hand-over's outcome unknown.
    Unsettled,
    /// A local release handed it the lock (with this token).
    HandedOver(Option<i64>),
}

/// A request out, waiting for its reply under the retry rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Send {
    /// Its connection.
    pub wire: WireId,
    /// Its response timeout passed.
    pub expired: bool,
    /// Retries left.
    pub tries_left: u8,
}

/// A release request under the retry rule (its latch id and attempts).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RelSend {
    /// Its request id.
    pub id: ReqId,
    /// Attempts sent.
    pub attempts: u8,
    /// The attempt out.
    pub send: Send,
    /// Ticks since its first attempt was sent.
    pub since_first: u8,
}

/// A lane being settled (`one.rs`, `Lane::settle`) by a deadline.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Settle {
    /// The deadline passed.
    pub expired: bool,
    /// Ticks until the deadline: one response timeout for a step, a
    /// worker's round or a drop, the retry bound for an unlock.
    pub left: u8,
    /// The head entry's attempt out, if a release was resent.
    pub out: Option<Send>,
}

/// A release of one hold (`release.rs`, `Engine::release`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Rel {
    /// Drop or unlock.
    pub mode: ReleaseMode,
    /// Its request id.
    pub id: ReqId,
    /// The thread whose field, lane and renewal record it releases for
    /// (itself, or its owner's).
    pub holder: u8,
    /// The hold's generation ended before the release forgot it, under
    /// the lane's turn (`release_one`: `Kept::Stale`): nothing is sent.
    pub stale: bool,
    /// It forgot its hold (`release_one` done).
    pub forgot: bool,
    /// The hold's generation is still live (holds remain after it); set
    /// when the hold is forgotten, as the following three.
    pub gen_live: bool,
    /// Another holder entered while the generation lasted (ghost).
    pub foreign: bool,
    /// A late hold nobody stands for may have been in the field when the
    /// release forgot its hold (ghost, see
    /// [`super::state::Ghost::leak_excused`]).
    pub leaked: bool,
    /// Ticks left before its deadline passes (0: passed).
    pub left: u8,
    /// Ticks until the released hold has certainly expired.
    pub certain: u8,
    /// Where it is.
    pub at: RelAt,
}

/// Where a release is.
#[allow(missing_docs)] // Each field is named for what the variant's doc says.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum RelAt {
    /// Waiting for its lane's turn.
    Turn,
    /// Settling its lane.
    Settle(Settle),
    /// Its request is out; `successor` is a parked thread of the client
    /// it hands the lock to, whose lane's turn it holds.
    Sent {
        send: RelSend,
        successor: Option<u8>,
    },
    /// Giving back holds no guard stands for (`give_back_unguarded`).
    GiveBack { more: u8, send: RelSend },
}

impl Call {
    /// A call that begins with a step.
    pub fn new(waits: bool, wait_left: Option<u8>) -> Call {
        Call {
            waits,
            wait_left: if waits { wait_left } else { None },
            late: Vec::new(),
            unsure: false,
            unsure_is_late: false,
            cut: 0,
            outages: 0,
            joined: false,
            handed_wake: false,
            first_busy: None,
            result: None,
            taken_since_mark: false,
            at: CallAt::Step,
        }
    }
}

impl Settle {
    /// A settle that must end within `left` ticks.
    pub fn within(left: u8) -> Settle {
        Settle {
            expired: left == 0,
            left,
            out: None,
        }
    }
}

impl Send {
    /// A request just sent on `wire`.
    pub fn on(wire: WireId, tries_left: u8) -> Send {
        Send {
            wire,
            expired: false,
            tries_left,
        }
    }
}
