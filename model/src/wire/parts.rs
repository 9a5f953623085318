//! The pieces [`super::keys_and_args`] spells a call with.

use crate::call::{Attempt, Publish};
use crate::names::{Channel, Field, Holder, Key, Name, Request};

/// A reader's hold-key prefix: `<base>:<field>:rwlock_timeout`.
pub fn hold_prefix(name: Name, holder: Holder) -> String {
    format!("{}:{}:rwlock_timeout", name.base(), Field::Reader(holder))
}

/// How a permit id is sent (and stored in the lease set).
pub fn permit(id: u8) -> String {
    crate::names::Member::Permit(id).to_string()
}

/// The publish-command argument.
pub fn cmd(publish: Publish) -> String {
    match publish {
        Publish::Classic => "publish",
        Publish::Sharded => "spublish",
        Publish::Both => "publish+spublish",
    }
    .into()
}

pub(super) fn attempt_arg(attempt: Attempt) -> String {
    match attempt {
        Attempt::First => "first".into(),
        Attempt::Retry => "retry".into(),
        Attempt::Above(n) => format!("above:{n}"),
    }
}

pub(super) fn flag(on: bool) -> String {
    if on { "1" } else { "0" }.into()
}

pub(super) fn s(value: impl ToString) -> String {
    value.to_string()
}

/// A call's `KEYS` and `ARGV`, built in order.
#[derive(Default)]
pub(super) struct Wire {
    pub(super) keys: Vec<String>,
    pub(super) args: Vec<String>,
}

impl Wire {
    pub(super) fn key(&mut self, key: Key) -> &mut Self {
        self.raw(key.to_string())
    }

    pub(super) fn chan(&mut self, channel: Channel) -> &mut Self {
        self.raw(channel.to_string())
    }

    pub(super) fn latch(&mut self, name: Name, request: Request) -> &mut Self {
        self.key(Key::Latch(name, request))
    }

    pub(super) fn raw(&mut self, key: String) -> &mut Self {
        self.keys.push(key);
        self
    }

    pub(super) fn args(&mut self, args: impl IntoIterator<Item = String>) -> &mut Self {
        self.args.extend(args);
        self
    }

    /// A fair script's keys: the lock, its queue and deadlines, and (for
    /// all but the acquire) the channel prefix.
    pub(super) fn fair(&mut self, name: Name, prefix: bool) -> &mut Self {
        self.key(Key::Name(name))
            .key(Key::Queue(name))
            .key(Key::Deadlines(name));
        if prefix {
            self.chan(Channel::Lock(name));
        }
        self
    }

    /// An expirable semaphore's keys: the count, its lease set, its channel.
    pub(super) fn expirable(&mut self, name: Name) -> &mut Self {
        self.key(Key::Name(name))
            .key(Key::Leases(name))
            .chan(Channel::Semaphore(name))
    }
}
