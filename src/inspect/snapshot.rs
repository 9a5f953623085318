//! One lock read at one instant (`lua/inspect.lua`), and what its layout
//! says it is.

use std::time::{Duration, UNIX_EPOCH};

use redis::Value;
use uuid::Uuid;

use super::info::{Holder, Kind, LockInfo, Mode, Waiter};
use crate::error::{Error, Result};
use crate::names;
use crate::owner::is_owner_id;
use crate::scripts;
use crate::server::Server;

/// The prefixes of a lock's helpers (see `docs/wire-format.md`).
pub(super) const QUEUE_PREFIX: &str = "redisson_lock_queue";
const DEADLINES_PREFIX: &str = "redisson_lock_timeout";
pub(super) const TOKEN_PREFIX: &str = "redisson_lock_token";
const RW_CHANNEL_PREFIX: &str = "redisson_rwlock";

/// The suffix of a read-write lock's writer field.
const WRITE_SUFFIX: &str = ":write";

/// What `lua/inspect.lua` replies, field by field.
#[derive(Debug, Default)]
pub(super) struct Raw {
    /// `TYPE` of the lock's key: `none`, `hash`, `string`, ...
    pub(super) key_type: String,
    /// The hash's fields and values, alternating.
    pub(super) fields: Vec<Vec<u8>>,
    pub(super) pttl: i64,
    pub(super) queue: Vec<Vec<u8>>,
    /// The deadline set's members and scores, alternating.
    pub(super) deadlines: Vec<Vec<u8>>,
    pub(super) token: Option<Vec<u8>>,
}

/// Runs the script for `name` and reads its reply; `subscribers` is left 0.
pub(super) fn read(server: &Server, name: &str) -> Result<LockInfo> {
    let queue = names::prefixed(QUEUE_PREFIX, name);
    let deadlines = names::prefixed(DEADLINES_PREFIX, name);
    let token = names::prefixed(TOKEN_PREFIX, name);
    type Reply = (
        String,
        Vec<Vec<u8>>,
        i64,
        Vec<Vec<u8>>,
        Vec<Vec<u8>>,
        Option<Vec<u8>>,
    );
    let (key_type, fields, pttl, queue, deadlines, token): Reply = server.run(|conn| {
        scripts::INSPECT
            .key(name)
            .key(&queue)
            .key(&deadlines)
            .key(&token)
            .invoke(conn)
    })?;
    let raw = Raw {
        key_type,
        fields,
        pttl,
        queue,
        deadlines,
        token,
    };
    interpret(name, raw).map_err(|found| Error::WrongKind {
        lock: names::shorten(name),
        expected: "lock",
        found: found.to_owned(),
    })
}

/// What the layout in `raw` says the lock called `name` is, or what the
/// name holds instead of a lock.
pub(super) fn interpret(name: &str, raw: Raw) -> std::result::Result<LockInfo, &'static str> {
    let token = raw
        .token
        .as_deref()
        .and_then(|t| std::str::from_utf8(t).ok())
        .and_then(|t| t.parse::<u64>().ok());
    let queue: Vec<Waiter> = {
        let deadlines = pairs(&raw.deadlines);
        raw.queue
            .iter()
            .map(|field| Waiter {
                field: String::from_utf8_lossy(field).into_owned(),
                deadline: deadlines
                    .iter()
                    .find(|(member, _)| member == field)
                    .and_then(|(_, score)| std::str::from_utf8(score).ok())
                    .and_then(|score| score.parse::<f64>().ok())
                    .filter(|ms| ms.is_finite() && *ms >= 0.0)
                    .and_then(|ms| Duration::try_from_secs_f64(ms / 1000.0).ok())
                    .map(|since_epoch| UNIX_EPOCH + since_epoch),
                identity: None,
            })
            .collect()
    };
    let fair = !raw.queue.is_empty() || !raw.deadlines.is_empty();
    let mut info = LockInfo {
        name: name.to_owned(),
        locked: false,
        kind: if fair {
            Kind::Fair
        } else if token.is_some() {
            Kind::Fenced
        } else {
            Kind::Lock
        },
        mode: None,
        ttl: None,
        holders: Vec::new(),
        queue,
        subscribers: 0,
        token,
    };
    match raw.key_type.as_str() {
        "none" => return Ok(info),
        "hash" => {}
        "string" => return Err("a Redis string, not a lock"),
        "list" => return Err("a Redis list, not a lock"),
        "set" => return Err("a Redis set, not a lock"),
        "zset" => return Err("a Redis sorted set, not a lock"),
        "stream" => return Err("a Redis stream, not a lock"),
        _ => return Err("a Redis value that is not a lock"),
    }
    const NOT_HOLDERS: &str = "a Redis hash whose fields are not lock holders";
    let mut mode = None;
    for (field, value) in pairs(&raw.fields) {
        let field = std::str::from_utf8(field).map_err(|_| NOT_HOLDERS)?;
        let value = std::str::from_utf8(value).map_err(|_| NOT_HOLDERS)?;
        if field == "mode" {
            mode = Some(match value {
                "read" => Mode::Read,
                "write" => Mode::Write,
                _ => return Err("a Redis hash with an unknown lock mode"),
            });
            continue;
        }
        let count = value.parse::<u64>().map_err(|_| NOT_HOLDERS)?;
        let (id, write) = match field.strip_suffix(WRITE_SUFFIX) {
            Some(id) => (id, true),
            None => (field, false),
        };
        let (client, thread) = holder_id(id).ok_or(NOT_HOLDERS)?;
        info.holders.push(Holder {
            client,
            thread,
            owner: is_owner_id(thread),
            count,
            write,
            identity: None,
        });
    }
    if mode.is_none() && info.holders.iter().any(|h| h.write) {
        return Err(NOT_HOLDERS);
    }
    info.locked = true;
    info.mode = mode;
    if mode.is_some() {
        info.kind = Kind::ReadWrite;
    }
    info.ttl = u64::try_from(raw.pttl).ok().map(Duration::from_millis);
    Ok(info)
}

