//! Redisson wire compatibility (`docs/wire-format.md`, plain lock): the key
//! layout, the wake-up channel and its messages, and a Redisson client
//! simulated with Redisson's own acquire and release scripts on a raw
//! connection, sharing locks with redhold in both directions.

mod bounded;
mod support;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use redis::{PubSub, Script};
use support::RedisServer;

/// Generous bound for anything that should take milliseconds; holders keep
/// 30 s TTLs, so a waiter returning before this was woken by a message.
const PROMPTLY: Duration = Duration::from_secs(5);

/// The holder field of an imaginary Redisson client's thread 1.
const JAVA_FIELD: &str = "6c8a1c8e-2f5b-4a11-9d3e-0a7c5b2e4f10:1";

/// `RedissonLock.tryLockInnerAsync`, as Redisson 3.x sends it.
const REDISSON_ACQUIRE: &str = "\
if ((redis.call('exists', KEYS[1]) == 0) or (redis.call('hexists', KEYS[1], ARGV[2]) == 1)) then \
    redis.call('hincrby', KEYS[1], ARGV[2], 1); \
    redis.call('pexpire', KEYS[1], ARGV[1]); \
    return nil; \
end; \
return redis.call('pttl', KEYS[1]);";

/// `RedissonLock.unlockInnerAsync`, as Redisson 3.x sends it.
const REDISSON_RELEASE: &str = "\
if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then \
    return nil; \
end; \
local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); \
if (counter > 0) then \
    redis.call('pexpire', KEYS[1], ARGV[2]); \
    return 0; \
else \
    redis.call('del', KEYS[1]); \
    redis.call('publish', KEYS[2], ARGV[1]); \
    return 1; \
end; \
return nil;";

/// A Redisson client's view of the lock `name`, on its own raw connection.
struct Java {
    con: redis::Connection,
    name: String,
    channel: String,
}

impl Java {
    fn new(server: &RedisServer, name: &str, channel: &str) -> Java {
        Java {
            con: server.connection(),
            name: name.to_owned(),
            channel: channel.to_owned(),
        }
    }

    /// `None` when acquired, else the holder's PTTL.
    fn try_acquire(&mut self) -> Option<i64> {
        Script::new(REDISSON_ACQUIRE)
            .key(&self.name)
            .arg(30_000)
            .arg(JAVA_FIELD)
            .invoke(&mut self.con)
            .expect("Redisson acquire script")
    }

    fn release(&mut self) -> Option<i64> {
        Script::new(REDISSON_RELEASE)
            .key(&self.name)
            .key(&self.channel)
            .arg("0")
            .arg(30_000)
            .arg(JAVA_FIELD)
            .invoke(&mut self.con)
            .expect("Redisson release script")
    }

    fn publish(&mut self, payload: &str) {
        redis::cmd("PUBLISH")
            .arg(&self.channel)
            .arg(payload)
            .query::<()>(&mut self.con)
            .expect("PUBLISH");
    }
}

/// The next message on `pubsub` within `limit`, as (channel, payload).
fn next_message(pubsub: &mut PubSub<'_>, limit: Duration) -> Option<(String, String)> {
    pubsub.set_read_timeout(Some(limit)).expect("read timeout");
    match pubsub.get_message() {
        Ok(msg) => Some((
            msg.get_channel_name().to_owned(),
            msg.get_payload().expect("text payload"),
        )),
        Err(e) if e.is_timeout() => None,
        Err(e) => panic!("reading pub/sub: {e}"),
    }
}

#[test]
fn lock_is_a_hash_of_holder_fields_with_a_ttl() {
    let server = RedisServer::start();
    let client = server.client();
    let lock = client.lock("orders:42");
    let guard = lock.lock().unwrap();

    assert_eq!(server.cmd::<String>(&["TYPE", "orders:42"]), "hash");
    let fields: HashMap<String, String> = server.cmd(&["HGETALL", "orders:42"]);
    assert_eq!(fields.len(), 1, "{fields:?}");
    let (field, count) = fields.into_iter().next().expect("one field");
    assert_eq!(count, "1");
    let (uuid, thread_no) = field.rsplit_once(':').expect("<uuid>:<thread-id>");
    assert_eq!(uuid, client.id().hyphenated().to_string());
    assert_eq!(uuid, uuid.to_lowercase(), "lowercase UUID");
    assert_eq!(uuid.len(), 36, "hyphenated UUID: {uuid}");
    assert!(
        !thread_no.is_empty() && thread_no.bytes().all(|b| b.is_ascii_digit()),
        "decimal thread id: {thread_no:?}"
    );
    let ttl: i64 = server.cmd(&["PTTL", "orders:42"]);
    assert!(
        ttl > 0 && ttl <= 30_000,
        "PTTL {ttl} under the default watchdog"
    );
    drop(guard);

    let guard = lock.lock_with_lease(Duration::from_millis(7_000)).unwrap();
    let ttl: i64 = server.cmd(&["PTTL", "orders:42"]);
    assert!(ttl > 0 && ttl <= 7_000, "PTTL {ttl} for a 7 s lease");
    drop(guard);

    // No key redhold leaves behind lives forever (release latches included).
    for key in server.cmd::<Vec<String>>(&["KEYS", "*"]) {
        let ttl: i64 = server.cmd(&["PTTL", &key]);
        assert!(ttl > 0, "key {key:?} has PTTL {ttl}");
    }
}

