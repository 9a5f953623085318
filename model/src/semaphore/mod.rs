//! The client side of the `Semaphore` (issue 40): two clients, each one
//! thread that takes one permit at a time (`try_acquire`,
//! `try_acquire_for`) and gives it back (`Permit::release` or its drop),
//! the pool's retries, the acquire call's request latch, the give-back
//! that ends a call without permits (behind each timed-out attempt on its
//! connection, on a connection of its own, or carried on by the release
//! worker while Redis is away), with faults as transitions and time in
//! ticks of about one response timeout, as in [`crate::client`].
//!
//! | file | mirrors |
//! |---|---|
//! | [`call`] | `synchronizer/acquire.rs` (`Take::attempt`, `Take::end`), `synchronizer/wait.rs` (`WaitOn::until`), `synchronizer/mod.rs` (`end_call`), `semaphore.rs` (`give`), `permit.rs` |
//! | [`net`] | `server/request.rs` (`Request::run`, `may_send`, `answered`, `undo`), `server/pool.rs` (`run_attempts`, `run_once`, `follow`), `server/late.rs` (`LateRequests`), the fault proxy |
//! | [`worker`] | `engine.rs` (`give_back_later`), `lane/pending.rs` (`sync_give_back`, `attempt_once`), `lane/worker.rs` |
//! | [`state`], [`normalize`], [`model`] | the state, its canonical form, the properties |
//!
//! **Abstractions** (beyond those of [`crate::client`]): one permit per
//! call; a thread holds at most one permit; a parked waiter may wake at
//! any moment (a message, or the 5 s re-check: a superset of when it
//! wakes), and wakes at the tick its wait or its outage's tolerance runs
//! out; the outage's backoff, the retry delay and the worker's pauses are
//! shorter than a tick; a latch no request, call or worker entry names any
//! more is dropped from the state (no script reads it again: ids are never
//! reused), and an acquire latch's attempt numbers are kept by rank. Left
//! out: partitions, restarts and failovers, crashes, shutdown, async calls,
//! `acquire_many`, `set_permits`, `add_permits`, `drain_permits`, delete.

pub mod call;
pub mod model;
pub mod net;
pub mod normalize;
pub mod state;
pub mod worker;

pub use model::{Action, SemaphoreModel};
pub use state::State;

use crate::client::Fault;

/// A deliberate defect of the semaphore's client, switched back on in the
/// model only: each must be found.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SemMutation {
    /// Every attempt of an acquire call names a latch of its own: a retry
    /// after a lost reply acquires again instead of replaying.
    LatchIgnoredOnRetry,
    /// `end_call` drops a give-back it could not send (Redis away), and the
    /// one written behind late attempts only, instead of handing it to
    /// the release worker (`Engine::give_back_later`).
    GiveBackNotCarriedOn,
}

/// One run's bounds and switches.
#[derive(Clone, Debug)]
pub struct Config {
    /// The permits the semaphore was set to (`try_set_permits`).
    pub permits: i64,
    /// How many clients (one thread each).
    pub clients: u8,
    /// Whether threads make bare tries (`try_acquire`).
    pub tries: bool,
    /// Whether threads make waiting calls of this many ticks
    /// (`try_acquire_for`).
    pub wait_ticks: Option<u8>,
    /// The faults allowed ([`Fault::Cut`] and [`Fault::HoldBack`]).
    pub faults: Vec<Fault>,
    /// The fault budget.
    pub fault_budget: u8,
    /// The pool's retries after a failed attempt (`retry_attempts`).
    pub retries: u8,
    /// The outage tolerance in ticks.
    pub tolerance: u8,
    /// A deliberate defect, if any.
    pub mutation: Option<SemMutation>,
}

impl Config {
    /// The retry rule's bound in ticks (`retry_bound`).
    pub fn retry_window(&self) -> u8 {
        self.retries + 1
    }

    /// An acquire call's latch TTL in ticks (`Resends::RideThrough`): the
    /// tolerance, twice the retry bound, and a second.
    pub fn acquire_latch_ticks(&self) -> u8 {
        self.tolerance + 2 * self.retry_window() + 1
    }

    /// A release's latch TTL in ticks (`Resends::Retries`).
    pub fn release_latch_ticks(&self) -> u8 {
        self.retry_window() + 1
    }

    /// Whether `fault` may be injected.
    pub fn allows(&self, fault: Fault) -> bool {
        self.faults.contains(&fault)
    }

    /// Whether `mutation` is switched on.
    pub fn mutated(&self, mutation: SemMutation) -> bool {
        self.mutation == Some(mutation)
    }

    /// CI's configuration: two clients, one permit, tries and waits of a
    /// tick, one retry, one fault (a cut or a request held back).
    pub fn ci() -> Config {
        Config {
            permits: 1,
            clients: 2,
            tries: true,
            wait_ticks: Some(1),
            faults: vec![Fault::Cut, Fault::HoldBack],
            fault_budget: 1,
            retries: 1,
            tolerance: 1,
            mutation: None,
        }
    }

    /// Two faults: a give-back cut or held back behind its late attempt.
    pub fn two_faults() -> Config {
        Config {
            fault_budget: 2,
            ..Config::ci()
        }
    }

    /// Two faults, no retry: every lost attempt ends a try, so its
    /// give-back goes behind it or on a connection of its own, and a
    /// second fault leaves it to the worker.
    /// One client (the other only adds interleavings to the give-back's
    /// paths); two by hand.
    pub fn no_retries() -> Config {
        Config {
            retries: 0,
            clients: 1,
            ..Config::two_faults()
        }
    }

    /// The deep configuration (by hand): two permits, two faults.
    pub fn deep() -> Config {
        Config {
            permits: 2,
            fault_budget: 2,
            ..Config::ci()
        }
    }
}
