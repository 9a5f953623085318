//! What [`Client::inspect`](crate::Client::inspect) reports of one lock:
//! its kind, holders, queue and listeners, as plain data.

use std::fmt;
use std::time::{Duration, SystemTime};

use uuid::Uuid;

use crate::identity::ClientIdentity;

/// What kind of lock a name holds, as far as its layout in Redis shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Kind {
    /// A plain reentrant lock (also a spin lock, and a fair lock with an
    /// empty queue, which look the same).
    Lock,
    /// A fair lock with waiters queued (or a deadline set left behind).
    Fair,
    /// A read-write lock.
    ReadWrite,
    /// A fenced lock: its fencing-token counter exists.
    Fenced,
}

impl Kind {
    /// The kind as one word: `lock`, `fair`, `read_write` or `fenced`.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Lock => "lock",
            Kind::Fair => "fair",
            Kind::ReadWrite => "read_write",
            Kind::Fenced => "fenced",
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The mode a read-write lock is held in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Mode {
    /// Held by one or more readers (the writer may still hold read holds
    /// after a downgrade).
    Read,
    /// Held by one writer (who may also hold read holds).
    Write,
}

impl Mode {
    /// The mode as one word: `read` or `write`.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Read => "read",
            Mode::Write => "write",
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One holder of a lock: a thread of one client, or an owner.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Holder {
    /// The holding client's id ([`Client::id`](crate::Client::id); a Redisson client's id too).
    pub client: Uuid,
    /// The holding thread's number within that client's process, or the
    /// holding owner's id (see [`owner`](Self::owner)).
    pub thread: u64,
    /// Whether the holder is an [`Owner`](crate::Owner), not a thread: its
    /// id is at or above 2^62 (a redhold owner, or a Redisson `threadId`
    /// chosen in that range).
    pub owner: bool,
    /// How many times the holder holds it (reentrant holds).
    pub count: u64,
    /// Whether this is the writer of a read-write lock (its field ends in
    /// `:write`); a thread holding both read and write holds appears twice.
    pub write: bool,
    /// Who the holding client is (name, host, pid), when it is a redhold
    /// client still connected and `CLIENT LIST` may be read; `None` for a
    /// Redisson client.
    pub identity: Option<ClientIdentity>,
}

impl Holder {
    /// The holder field without the `:write` suffix: `<client-uuid>:<thread-id>`.
    pub fn id(&self) -> String {
        format!("{}:{}", self.client.hyphenated(), self.thread)
    }
}

/// A waiter in a fair lock's queue.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Waiter {
    /// The waiter's holder field, `<client-uuid>:<thread-id>`, as stored.
    pub field: String,
    /// When the waiter is dropped from the queue unless it takes its turn
    /// before (it died, or stopped waiting without saying so); by the
    /// clock of the client that queued it.
    pub deadline: Option<SystemTime>,
    /// Who the waiting client is, as for [`Holder::identity`].
    pub identity: Option<ClientIdentity>,
}

/// Everything Redis knows about one lock at one instant.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LockInfo {
    /// The lock's name (its key).
    pub name: String,
    /// Whether anyone holds it.
    pub locked: bool,
    /// Its kind, as far as the layout shows ([`Kind::Lock`] when nothing is
    /// there at all).
    pub kind: Kind,
    /// The mode of a read-write lock that is held; `None` otherwise.
    pub mode: Option<Mode>,
    /// How long the lock lives unless renewed or released; `None` when it
    /// is not held (or, which redhold and Redisson never do, has no TTL).
    pub ttl: Option<Duration>,
    /// Who holds it, in the order Redis lists the hash fields.
    pub holders: Vec<Holder>,
    /// A fair lock's waiters, first in line first; empty for other kinds.
    pub queue: Vec<Waiter>,
    /// How many connections listen on the lock's wake-up channels (for a
    /// fair lock, its waiters' own channels too): every client process with
    /// a parked waiter counts once, and may still count for a few seconds
    /// after its last waiter left. Spin-lock waiters never listen.
    pub subscribers: u64,
    /// A fenced lock's latest fencing token; `None` for other kinds.
    pub token: Option<u64>,
}

impl LockInfo {
    /// Whether there is nothing to show: not held and nobody queued.
    pub fn is_vacant(&self) -> bool {
        !self.locked && self.queue.is_empty()
    }
}
