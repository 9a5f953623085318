//! The client side of the `CountDownLatch` (issue 40, phase 9): clients
//! with one thread each that call `count_down` and wait for the latch to
//! open (`wait`, `wait_for`), the pool's retries under one request latch
//! per call, the waiting loop's looks (a `GET` under the pool's retries),
//! its subscription and its parks, and each client's subscriber (the
//! publish at zero waking every waiter once, wake-ups kept for a waiter
//! about to park, a reconnect waking everyone), with faults as transitions
//! and time in ticks of about one response timeout, as in
//! [`crate::semaphore`].
//!
//! | file | mirrors |
//! |---|---|
//! | [`down`] | `synchronizer/latch.rs` (`count_down`: one request id, `unlock_latch`, `Server::run_write`), `server/pool.rs` (`run_attempts`: the retry rule) |
//! | [`wait`] | `synchronizer/latch.rs` (`wait_on`, `count`), `synchronizer/wait.rs` (`WaitOn::until`) |
//! | [`pubsub`] | `pubsub/subscriber.rs` (a synchronizer's message), `pubsub/channel.rs` (`confirm`, `connection_lost`), `pubsub/waiters.rs` (`wake_each_once`, `wake_all`, `take_permit`, `leave`) |
//! | [`net`] | `server/pool.rs` (`run_once`: one request on one connection at a time), the fault proxy |
//! | [`state`], [`normalize`], [`model`] | the state, its canonical form, the properties |
//!
//! **Abstractions** (beyond those of [`crate::client`]): the latch is set
//! before the threads start (in Redis from the start, or by a
//! `try_set_count` call whose `true` starts them); a `SUBSCRIBE` is confirmed
//! as it is sent, but for one sent while the subscriber reconnects, which
//! the reconnect confirms (before the tick ends); the subscriber
//! reconnects within the tick its connection dropped; the channel lingers
//! subscribed once a waiter joined it; a message is heard within the tick
//! it was published; the outage's pause between two failed looks is
//! shorter than a tick (folded into the look); the re-check
//! (`RECHECK`, 5 s, a tick and two thirds of 3 s) wakes a parked waiter
//! at any moment once a tick boundary passed since it parked, before the
//! third boundary; a latch no
//! request names any more is dropped from the state (its id is never
//! used again). Left out: `delete`, interrupts, async waits, partitions,
//! restarts, failovers, crashes, shutdown, more than one latch.

pub mod down;
pub mod model;
pub mod net;
pub mod normalize;
pub mod pubsub;
pub mod state;
pub mod wait;
pub mod worker;

pub use model::{Action, LatchModel};
pub use state::State;

use crate::client::Fault;

/// A deliberate defect of the latch's client, switched back on in the
/// model only: each must be found.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LatchMutation {
    /// `count_down`'s retry names a request latch of its own: a retry
    /// after a lost reply counts down again (`unlock_latch` drawn per
    /// attempt instead of per call).
    CountDownRetryNotLatched,
    /// `try_set_count`'s retry names a request latch of its own: an
    /// attempt held back past its timeout, run after the retry armed the
    /// latch and the count-downs opened it, arms it again.
    TrySetRetryNotLatched,
    /// `latch_count_down.lua` publishes nothing when the count reaches
    /// zero: parked waiters are never told.
    NoPublishAtZero,
    /// `WaitOn::until` parks right after subscribing, without the look
    /// again that catches a message sent before the subscription.
    NoLookAfterSubscribe,
    /// `Waiters::wake_each_once` keeps no wake-up for a waiter that joined
    /// but is not parked yet (between its look and its park).
    WakeNotKept,
    /// `Channel::connection_lost` and the reconnect's confirmation wake
    /// no waiter: a message lost with the connection is never made up for.
    NoWakeOnReconnect,
    /// A `count_down` that fails ends without its undo (`end_call` left
    /// out, the library before the fix of model defect 13): an attempt
    /// held back past the response timeout runs after the latch was armed
    /// again and counts the new round down.
    CountDownNotUndone,
}

