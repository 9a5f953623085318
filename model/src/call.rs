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
#[allow(missing_docs)] // The fields are the scripts' own arguments.
pub enum Call {
    Acquire {
        name: Name,
        field: Field,
        lease: i64,
        reentry_only: bool,
    },
    FencedAcquire {
        name: Name,
        field: Field,
        lease: i64,
        reentry_only: bool,
    },
    Release {
        name: Name,
        field: Field,
        latch: Request,
        latch_ttl: i64,
        publish: Publish,
        attempt: Attempt,
        successor: Option<Successor>,
    },
    ForceRelease {
        name: Name,
        publish: Publish,
    },
    Renew {
        ttl: i64,
        locks: Vec<Renewal>,
    },
    FairAcquire {
        name: Name,
        field: Field,
        lease: i64,
        wait: i64,
        now: i64,
        join: bool,
        reentry_only: bool,
    },
    FairRelease {
        name: Name,
        field: Field,
        now: i64,
        latch: Request,
        latch_ttl: i64,
        publish: Publish,
        attempt: Attempt,
    },
    FairGiveUp {
        name: Name,
        field: Field,
        wait: i64,
        publish: Publish,
    },
    FairForceRelease {
        name: Name,
        now: i64,
        publish: Publish,
    },
    ReadAcquire {
        name: Name,
        holder: Holder,
        lease: i64,
        reentry_only: bool,
    },
    ReadRelease {
        name: Name,
        holder: Holder,
        latch: Request,
        latch_ttl: i64,
        publish: Publish,
        attempt: Attempt,
    },
    WriteAcquire {
        name: Name,
        holder: Holder,
        lease: i64,
        reentry_only: bool,
    },
    WriteRelease {
        name: Name,
        holder: Holder,
        latch: Request,
        latch_ttl: i64,
        publish: Publish,
        attempt: Attempt,
    },
    /// `write`: delete a lock held in write mode (else read mode).
    RwForceRelease {
        name: Name,
        write: bool,
        publish: Publish,
    },
    SemaphoreAcquire {
        name: Name,
        permits: i64,
        latch: Request,
        latch_ttl: i64,
        attempt: i64,
    },
    SemaphoreRelease {
        name: Name,
        permits: i64,
        latch: Request,
        latch_ttl: i64,
        publish: Publish,
    },
    SemaphoreSet {
        name: Name,
        op: SetOp,
        latch: Request,
        latch_ttl: i64,
        publish: Publish,
    },
    SemaphoreGiveBack {
        name: Name,
        permits: i64,
        latch: Request,
        latch_ttl: i64,
        publish: Publish,
    },
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
    ExpirableRelease {
        name: Name,
        id: u8,
        now: i64,
        publish: Publish,
        latch: Request,
        latch_ttl: i64,
    },
    ExpirableLease {
        name: Name,
        now: i64,
        publish: Publish,
        op: LeaseOp,
    },
    ExpirableGiveBack {
        name: Name,
        publish: Publish,
        latch: Request,
        latch_ttl: i64,
        ids: Vec<u8>,
    },
    LatchTrySet {
        name: Name,
        count: i64,
        latch: Request,
        latch_ttl: i64,
        publish: Publish,
    },
    LatchCountDown {
        name: Name,
        latch: Request,
        latch_ttl: i64,
        publish: Publish,
    },
    LatchDelete {
        name: Name,
        latch: Request,
        latch_ttl: i64,
        publish: Publish,
    },
    Inspect {
        name: Name,
    },
    InspectCounter {
        name: Name,
    },
}