/// Splits a holder field `<client-uuid>:<thread-id>`.
fn holder_id(id: &str) -> Option<(Uuid, u64)> {
    let (client, thread) = id.rsplit_once(':')?;
    // Only the canonical form: 36 characters with hyphens.
    if client.len() != 36 || thread.is_empty() || !thread.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((Uuid::try_parse(client).ok()?, thread.parse().ok()?))
}

/// Alternating elements as pairs.
fn pairs(flat: &[Vec<u8>]) -> Vec<(&[u8], &[u8])> {
    flat.chunks_exact(2)
        .map(|pair| (pair[0].as_slice(), pair[1].as_slice()))
        .collect()
}

/// The channels a lock's waiters listen on, by its kind.
fn channels(info: &LockInfo) -> Vec<String> {
    let plain = names::lock_channel(&info.name);
    match info.kind {
        Kind::ReadWrite => vec![names::prefixed(RW_CHANNEL_PREFIX, &info.name)],
        Kind::Fair => {
            let mut channels: Vec<String> = info
                .queue
                .iter()
                .map(|waiter| format!("{plain}:{}", waiter.field))
                .collect();
            // Plain lockers of the same name wait on the plain channel.
            channels.push(plain);
            channels
        }
        Kind::Lock | Kind::Fenced => vec![plain],
    }
}

/// How many connections listen on the lock's channels: `PUBSUB NUMSUB`, or
/// `PUBSUB SHARDNUMSUB` with sharded pub/sub. On a cluster the command goes
/// to every node and the counts are added up (classic subscribers are
/// spread over the nodes; sharded ones are all on the slot's owner).
pub(super) fn subscribers(server: &Server, info: &LockInfo) -> Result<u64> {
    let sub = if server.subscribe_commands().0 == b"SSUBSCRIBE" {
        "SHARDNUMSUB"
    } else {
        "NUMSUB"
    };
    let channels = channels(info);
    let reply: Value =
        server.run(|conn| redis::cmd("PUBSUB").arg(sub).arg(&channels).query(conn))?;
    Ok(count_subscribers(&reply))
}

/// Adds up the counts of a `NUMSUB` reply: channel, count pairs (an array
/// from one server, a map from the cluster client).
fn count_subscribers(reply: &Value) -> u64 {
    let count = |v: &Value| match v {
        Value::Int(n) => u64::try_from(*n).unwrap_or(0),
        _ => 0,
    };
    match reply {
        Value::Array(items) => items.chunks_exact(2).map(|pair| count(&pair[1])).sum(),
        Value::Map(pairs) => pairs.iter().map(|(_, v)| count(v)).sum(),
        _ => 0,
    }
}

