//! One script call with its keys and arguments, typed: what the library
//! sends, and what the model runs ([`crate::scripts::run`]). Its real
//! spelling (`KEYS` and `ARGV` as strings) is in [`crate::wire`].

use crate::names::{Field, Holder, Name, Request};

/// The command a publishing script runs (its publish-command argument).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Publish {
    /// `publish`: classic pub/sub.
    Classic,
    /// `spublish`: sharded pub/sub.
    Sharded,
    /// `publish+spublish`: both, behind the library's prelude.
    Both,
}

/// Which attempt of a release request this is (its `attempt` argument).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Attempt {
    /// `first`.
    First,
    /// `retry`.
    Retry,
    /// `above:N`: the undo of a late acquire, releasing only above N holds.
    Above(i64),
}

/// A successor named by a release, for a direct hand-over.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Successor {
    /// Its field.
    pub field: Field,
    /// Its lease in ms.
    pub lease: i64,
    /// Whether it waits for a fenced lock (the release then names the
    /// token counter, `KEYS[4]`).
    pub fenced: bool,
}

/// One lock of a renewal batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Renewal {
    /// The lock.
    pub name: Name,
    /// `r` (a read lock: its holds' keys too) rather than `h`.
    pub read: bool,
    /// The holder field.
    pub field: Field,
}

/// `semaphore_set.lua`'s operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SetOp {
    /// `try_set n`.
    TrySet(i64),
    /// `set n`.
    Set(i64),
    /// `remove n`.
    Remove(i64),
    /// `drain`.
    Drain,
    /// An operation the script does not know (`bogus`).
    Unknown,
}

/// `expirable_lease.lua`'s operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum LeaseOp {
    /// `available`.
    Available,
    /// `update <id> <end>`.
    Update(u8, i64),
    /// An operation the script does not know (`bogus`).
    Unknown,
}

/// One call of one script. Times are ms; `now` is the client's clock.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[allow(missing_docs)] // The fields are the files' own arguments, named as there.
pub enum Call {
    /// `acquire.lua`.
    Acquire {
        name: Name,
        field: Field,
        lease: i64,
        reentry_only: bool,
    },
    /// `fenced_acquire.lua`.
    FencedAcquire {
        name: Name,
        field: Field,
        lease: i64,
        reentry_only: bool,
    },
    /// `release.lua`.
    Release {
        name: Name,
        field: Field,
        latch: Request,
        latch_ttl: i64,
        publish: Publish,
        attempt: Attempt,
        successor: Option<Successor>,
    },
    /// `force_release.lua`.
    ForceRelease { name: Name, publish: Publish },
    /// `renew.lua`.
    Renew { ttl: i64, locks: Vec<Renewal> },
    /// `fair_acquire.lua`.
    FairAcquire {
        name: Name,
        field: Field,
        lease: i64,
        wait: i64,
        now: i64,
        join: bool,
        reentry_only: bool,
    },
    /// `fair_release.lua`.
    FairRelease {
        name: Name,
        field: Field,
        now: i64,
        latch: Request,
        latch_ttl: i64,
        publish: Publish,
        attempt: Attempt,
    },
    /// `fair_give_up.lua`.
    FairGiveUp {
        name: Name,
        field: Field,
        wait: i64,
        publish: Publish,
    },
    /// `fair_force_release.lua`.
    FairForceRelease {
        name: Name,
        now: i64,
        publish: Publish,
    },
    /// `read_acquire.lua`.
    ReadAcquire {
        name: Name,
        holder: Holder,
        lease: i64,
        reentry_only: bool,
    },
    /// `read_release.lua`.
    ReadRelease {
        name: Name,
        holder: Holder,
        latch: Request,
        latch_ttl: i64,
        publish: Publish,
        attempt: Attempt,
    },
    /// `write_acquire.lua`.
    WriteAcquire {
        name: Name,
        holder: Holder,
        lease: i64,
        reentry_only: bool,
    },
    /// `write_release.lua`.
    WriteRelease {
        name: Name,
        holder: Holder,
        latch: Request,
        latch_ttl: i64,
        publish: Publish,
        attempt: Attempt,
    },
    /// `rw_force_release.lua`; `write`: the write mode (else the read mode).
    RwForceRelease {
        name: Name,
        write: bool,
        publish: Publish,
    },
    /// `semaphore_acquire.lua`.
    SemaphoreAcquire {
        name: Name,
        permits: i64,
        latch: Request,
        latch_ttl: i64,
        attempt: i64,
    },
    /// `semaphore_release.lua`.
    SemaphoreRelease {
        name: Name,
        permits: i64,
        latch: Request,
        latch_ttl: i64,
        publish: Publish,
    },
    /// `semaphore_set.lua`.
    SemaphoreSet {
        name: Name,
        op: SetOp,
        latch: Request,
        latch_ttl: i64,
        publish: Publish,
    },
    /// `semaphore_give_back.lua`.
    SemaphoreGiveBack {
        name: Name,
        permits: i64,
        latch: Request,
        latch_ttl: i64,
        publish: Publish,
    },
    /// `expirable_acquire.lua`.
    ExpirableAcquire {
        name: Name,
        lease_end: i64,
        now: i64,
        publish: Publish,
        latch: Request,
        latch_ttl: i64,
        attempt: i64,
        /// One id per permit: their number is how many permits.
        ids: Vec<u8>,
    },
    /// `expirable_release.lua`.
    ExpirableRelease {
        name: Name,
        id: u8,
        now: i64,
        publish: Publish,
        latch: Request,
        latch_ttl: i64,
    },
    /// `expirable_lease.lua`.
    ExpirableLease {
        name: Name,
        now: i64,
        publish: Publish,
        op: LeaseOp,
    },
    /// `expirable_give_back.lua`.
    ExpirableGiveBack {
        name: Name,
        publish: Publish,
        latch: Request,
        latch_ttl: i64,
        ids: Vec<u8>,
    },
    /// `latch_try_set.lua`.
    LatchTrySet {
        name: Name,
        count: i64,
        latch: Request,
        latch_ttl: i64,
        publish: Publish,
    },
    /// `latch_count_down.lua`.
    LatchCountDown {
        name: Name,
        latch: Request,
        latch_ttl: i64,
        publish: Publish,
    },
    /// `latch_count_down_undo.lua`.
    LatchCountDownUndo {
        name: Name,
        latch: Request,
        latch_ttl: i64,
    },
    /// `latch_delete.lua`.
    LatchDelete {
        name: Name,
        latch: Request,
        latch_ttl: i64,
        publish: Publish,
    },
    /// `inspect.lua`.
    Inspect { name: Name },
    /// `inspect_counter.lua`.
    InspectCounter { name: Name },
}
