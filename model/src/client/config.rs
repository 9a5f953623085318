//! What one run of the client model explores: the lock's kind, the
//! clients and their threads, the faults allowed, the clock's orderings,
//! and any deliberate defect switched back on.
//!
//! Time is counted in ticks of about one response timeout. The orderings
//! that matter are kept, not the library's defaults: an attempt waits one
//! tick for its reply; the pool's retry window is `retries + 1` ticks; an
//! unlock latch (and an undo's keep time) lives one tick longer than that
//! (`Resends::latch_ttl`: the retry bound and a second); the watchdog's
//! timeout is longer still; a short lease ends within the retry window and
//! a long one outlives the watchdog's timeout.

use super::known::Known;
use super::mutation::ClientMutation;
use crate::scripts::Mutation;

/// Milliseconds per tick, as the keyspace counts them.
pub const TICK_MS: i64 = 1000;

/// Which lock kind the threads take (on one lock name, or two names that
/// share a channel: [`Config::braced`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// `Lock`: `acquire.lua`, pub/sub waiters, direct hand-over.
    Plain,
    /// `FencedLock`: `fenced_acquire.lua`, tokens, hand-over drawing one.
    Fenced,
    /// `SpinLock`: the plain scripts, no pub/sub: waiters back off.
    Spin,
    /// `FairLock` (`kind/fair.rs`), tries only: `fair_acquire.lua` with
    /// no queue joined (`Engine`'s try path, `try_acquire(false)`), so the
    /// queue stays empty and the clock the scripts take is never read;
    /// `fair_release.lua`, no hand-over.
    Fair,
    /// `WriteLock` (`kind/read_write.rs`, `Write`), tries only:
    /// `write_acquire.lua`, `write_release.lua` under the `:write` field.
    Write,
    /// `ReadLock` (`kind/read_write.rs`, `Read`), tries only, readers
    /// only (so they share: no exclusion to check): `read_acquire.lua`
    /// with a key per hold, `read_release.lua`, renewed as `r`.
    Read,
}

impl Kind {
    /// Whether the kind's waits are modelled (the fair queue and the
    /// read-write channel's waits are not: its configurations only try).
    pub fn waits_modelled(self) -> bool {
        matches!(self, Kind::Plain | Kind::Fenced | Kind::Spin)
    }

    /// Whether its holds are renewed as `h` (`RenewKind::Hash`): all but
    /// the read lock, whose release answers 0 whether the caller's own
    /// holds or other readers' remain, so that only a hash kind's last
    /// release gives back holds no guard stands for (`release.rs`,
    /// `released`; `pending.rs`, `answered`).
    pub fn renewed_as_hash(self) -> bool {
        self != Kind::Read
    }

    /// Whether a release may hand the lock over (`release.lua`'s
    /// successor: the plain and fenced kinds, `hash.rs`, `release_to`).
    pub fn hands_over(self) -> bool {
        matches!(self, Kind::Plain | Kind::Fenced)
    }
}

/// How a thread's holds are kept alive.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Lease {
    /// No lease: the watchdog renews them (`renewals.rs`, `watchdog.rs`).
    Watched,
    /// A lease of this many ticks.
    Ticks(u8),
}

/// How a thread releases a hold (`engine/release.rs`, `Mode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ReleaseMode {
    /// A guard's drop: one response timeout, then the worker carries it on.
    Drop,
    /// `LockGuard::unlock`: the retry rule's bound, then the worker, with
    /// `ReleaseUnconfirmed`; its `Ok` is what the caller is told.
    Unlock,
}

/// A fault the model may inject, each costing one of the run's budget.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Fault {
    /// A connection cut: its request lost if not yet run, else its reply.
    Cut,
    /// A request (or its reply) held back past the response timeout: it
    /// still runs, within one more tick (a stalled server or path).
    HoldBack,
    /// A client partitioned from the server until it heals: its
    /// connections cut, new ones silent (connects, never answered).
    Partition,
    /// The server restarts without persistence: every key gone, every
    /// connection cut.
    Restart,
    /// A client's pub/sub connection drops: messages in flight lost; it
    /// reconnects and wakes every waiter (`pubsub/subscriber.rs`).
    PubSubDrop,
    /// A client process dies: its threads stop, its connections close.
    Crash,
    /// The master dies and its replica, lagging, is promoted (`replica.rs`):
    /// writes not replicated yet are lost, every connection is cut, and
    /// the clients reconnect to the new master (the Sentinel switch,
    /// `Pool::master_switched`).
    Failover,
}

