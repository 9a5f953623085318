//! The Redis names of a lock's key, channel and helper keys.
//!
//! Every helper key carries the lock name as its cluster hash tag, so that all
//! keys of one lock live in the same slot (see `docs/wire-format.md`).

use crate::error::{Error, Result};

/// Prefix of the channel on which releases of a plain lock are announced.
const LOCK_CHANNEL_PREFIX: &str = "redisson_lock__channel";
/// Prefix of the keys that make a release idempotent when it is retried.
const UNLOCK_LATCH_PREFIX: &str = "redisson_unlock_latch";
/// Prefix of a semaphore's channel (Redisson's `RSemaphore`).
const SEMAPHORE_CHANNEL_PREFIX: &str = "redisson_sc";
/// What a count-down latch's channel starts with (Redisson's
/// `RCountDownLatch`): the name follows in braces, always.
const LATCH_CHANNEL_PREFIX: &str = "redisson_countdownlatch__channel__";

/// `prefix:{name}`, or `prefix:name` when the name already carries a hash tag.
pub(crate) fn prefixed(prefix: &str, name: &str) -> String {
    if name.contains('{') {
        format!("{prefix}:{name}")
    } else {
        format!("{prefix}:{{{name}}}")
    }
}

/// The pub/sub channel of a plain (reentrant, fenced or spin) lock.
pub(crate) fn lock_channel(name: &str) -> String {
    prefixed(LOCK_CHANNEL_PREFIX, name)
}

/// The pub/sub channel of a semaphore: `redisson_sc:{name}`.
pub(crate) fn semaphore_channel(name: &str) -> String {
    prefixed(SEMAPHORE_CHANNEL_PREFIX, name)
}

/// The pub/sub channel of a count-down latch:
/// `redisson_countdownlatch__channel__{name}`, braces even around a name
/// that has its own (as Redisson writes it).
pub(crate) fn latch_channel(name: &str) -> String {
    format!("{LATCH_CHANNEL_PREFIX}{{{name}}}")
}

/// Whether `channel` belongs to a semaphore or a count-down latch, whose
/// every message wakes every local waiter (see `pubsub/subscriber.rs`).
/// Lock channels never start like these.
pub(crate) fn is_synchronizer_channel(channel: &[u8]) -> bool {
    channel.starts_with(SEMAPHORE_CHANNEL_PREFIX.as_bytes())
        && channel.get(SEMAPHORE_CHANNEL_PREFIX.len()) == Some(&b':')
        || channel.starts_with(LATCH_CHANNEL_PREFIX.as_bytes())
}

/// `{name}:suffix`, or `name:suffix` when the name already carries a hash
/// tag (Redisson's `suffixName`).
pub(crate) fn suffixed(name: &str, suffix: &str) -> String {
    if name.contains('{') {
        format!("{name}:{suffix}")
    } else {
        format!("{{{name}}}:{suffix}")
    }
}

/// The latch key that remembers the reply of release `request_id`.
pub(crate) fn unlock_latch(name: &str, request_id: &str) -> String {
    format!("{}:{request_id}", prefixed(UNLOCK_LATCH_PREFIX, name))
}

/// Checks that `name` can name a lock: any string but the empty one.
///
/// A blank name (`"   "`, `"\t"`) is a name like any other, as it is for
/// Redis and for Redisson, which takes any string: a Java service that
/// locks one must be able to share it with this crate. (Refusing it would
/// catch a name built from a setting left unset, at the price of that
/// compatibility.)
pub(crate) fn validate(name: &str) -> Result<()> {
    if name.is_empty() {
        return Err(Error::InvalidName {
            name: String::new(),
            reason: "a lock name must not be empty",
        });
    }
    Ok(())
}

/// A lock name short enough to quote in an error or a log line.
pub(crate) fn shorten(name: &str) -> String {
    const MAX: usize = 200;
    if name.len() <= MAX {
        return name.to_owned();
    }
    let mut end = MAX;
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes)", &name[..end], name.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixed_adds_a_hash_tag_unless_one_is_there() {
        assert_eq!(
            lock_channel("orders:42"),
            "redisson_lock__channel:{orders:42}"
        );
        assert_eq!(
            lock_channel("{orders}:42"),
            "redisson_lock__channel:{orders}:42"
        );
        assert_eq!(unlock_latch("a", "r1"), "redisson_unlock_latch:{a}:r1");
    }

    #[test]
    fn synchronizer_channels_follow_redisson() {
        assert_eq!(semaphore_channel("s"), "redisson_sc:{s}");
        assert_eq!(semaphore_channel("{s}:1"), "redisson_sc:{s}:1");
        assert_eq!(latch_channel("l"), "redisson_countdownlatch__channel__{l}");
        assert_eq!(
            latch_channel("{l}"),
            "redisson_countdownlatch__channel__{{l}}"
        );
        assert!(is_synchronizer_channel(semaphore_channel("x").as_bytes()));
        assert!(is_synchronizer_channel(latch_channel("x").as_bytes()));
        assert!(!is_synchronizer_channel(
            lock_channel("redisson_sc:x").as_bytes()
        ));
        assert!(!is_synchronizer_channel(b"redisson_scx"));
        assert_eq!(suffixed("p", "timeout"), "{p}:timeout");
        assert_eq!(suffixed("{p}:1", "timeout"), "{p}:1:timeout");
    }

    #[test]
    fn empty_names_are_refused() {
        assert!(matches!(validate(""), Err(Error::InvalidName { .. })));
        assert!(validate("x").is_ok());
    }

    #[test]
    fn long_names_are_shortened_on_a_char_boundary() {
        let long = "é".repeat(300);
        let short = shorten(&long);
        assert!(short.len() < long.len());
        assert!(short.ends_with("(600 bytes)"));
    }
}
