//! The model's names for keys, hash fields, set members and channels, and
//! their real spelling (`docs/wire-format.md`, *Naming*), which the
//! conformance test sends to Redis.
//!
//! Names are small numbers so that a state is cheap to copy and hash; each
//! renders to exactly the string the library would use. The derived orders
//! match the rendered strings' byte order wherever Redis sorts them (sorted
//! set members with equal scores), so the model sorts as Redis does.

use std::fmt;

/// One name a user gave: a lock, a semaphore or a count-down latch.
///
/// Name 1 carries a hash tag of its own (`{shop}:1`), so that the brace
/// rule of every helper key is exercised.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Name(pub u8);

/// A holder: one thread of one client (`<client-uuid>:<thread-id>`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Holder {
    /// The client (its UUID is derived from this number).
    pub client: u8,
    /// The thread within the client (a single decimal digit).
    pub thread: u8,
}

/// A field of a lock hash (also a fair queue's entry).
///
/// Ordered as rendered: by holder, a reader's field (a prefix) before the
/// same holder's writer field, `mode` last.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Field {
    /// A holder's plain (or reader's) field, `<uuid>:<thread>`.
    Reader(Holder),
    /// A holder's writer field, `<uuid>:<thread>:write`.
    Writer(Holder),
    /// The read-write lock's `mode` field (last: `m` sorts after digits).
    Mode,
}

impl Field {
    /// What the rendered strings sort by.
    fn sort_key(self) -> (u8, Option<Holder>, bool) {
        match self {
            Field::Reader(h) => (0, Some(h), false),
            Field::Writer(h) => (0, Some(h), true),
            Field::Mode => (1, None, false),
        }
    }
}

impl Ord for Field {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.sort_key().cmp(&other.sort_key())
    }
}

impl PartialOrd for Field {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// A member of a sorted set: a waiting field or a permit id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Member {
    /// A fair lock's waiter.
    Field(Field),
    /// An expirable semaphore's permit id.
    Permit(u8),
}

/// A request id (an unlock latch, a semaphore request latch).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Request(pub u16);

/// A Redis key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Key {
    /// `<name>`: the lock hash, or a semaphore's or latch's count.
    Name(Name),
    /// `redisson_lock_queue:{name}`: a fair lock's waiters.
    Queue(Name),
    /// `redisson_lock_timeout:{name}`: a fair lock's deadlines.
    Deadlines(Name),
    /// `redisson_lock_token:{name}`: a fenced lock's token counter.
    Token(Name),
    /// `{name}:timeout`: an expirable semaphore's permits out.
    Leases(Name),
    /// `{name}:<field>:rwlock_timeout:<k>`: read hold `k` of a reader.
    ReadHold(Name, Field, u16),
    /// `redisson_unlock_latch:{name}:<request>`: a request's latch.
    Latch(Name, Request),
}

/// A pub/sub channel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Channel {
    /// `redisson_lock__channel:{name}`: a plain (or fenced) lock's.
    Lock(Name),
    /// `redisson_lock__channel:{name}:<field>`: one fair waiter's.
    Fair(Name, Field),
    /// `redisson_rwlock:{name}`: a read-write lock's.
    ReadWrite(Name),
    /// `redisson_sc:{name}`: a semaphore's.
    Semaphore(Name),
    /// `redisson_countdownlatch__channel__{name}`: a count-down latch's
    /// (always in braces: Redisson's rule, not the tagging one).
    CountDown(Name),
}

impl fmt::Display for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            1 => write!(f, "{{shop}}:1"),
            n => write!(f, "lock:{n}"),
        }
    }
}

impl Name {
    /// `p:{name}`, or `p:name` when the name has a `{` of its own.
    pub fn tagged(self, prefix: &str) -> String {
        format!("{prefix}:{}", self.base())
    }

