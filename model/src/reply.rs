//! What a script call gives back: its reply, the exit it took, and the
//! messages it published.

use crate::names::Channel;

/// A script's reply, as Redis would send it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Reply {
    /// Nil (Lua `nil` or `false`).
    Nil,
    /// An integer that depends on no clock.
    Int(i64),
    /// An integer read from a TTL, or computed from one (or from a fair
    /// deadline, which is): on a real server it is smaller by the time
    /// that passed, which the conformance test allows for.
    Ttl(i64),
    /// A bulk string.
    Text(String),
    /// A sorted set score sent as text (inspect's deadlines): a clock
    /// value too.
    Score(i64),
    /// An array.
    Array(Vec<Reply>),
    /// An error the script returned (`redis.error_reply`), whole.
    Error(String),
    /// An error a command raised inside the script: its first word.
    Raised(&'static str),
}

/// One message a script published.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Publication {
    /// The channel.
    pub channel: Channel,
    /// The message (every message the scripts send is a decimal integer).
    pub message: i64,
    /// Sent with `SPUBLISH` (a classic listener does not hear it).
    pub sharded: bool,
}

/// A script call's whole effect besides the keyspace.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Outcome {
    /// The reply.
    pub reply: Reply,
    /// The exit taken: an id of [`crate::scripts::branches`].
    pub branch: &'static str,
    /// What was published, in order.
    pub published: Vec<Publication>,
}
