//! What a key holds: the Redis types the scripts use, with values kept as
//! the few shapes the scripts write (and one the user may leave behind).

use crate::names::{Field, Member};

/// A string value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Str {
    /// A decimal integer (counts, latched replies, permits, attempts).
    Int(i64),
    /// `2:<token>`: a fenced hand-over's latched reply.
    HandedOver(i64),
    /// `taken`: an acquire call's latch after it took its permits.
    Taken,
    /// `closed`: an acquire call's latch after its give-back.
    Closed,
    /// `x`: a string no script writes (left by a user, or corrupt), which
    /// INCR refuses and no count check accepts.
    Garbage,
}

/// A hash field's value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum HashValue {
    /// A hold count.
    Int(i64),
    /// `read` (the `mode` field).
    Read,
    /// `write` (the `mode` field).
    Write,
}

/// A key's value, one variant per Redis type the scripts meet.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Value {
    /// A hash, fields in insertion order (a small hash's listpack order,
    /// which `HGETALL` shows).
    Hash(Vec<(Field, HashValue)>),
    /// A string.
    Str(Str),
    /// A list (a fair lock's queue).
    List(Vec<Field>),
    /// A sorted set, kept sorted by score, then member.
    ZSet(Vec<(Member, i64)>),
}

impl Value {
    /// What `TYPE` answers.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Hash(_) => "hash",
            Value::Str(_) => "string",
            Value::List(_) => "list",
            Value::ZSet(_) => "zset",
        }
    }
}

impl std::fmt::Display for Str {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Str::Int(n) => write!(f, "{n}"),
            Str::HandedOver(t) => write!(f, "2:{t}"),
            Str::Taken => f.write_str("taken"),
            Str::Closed => f.write_str("closed"),
            Str::Garbage => f.write_str("x"),
        }
    }
}

impl std::fmt::Display for HashValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HashValue::Int(n) => write!(f, "{n}"),
            HashValue::Read => f.write_str("read"),
            HashValue::Write => f.write_str("write"),
        }
    }
}