/// One run's bounds and switches.
#[derive(Clone, Debug)]
pub struct Config {
    /// The lock kind.
    pub kind: Kind,
    /// Each client's threads, by how their holds are kept alive.
    pub clients: Vec<Vec<Lease>>,
    /// The most holds one thread takes (re-entries included).
    pub max_holds: u8,
    /// Whether threads make bare tries (`try_lock`).
    pub tries: bool,
    /// Whether threads make waiting calls (`lock`, `try_lock_for`).
    pub waits: bool,
    /// How a waiting call's wait is bounded, in ticks (`None`: forever).
    pub wait_ticks: Option<u8>,
    /// How releases are made (each thread chooses among them).
    pub release_modes: Vec<ReleaseMode>,
    /// The faults allowed, and how many in one run.
    pub faults: Vec<Fault>,
    /// The fault budget.
    pub fault_budget: u8,
    /// The pool's retries after a failed attempt (`retry_attempts`).
    pub retries: u8,
    /// The watchdog's timeout in ticks (renewed every tick).
    pub watchdog: u8,
    /// Failed looks a waiting call rides out before `Unreachable`.
    pub outage_tolerance: u8,
    /// A deliberate defect of the client, if any.
    pub mutation: Option<ClientMutation>,
    /// A deliberate defect of the scripts, if any.
    pub script_mutation: Option<Mutation>,
    /// Defects of the library as built that the properties excuse.
    pub excused: Vec<Known>,
    /// Clients with threads that act for one `Owner` (`Lock<K, Owner>`),
    /// and how many (its first ones; the others act for themselves): one
    /// field (`<uuid>:<owner id>`; thread 0's here), so one lane and one
    /// renewal record, and any of them may release a hold another took.
    /// They share one lease.
    pub owners: Vec<(u8, u8)>,
    /// `sync_replicas(1, timeout)`: an acquire that took the lock waits
    /// (`WAIT`) for the replica and, when it did not acknowledge, is undone
    /// and fails with `ReplicasNotSynced` (`Pool::run_write`,
    /// `attempt.rs`, `send_acquire`).
    pub sync_replicas: bool,
    /// Threads `(client, thread)` that act on a second lock, `{x}`, whose
    /// channel is the first lock's (`x`): Redisson's naming gives both
    /// `redisson_lock__channel:{x}` (phase 9b). Each thread acts on one
    /// lock, fixed here; the others on `x`. Empty: one lock name only.
    pub braced: Vec<(u8, u8)>,
}

impl Config {
    /// The retry window in ticks: every attempt of one request under the
    /// retry rule is sent within it (`request.rs`, `retry_bound`).
    pub fn retry_window(&self) -> u8 {
        self.retries + 1
    }

    /// The unlock latch's TTL (and an undo's keep time) in ticks: the
    /// retry bound and a second (`Resends::Retries.latch_ttl`), unless the
    /// latch mutation shortens it to the window itself.
    pub fn latch_ticks(&self) -> u8 {
        if self.mutation == Some(ClientMutation::LatchWithinRetryWindow) {
            self.retry_window()
        } else {
            self.retry_window() + 1
        }
    }

    /// A thread's lease in ms, as its acquire sends it (the watchdog's
    /// timeout without a lease).
    pub fn lease_ms(&self, lease: Lease) -> i64 {
        i64::from(self.lease_ticks(lease)) * TICK_MS
    }

    /// A thread's lease in ticks.
    pub fn lease_ticks(&self, lease: Lease) -> u8 {
        match lease {
            Lease::Watched => self.watchdog,
            Lease::Ticks(n) => n,
        }
    }

    /// The longest TTL a lock key may have.
    pub fn max_ttl_ticks(&self) -> u8 {
        self.clients
            .iter()
            .flatten()
            .map(|&l| self.lease_ticks(l))
            .max()
            .unwrap_or(0)
            .max(self.watchdog)
    }

    /// Whether `fault` may be injected.
    pub fn allows(&self, fault: Fault) -> bool {
        self.faults.contains(&fault)
    }

    /// Whether the properties excuse the known defect `known`.
    pub fn excuses(&self, known: Known) -> bool {
        self.excused.contains(&known)
    }

    /// Whether the model's client has `mutation` switched on.
    pub fn mutated(&self, mutation: ClientMutation) -> bool {
        self.mutation == Some(mutation)
    }

    /// The thread whose field, lane and renewal record thread `(c, t)`
    /// acts for: itself, or its owner's (thread 0 of an owner's client).
    pub fn holder(&self, c: u8, t: u8) -> u8 {
        if self.owners.iter().any(|&(o, n)| o == c && t < n) {
            0
        } else {
            t
        }
    }

    /// The lock thread `(c, t)` acts on: 0 (`x`) or 1 (`{x}`, on the same
    /// channel).
    pub fn lock(&self, c: u8, t: u8) -> u8 {
        u8::from(self.braced.contains(&(c, t)))
    }

    /// How many lock names the threads act on (1 or 2).
    pub fn locks(&self) -> u8 {
        if self.braced.is_empty() {
            1
        } else {
            2
        }
    }

    /// Whether waiters subscribe to the lock's channel (all but spin).
    pub fn pubsub(&self) -> bool {
        self.kind != Kind::Spin
    }

    /// Whether two holders may hold at once (readers share).
    pub fn exclusive(&self) -> bool {
        self.kind != Kind::Read
    }
}