/// Publishes "1" on a read-write lock's channel: every waiter, in every
/// process, looks again.
pub(super) fn wake_all(server: &Server, name: &str) -> Result<()> {
    let channel = names::prefixed(RW_CHANNEL_PREFIX, name);
    for command in server.publish_commands() {
        let _: i64 = server.run(|conn| redis::cmd(command).arg(&channel).arg("1").query(conn))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "0f0e0d0c-0b0a-4988-8776-655443322110";
    const B: &str = "11111111-2222-4333-8444-555555555555";

    fn bytes(items: &[&str]) -> Vec<Vec<u8>> {
        items.iter().map(|s| s.as_bytes().to_vec()).collect()
    }

    fn hash(fields: &[&str]) -> Raw {
        Raw {
            key_type: "hash".into(),
            fields: bytes(fields),
            pttl: 1500,
            ..Raw::default()
        }
    }

    #[test]
    fn a_plain_lock_has_holders_and_a_ttl() {
        let info = interpret("x", hash(&[&format!("{A}:7"), "2"])).unwrap();
        assert!(info.locked);
        assert_eq!(info.kind, Kind::Lock);
        assert_eq!(info.mode, None);
        assert_eq!(info.ttl, Some(Duration::from_millis(1500)));
        assert_eq!(info.holders.len(), 1);
        assert_eq!(info.holders[0].id(), format!("{A}:7"));
        assert_eq!(info.holders[0].count, 2);
        assert!(!info.holders[0].write);
        assert!(!info.holders[0].owner);
    }

    #[test]
    fn an_owners_hold_is_labelled_as_such() {
        let owner = crate::Owner::new();
        let info = interpret("x", hash(&[&format!("{A}:{}", owner.id()), "1"])).unwrap();
        assert!(info.holders[0].owner);
        assert_eq!(info.holders[0].thread, owner.id());
    }

    #[test]
    fn a_mode_field_makes_a_read_write_lock() {
        let fields = [
            "mode",
            "write",
            &format!("{A}:1:write"),
            "1",
            &format!("{A}:1"),
            "2",
        ];
        let info = interpret("x", hash(&fields)).unwrap();
        assert_eq!(info.kind, Kind::ReadWrite);
        assert_eq!(info.mode, Some(Mode::Write));
        assert!(info.holders[0].write);
        assert!(!info.holders[1].write);
    }

    #[test]
    fn a_queue_makes_a_fair_lock_even_without_holders() {
        let raw = Raw {
            key_type: "none".into(),
            pttl: -2,
            queue: bytes(&[&format!("{B}:3"), &format!("{A}:4")]),
            deadlines: bytes(&[&format!("{B}:3"), "1000", &format!("{A}:4"), "2000"]),
            ..Raw::default()
        };
        let info = interpret("x", raw).unwrap();
        assert_eq!(info.kind, Kind::Fair);
        assert!(!info.locked);
        assert!(!info.is_vacant());
        assert_eq!(info.ttl, None);
        assert_eq!(info.queue[1].field, format!("{A}:4"));
        assert_eq!(
            info.queue[1].deadline,
            Some(UNIX_EPOCH + Duration::from_millis(2000))
        );
    }

    #[test]
    fn a_token_counter_makes_a_fenced_lock() {
        let mut raw = hash(&[&format!("{A}:1"), "1"]);
        raw.token = Some(b"42".to_vec());
        let info = interpret("x", raw).unwrap();
        assert_eq!(info.kind, Kind::Fenced);
        assert_eq!(info.token, Some(42));
    }

    #[test]
    fn nothing_at_all_is_a_free_lock() {
        let raw = Raw {
            key_type: "none".into(),
            pttl: -2,
            ..Raw::default()
        };
        let info = interpret("x", raw).unwrap();
        assert!(info.is_vacant());
        assert_eq!(info.kind, Kind::Lock);
    }

    #[test]
    fn other_values_are_not_locks() {
        assert!(interpret("x", hash(&["name", "Ada"])).is_err());
        assert!(interpret("x", hash(&[&format!("{A}:1"), "many"])).is_err());
        assert!(interpret("x", hash(&[&format!("{A}:1:write"), "1"])).is_err());
        assert!(interpret("x", hash(&["mode", "sideways"])).is_err());
        assert!(interpret("x", hash(&["nouuid:1", "1"])).is_err());
        let string = Raw {
            key_type: "string".into(),
            ..Raw::default()
        };
        assert!(interpret("x", string).is_err());
    }

    #[test]
    fn subscriber_counts_are_added_up() {
        let array = Value::Array(vec![
            Value::BulkString(b"a".to_vec()),
            Value::Int(2),
            Value::BulkString(b"b".to_vec()),
            Value::Int(1),
        ]);
        assert_eq!(count_subscribers(&array), 3);
        let map = Value::Map(vec![(Value::BulkString(b"a".to_vec()), Value::Int(4))]);
        assert_eq!(count_subscribers(&map), 4);
    }

    #[test]
    fn fair_waiters_listen_on_their_own_channels() {
        let raw = Raw {
            key_type: "none".into(),
            queue: bytes(&[&format!("{A}:4")]),
            ..Raw::default()
        };
        let info = interpret("{t}x", raw).unwrap();
        assert_eq!(
            channels(&info),
            [
                format!("redisson_lock__channel:{{t}}x:{A}:4"),
                "redisson_lock__channel:{t}x".to_owned()
            ]
        );
    }
}
