//! The abstract keyspace: every key's value and expiry, and the Redis
//! commands the scripts call, each with Redis's own semantics (types
//! checked, empty collections deleted, a non-positive `PEXPIRE` deleting).
//!
//! Time is the keyspace's own clock in ms: it moves only when told
//! ([`Keyspace::advance`]), so a step is deterministic.

mod collections;
mod value;

pub use value::{HashValue, Str, Value};

use crate::names::Key;
use std::collections::BTreeMap;

/// An error a command raised inside a script (the script stops there,
/// keeping what it wrote before: Redis does not roll back).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CommandError {
    /// The error's first word, which the conformance test compares.
    pub code: &'static str,
    /// The rest, for reading.
    pub message: &'static str,
}

/// What a command returns: its value, or the error it raised.
pub type Cmd<T> = Result<T, CommandError>;

pub(crate) const WRONGTYPE: CommandError = CommandError {
    code: "WRONGTYPE",
    message: "Operation against a key holding the wrong kind of value",
};

pub(crate) const NOT_AN_INTEGER: CommandError = CommandError {
    code: "ERR",
    message: "value is not an integer or out of range",
};

/// One key: its value and when it expires (ms on the keyspace's clock).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Entry {
    /// The value.
    pub value: Value,
    /// When the key expires; `None`: never (PTTL -1).
    pub expires_at: Option<i64>,
}

/// Every key, and the clock their TTLs run on.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Keyspace {
    /// The clock, in ms.
    pub now: i64,
    /// Every live key (an expired key is removed by [`advance`](Self::advance)).
    pub keys: BTreeMap<Key, Entry>,
}

impl Keyspace {
    /// An empty keyspace at time 0.
    pub fn new() -> Keyspace {
        Keyspace::default()
    }

    /// Moves the clock on by `ms` and removes the keys that expire by then
    /// (those whose PTTL reaches 0 or less), which it returns.
    pub fn advance(&mut self, ms: i64) -> Vec<Key> {
        self.now += ms;
        let now = self.now;
        let expired: Vec<Key> = self
            .keys
            .iter()
            .filter(|(_, e)| e.expires_at.is_some_and(|at| at <= now))
            .map(|(k, _)| *k)
            .collect();
        for key in &expired {
            self.keys.remove(key);
        }
        expired
    }

    /// Puts `value` at `key` without a TTL, as a user's own command would
    /// (the conformance test's way to leave a key of the wrong kind).
    pub fn poke(&mut self, key: Key, value: Value) {
        self.keys.insert(
            key,
            Entry {
                value,
                expires_at: None,
            },
        );
    }

    /// The value at `key`, if any.
    pub fn value(&self, key: Key) -> Option<&Value> {
        self.keys.get(&key).map(|e| &e.value)
    }

    /// `EXISTS key`.
    pub fn exists(&self, key: Key) -> bool {
        self.keys.contains_key(&key)
    }

    /// `TYPE key`.
    pub fn type_of(&self, key: Key) -> &'static str {
        self.value(key).map_or("none", Value::type_name)
    }

    /// `DEL key`: 1 when it existed.
    pub fn del(&mut self, key: Key) -> i64 {
        i64::from(self.keys.remove(&key).is_some())
    }

    /// `PTTL key`: -2 when absent, -1 without a TTL.
    pub fn pttl(&self, key: Key) -> i64 {
        match self.keys.get(&key) {
            None => -2,
            Some(Entry {
                expires_at: None, ..
            }) => -1,
            Some(Entry {
                expires_at: Some(at),
                ..
            }) => at - self.now,
        }
    }

    /// `PEXPIRE key ms`: 0 when absent; a TTL of 0 or less deletes the key.
    pub fn pexpire(&mut self, key: Key, ms: i64) -> i64 {
        let now = self.now;
        match self.keys.get_mut(&key) {
            None => 0,
            Some(_) if ms <= 0 => {
                self.keys.remove(&key);
                1
            }
            Some(entry) => {
                entry.expires_at = Some(now + ms);
                1
            }
        }
    }

    /// `PERSIST key`: 1 when the key had a TTL, which it no longer has.
    pub fn persist(&mut self, key: Key) -> i64 {
        match self.keys.get_mut(&key) {
            Some(entry) if entry.expires_at.is_some() => {
                entry.expires_at = None;
                1
            }
            _ => 0,
        }
    }

    /// Writes `value` at `key`, keeping the key's TTL when it existed
    /// (`HSET`, `INCRBY`, `RPUSH` ... do not touch a TTL).
    fn write(&mut self, key: Key, value: Value) {
        match self.keys.get_mut(&key) {
            Some(entry) => entry.value = value,
            None => self.poke(key, value),
        }
    }
}