/// One run's bounds and switches.
#[derive(Clone, Debug)]
pub struct Config {
    /// The count the latch is set to (`try_set_count`).
    pub count: i64,
    /// Whether client 0's thread arms the latch with a `try_set_count`
    /// call first, the threads starting once it returned `true` (else
    /// the count is in Redis from the start).
    pub set_call: bool,
    /// How many times client 0's thread arms the latch again
    /// (`try_set_count` once more) after it opened: a second round.
    pub rearms: u8,
    /// How many clients (one thread each).
    pub clients: u8,
    /// How many times each thread calls `count_down`.
    pub downs: u8,
    /// How many waits each thread makes.
    pub waits: u8,
    /// Whether threads call `wait` (no limit).
    pub forever: bool,
    /// Whether threads call `wait_for` with this many ticks.
    pub wait_ticks: Option<u8>,
    /// The faults allowed ([`Fault::Cut`], [`Fault::HoldBack`],
    /// [`Fault::PubSubDrop`]).
    pub faults: Vec<Fault>,
    /// The fault budget.
    pub fault_budget: u8,
    /// The pool's retries after a failed attempt (`retry_attempts`).
    pub retries: u8,
    /// The outage tolerance in ticks.
    pub tolerance: u8,
    /// Whether the Redis-side count is checked (off only to show that the
    /// waiters' property alone finds a count-down run twice).
    pub check_redis_count: bool,
    /// Whether the window the undo leaves is excused (the documented
    /// limit): a failed count-down's late attempt that runs in a later
    /// round before any copy of its undo counts as called in that round.
    pub excuse_outrun: bool,
    /// A deliberate defect, if any.
    pub mutation: Option<LatchMutation>,
}

impl Config {
    /// The retry rule's bound in ticks (`retry_bound`).
    pub fn retry_window(&self) -> u8 {
        self.retries + 1
    }

    /// A count-down's request latch TTL in ticks (`Resends::Retries`: the
    /// retry bound and a second).
    pub fn latch_ticks(&self) -> u8 {
        self.retry_window() + 1
    }

    /// Whether `fault` may be injected.
    pub fn allows(&self, fault: Fault) -> bool {
        self.faults.contains(&fault)
    }

    /// Whether `mutation` is switched on.
    pub fn mutated(&self, mutation: LatchMutation) -> bool {
        self.mutation == Some(mutation)
    }

    /// CI's configuration: a latch set to 2, two clients whose threads
    /// each count down once and wait once (`wait` or `wait_for` a tick),
    /// in either order; one retry; one fault (a cut, a hold-back or a
    /// pub/sub drop).
    pub fn ci() -> Config {
        Config {
            count: 2,
            set_call: false,
            rearms: 0,
            clients: 2,
            downs: 1,
            waits: 1,
            forever: true,
            wait_ticks: Some(1),
            faults: vec![Fault::Cut, Fault::HoldBack, Fault::PubSubDrop],
            fault_budget: 1,
            retries: 1,
            tolerance: 1,
            check_redis_count: true,
            excuse_outrun: true,
            mutation: None,
        }
    }

    /// Two faults: a count-down's first attempt held back or cut, then its
    /// retry's; a drop with a cut.
    pub fn two_faults() -> Config {
        Config {
            fault_budget: 2,
            ..Config::ci()
        }
    }

    /// As [`ci`](Self::ci), with the latch armed by a `try_set_count`
    /// call first (its retries under one request latch).
    pub fn set_ci() -> Config {
        Config {
            set_call: true,
            ..Config::ci()
        }
    }

    /// Two rounds: a count of 1, two clients whose threads count down
    /// once and wait once; client 0's thread arms the latch again once it
    /// opened; two faults (cuts and hold-backs).
    pub fn rearm() -> Config {
        Config {
            count: 1,
            rearms: 1,
            faults: vec![Fault::Cut, Fault::HoldBack],
            ..Config::two_faults()
        }
    }

    /// As [`rearm`](Self::rearm) without retries (`retry_attempts(0)`):
    /// two faults fail a count-down and its undo on a connection of its
    /// own, which the worker then carries on.
    pub fn rearm_no_retry() -> Config {
        Config {
            retries: 0,
            ..Config::rearm()
        }
    }

    /// A deep configuration (by hand): three clients, two faults (one
    /// count-down more than the count: it finds the latch open).
    pub fn deep() -> Config {
        Config {
            clients: 3,
            ..Config::two_faults()
        }
    }

    /// The other deep configuration (by hand): the set call arms a count
    /// of 3, each of two threads counts down twice and waits twice, two
    /// faults.
    pub fn deep_counts() -> Config {
        Config {
            count: 3,
            downs: 2,
            waits: 2,
            set_call: true,
            ..Config::two_faults()
        }
    }
}