    /// `{name}`, or the name itself when it has a `{` of its own: what
    /// read-hold keys and the lease set start with.
    pub fn base(self) -> String {
        let name = self.to_string();
        if name.contains('{') {
            name
        } else {
            format!("{{{name}}}")
        }
    }
}

impl fmt::Display for Holder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Client numbers lead the UUID in hex, so UUIDs sort as the numbers.
        assert!(self.thread < 10, "thread ids are one digit (byte order)");
        write!(
            f,
            "{:08x}-7e1d-4c0b-9a3f-2b6d5e8c1a4f:{}",
            self.client, self.thread
        )
    }
}

impl fmt::Display for Field {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Field::Reader(h) => write!(f, "{h}"),
            Field::Writer(h) => write!(f, "{h}:write"),
            Field::Mode => write!(f, "mode"),
        }
    }
}

impl fmt::Display for Member {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Member::Field(field) => write!(f, "{field}"),
            // Fixed width, so ids sort as their numbers.
            Member::Permit(id) => write!(f, "{id:032x}"),
        }
    }
}

impl fmt::Display for Request {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:05}", self.0)
    }
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Key::Name(n) => write!(f, "{n}"),
            Key::Queue(n) => f.write_str(&n.tagged("redisson_lock_queue")),
            Key::Deadlines(n) => f.write_str(&n.tagged("redisson_lock_timeout")),
            Key::Token(n) => f.write_str(&n.tagged("redisson_lock_token")),
            Key::Leases(n) => write!(f, "{}:timeout", n.base()),
            Key::ReadHold(n, field, k) => {
                write!(f, "{}:{field}:rwlock_timeout:{k}", n.base())
            }
            Key::Latch(n, r) => write!(f, "{}:{r}", n.tagged("redisson_unlock_latch")),
        }
    }
}

impl fmt::Display for Channel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Channel::Lock(n) => f.write_str(&n.tagged("redisson_lock__channel")),
            Channel::Fair(n, field) => {
                write!(f, "{}:{field}", n.tagged("redisson_lock__channel"))
            }
            Channel::ReadWrite(n) => f.write_str(&n.tagged("redisson_rwlock")),
            Channel::Semaphore(n) => f.write_str(&n.tagged("redisson_sc")),
            Channel::CountDown(n) => write!(f, "redisson_countdownlatch__channel__{{{n}}}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_render_as_the_library_spells_them() {
        let h = Holder {
            client: 2,
            thread: 3,
        };
        assert_eq!(
            Key::Queue(Name(0)).to_string(),
            "redisson_lock_queue:{lock:0}"
        );
        assert_eq!(
            Key::Token(Name(1)).to_string(),
            "redisson_lock_token:{shop}:1"
        );
        assert_eq!(Key::Leases(Name(1)).to_string(), "{shop}:1:timeout");
        assert_eq!(
            Key::ReadHold(Name(0), Field::Reader(h), 2).to_string(),
            format!("{{lock:0}}:{h}:rwlock_timeout:2")
        );
        assert_eq!(Field::Writer(h).to_string(), format!("{h}:write"));
        assert_eq!(
            Channel::CountDown(Name(1)).to_string(),
            "redisson_countdownlatch__channel__{{shop}:1}"
        );
    }

    #[test]
    fn member_order_is_the_rendered_byte_order() {
        let mut members = Vec::new();
        for client in 0..3 {
            for thread in 0..3 {
                let h = Holder { client, thread };
                members.push(Member::Field(Field::Reader(h)));
                members.push(Member::Field(Field::Writer(h)));
            }
        }
        members.extend((0..20).map(Member::Permit));
        let mut by_text = members.clone();
        by_text.sort_by_key(|m| m.to_string());
        members.sort();
        // Fields and permits never share a set: compare each kind alone.
        let fields = |v: &[Member]| -> Vec<Member> {
            v.iter()
                .copied()
                .filter(|m| matches!(m, Member::Field(_)))
                .collect()
        };
        assert_eq!(fields(&members), fields(&by_text));
    }
}