#[test]
fn full_release_publishes_zero_on_the_lock_channel() {
    let server = RedisServer::start();
    let client = server.client();
    let lock = client.lock("orders:42");
    let mut raw = server.connection();
    let mut pubsub = raw.as_pubsub();
    pubsub
        .subscribe("redisson_lock__channel:{orders:42}")
        .expect("SUBSCRIBE");

    let outer = lock.lock().unwrap();
    let inner = lock.lock().unwrap();
    inner.unlock().unwrap();
    assert_eq!(
        next_message(&mut pubsub, Duration::from_millis(300)),
        None,
        "a partial release announces nothing"
    );
    outer.unlock().unwrap();
    assert_eq!(
        next_message(&mut pubsub, PROMPTLY),
        Some(("redisson_lock__channel:{orders:42}".into(), "0".into()))
    );

    let _held = lock.lock().unwrap();
    assert!(server.client().lock("orders:42").force_unlock().unwrap());
    assert_eq!(
        next_message(&mut pubsub, PROMPTLY),
        Some(("redisson_lock__channel:{orders:42}".into(), "0".into())),
        "force_unlock announces the release too"
    );
}

#[test]
fn hash_tagged_name_keeps_its_tag_in_the_channel() {
    let server = RedisServer::start();
    let client = server.client();
    let mut raw = server.connection();
    let mut pubsub = raw.as_pubsub();
    pubsub
        .subscribe("redisson_lock__channel:{orders}:42")
        .expect("SUBSCRIBE");

    let guard = client.lock("{orders}:42").lock().unwrap();
    assert_eq!(server.cmd::<String>(&["TYPE", "{orders}:42"]), "hash");
    drop(guard);
    assert_eq!(
        next_message(&mut pubsub, PROMPTLY),
        Some(("redisson_lock__channel:{orders}:42".into(), "0".into()))
    );
}

#[test]
fn redisson_holder_excludes_redhold_and_its_release_wakes_it() {
    let server = RedisServer::start();
    let mut java = Java::new(&server, "shared", "redisson_lock__channel:{shared}");
    let lock = server.client().lock("shared");

    assert_eq!(java.try_acquire(), None, "Redisson takes the free lock");
    assert!(lock.try_lock().unwrap().is_none(), "redhold is excluded");
    assert!(lock.is_locked().unwrap());
    assert!(lock.remaining_lease().unwrap().is_some());

    let waiter_lock = lock.clone();
    let waiter = bounded::spawn("waiter", move || {
        let guard = waiter_lock.lock().expect("lock after Redisson's release");
        let acquired = Instant::now();
        guard.unlock().expect("release");
        acquired
    });
    waiter.assert_running_for(Duration::from_millis(300));
    let released = Instant::now();
    assert_eq!(java.release(), Some(1), "Redisson's full release");
    let acquired = waiter.join_within(PROMPTLY);
    assert!(acquired.saturating_duration_since(released) < PROMPTLY);
}

#[test]
fn redhold_holder_excludes_redisson_and_releases_for_it() {
    let server = RedisServer::start();
    let mut java = Java::new(&server, "shared", "redisson_lock__channel:{shared}");
    let lock = server.client().lock("shared");
    let mut raw = server.connection();
    let mut pubsub = raw.as_pubsub();
    pubsub
        .subscribe("redisson_lock__channel:{shared}")
        .expect("SUBSCRIBE");

    let guard = lock.lock().unwrap();
    let ttl = java.try_acquire().expect("Redisson is excluded");
    assert!(ttl > 0, "Redisson sees the holder's PTTL, got {ttl}");
    assert_eq!(java.release(), None, "Redisson holds nothing to release");
    assert!(lock.is_held_by_current_thread().unwrap());

    drop(guard);
    // What a waiting Redisson client hears, then takes.
    assert_eq!(
        next_message(&mut pubsub, PROMPTLY).map(|(_, payload)| payload),
        Some("0".to_owned())
    );
    assert_eq!(java.try_acquire(), None, "Redisson takes it after redhold");
    assert_eq!(java.release(), Some(1));
}

#[test]
fn unknown_payloads_are_ignored_and_wake_all_wakes() {
    let server = RedisServer::start();
    let mut java = Java::new(&server, "noisy", "redisson_lock__channel:{noisy}");
    let lock = server.client().lock("noisy");
    assert_eq!(java.try_acquire(), None);

    let waiter_lock = lock.clone();
    let waiter = bounded::spawn("waiter", move || {
        let guard = waiter_lock.lock().expect("lock");
        let acquired = Instant::now();
        guard.unlock().expect("release");
        acquired
    });
    waiter.assert_running_for(Duration::from_millis(300));
    for junk in ["garbage", "", "2", "00"] {
        java.publish(junk);
    }
    waiter.assert_running_for(Duration::from_millis(300));

    // Gone without an announcement, then "1" (wake every waiter), as a
    // read-write lock's write release sends it.
    server.cmd::<()>(&["DEL", "noisy"]);
    waiter.assert_running_for(Duration::from_millis(200));
    let announced = Instant::now();
    java.publish("1");
    let acquired = waiter.join_within(PROMPTLY);
    assert!(acquired.saturating_duration_since(announced) < PROMPTLY);
}
