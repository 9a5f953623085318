//! The watchdog: it keeps a lock taken without a lease alive past the
//! watchdog timeout, stops renewing once the lock is released, and reports a
//! lock deleted under it (guard, release error, `on_lock_lost` callback),
//! even while an earlier `on_lock_lost` callback is still blocked, and a
//! read hold whose own key is gone.
//!
//! Every client here uses a 1 s watchdog timeout, renewed every ~333 ms.

mod bounded;
mod support;

use std::collections::HashMap;
use std::sync::{mpsc, Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use redhold::{Error, LossCause};
use support::RedisServer;

const TIMEOUT: Duration = Duration::from_secs(1);

fn pttl(server: &RedisServer, name: &str) -> i64 {
    server.cmd(&["PTTL", name])
}

fn only_field(server: &RedisServer, name: &str) -> String {
    let all: HashMap<String, String> = server.cmd(&["HGETALL", name]);
    assert_eq!(all.len(), 1, "one holder expected: {all:?}");
    all.into_keys().next().expect("one field")
}

#[test]
fn watchdog_keeps_the_lock_alive_past_its_timeout() {
    let server = RedisServer::start();
    let client = server.client_with_watchdog(TIMEOUT);
    assert_eq!(client.watchdog_timeout(), TIMEOUT);
    let lock = client.lock("watched");

    let guard = lock.lock().unwrap();
    let ttl = pttl(&server, "watched");
    assert!(ttl > 0 && ttl <= 1000, "PTTL {ttl} under a 1 s watchdog");

    // Three times the timeout: without renewal the key would be long gone.
    let until = Instant::now() + 3 * TIMEOUT;
    while Instant::now() < until {
        let ttl = pttl(&server, "watched");
        assert!(ttl > 0, "PTTL {ttl}: the watchdog let the lock lapse");
        assert!(ttl <= 1000, "PTTL {ttl}: renewed beyond the timeout");
        assert!(guard.is_held());
        thread::sleep(Duration::from_millis(100));
    }
    assert!(lock.is_held_by_current_thread().unwrap());
    guard.unlock().expect("still ours after 3 s");
    assert_eq!(pttl(&server, "watched"), -2, "released lock is deleted");
}

#[test]
fn watchdog_stops_renewing_after_release() {
    let server = RedisServer::start();
    let client = server.client_with_watchdog(TIMEOUT);
    let lock = client.lock("released");

    let guard = lock.lock().unwrap();
    let field = only_field(&server, "released");
    guard.unlock().unwrap();
    assert_eq!(pttl(&server, "released"), -2);

    // Put back a hold under our field, with a long TTL, behind redhold's
    // back. A watchdog still renewing "released" would cut its TTL to 1 s.
    server.cmd::<()>(&["HSET", "released", &field, "1"]);
    server.cmd::<()>(&["PEXPIRE", "released", "60000"]);
    thread::sleep(TIMEOUT + TIMEOUT / 2);
    let ttl = pttl(&server, "released");
    assert!(
        ttl > 50_000,
        "PTTL {ttl}: the watchdog still renews a released lock"
    );
}

#[test]
fn partial_release_keeps_renewing_full_release_stops() {
    let server = RedisServer::start();
    let client = server.client_with_watchdog(TIMEOUT);
    let lock = client.lock("nested");

    let outer = lock.lock().unwrap();
    let inner = lock.lock().unwrap();
    inner.unlock().unwrap();
    thread::sleep(TIMEOUT + TIMEOUT / 2);
    assert!(
        pttl(&server, "nested") > 0,
        "one hold is left: the watchdog must keep renewing"
    );
    assert_eq!(lock.hold_count().unwrap(), 1);
    outer.unlock().unwrap();
    assert_eq!(pttl(&server, "nested"), -2);
}

#[test]
fn deleted_lock_is_reported_lost_once() {
    let server = RedisServer::start();
    let lost: Arc<Mutex<Vec<String>>> = Arc::default();
    let client = {
        let lost = Arc::clone(&lost);
        server
            .builder()
            .watchdog_timeout(TIMEOUT)
            .on_lock_lost(move |name| lost.lock().unwrap().push(name.to_owned()))
            .build()
            .unwrap()
    };
    let lock = client.lock("doomed");
    let guard = lock.lock().unwrap();
    let mut raw = server.connection();
    redis::cmd("DEL")
        .arg("doomed")
        .query::<()>(&mut raw)
        .unwrap();

    bounded::wait_until(Duration::from_secs(3), || !lost.lock().unwrap().is_empty())
        .expect("on_lock_lost called within ~3 watchdog periods");
    assert!(!guard.is_held(), "the guard sees the loss");
    // Give the watchdog a few more passes: the loss is reported once.
    thread::sleep(TIMEOUT);
    assert_eq!(*lost.lock().unwrap(), vec!["doomed".to_owned()]);

    match guard.unlock() {
        Err(Error::LockLost { lock, cause, .. }) => {
            assert_eq!(lock, "doomed");
            assert_eq!(cause, LossCause::Vanished, "deleted, nobody took it");
        }
        other => panic!("release of a deleted lock: expected LockLost, got {other:?}"),
    }
    assert_eq!(lost.lock().unwrap().len(), 1);
}

#[test]
fn lost_lock_taken_by_another_holder_is_not_renewed_for_them() {
    let server = RedisServer::start();
    let client = server.client_with_watchdog(TIMEOUT);
    let ours = client.lock("taken-over");
    let guard = ours.lock().unwrap();

    // Delete it and let another client take it with a long lease at once.
    server.cmd::<()>(&["DEL", "taken-over"]);
    let theirs = server.client().lock("taken-over");
    let their_guard = theirs.lock_with_lease(Duration::from_secs(60)).unwrap();

    bounded::wait_until(Duration::from_secs(3), || !guard.is_held())
        .expect("the watchdog notices that the lock is no longer ours");
    let ttl = pttl(&server, "taken-over");
    assert!(
        ttl > 50_000,
        "PTTL {ttl}: our watchdog touched the new holder's lease"
    );
    assert!(matches!(
        guard.unlock(),
        Err(Error::LockLost {
            cause: LossCause::TakenOver,
            ..
        })
    ));
    assert_eq!(theirs.hold_count().unwrap(), 1, "their hold is untouched");
    their_guard.unlock().unwrap();
}

#[test]
fn hundreds_of_held_locks_are_all_renewed() {
    // More locks than one renewal batch holds.
    const LOCKS: usize = 250;
    let server = RedisServer::start();
    let client = server.client_with_watchdog(TIMEOUT);
    let guards: Vec<_> = (0..LOCKS)
        .map(|i| client.lock(format!("many:{i}")).lock().unwrap())
        .collect();
    thread::sleep(TIMEOUT + TIMEOUT / 2);
    let mut raw = server.connection();
    for i in 0..LOCKS {
        let ttl: i64 = redis::cmd("PTTL")
            .arg(format!("many:{i}"))
            .query(&mut raw)
            .unwrap();
        assert!(ttl > 0, "many:{i} lapsed (PTTL {ttl})");
    }
    assert!(guards.iter().all(|g| g.is_held()));
    for guard in guards {
        guard.unlock().unwrap();
    }
    let left: Vec<String> = server.cmd(&["KEYS", "many:*"]);
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn a_blocked_on_lock_lost_callback_delays_neither_renewals_nor_shutdown() {
    let server = RedisServer::start();
    let (lost_tx, lost_rx) = mpsc::channel::<String>();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let release_rx = Mutex::new(release_rx);
    let client = server
        .builder()
        .watchdog_timeout(TIMEOUT)
        .on_lock_lost(move |name| {
            let _ = lost_tx.send(name.to_owned());
            // Blocks for 10 s, or until the test lets it go.
            let _ = release_rx
                .lock()
                .unwrap()
                .recv_timeout(Duration::from_secs(10));
        })
        .build()
        .unwrap();
    let _doomed = client.lock("doomed").lock().unwrap();
    let kept = client.lock("kept").lock().unwrap();
    server.cmd::<i64>(&["DEL", "doomed"]);
    let name = lost_rx
        .recv_timeout(Duration::from_secs(5))
        .expect("on_lock_lost called within a few watchdog periods");
    assert_eq!(name, "doomed");

    // Three times the timeout while the callback blocks: the other lock is
    // still renewed.
    thread::sleep(3 * TIMEOUT);
    assert!(
        pttl(&server, "kept") > 0,
        "the lock expired while a callback blocked"
    );
    assert!(kept.is_held());

    // Shutdown does not wait for the callback (7 s more) either.
    let closer = {
        let client = client.clone();
        bounded::spawn("shutdown", move || client.shutdown())
    };
    closer
        .join_within(Duration::from_secs(5))
        .expect("shutdown while a callback blocks");
    drop(release_tx);
}

/// A client whose `on_lock_lost` names go into the returned list.
fn client_reporting_losses(server: &RedisServer) -> (redhold::Client, Arc<Mutex<Vec<String>>>) {
    let lost: Arc<Mutex<Vec<String>>> = Arc::default();
    let client = {
        let lost = Arc::clone(&lost);
        server
            .builder()
            .watchdog_timeout(TIMEOUT)
            .on_lock_lost(move |name| lost.lock().unwrap().push(name.to_owned()))
            .build()
            .unwrap()
    };
    (client, lost)
}

/// The only holder field of `client` in the hash of `name`.
#[track_caller]
fn only_field_of(server: &RedisServer, name: &str, client: &redhold::Client) -> String {
    let prefix = format!("{}:", client.id());
    let all: HashMap<String, String> = server.cmd(&["HGETALL", name]);
    let fields: Vec<String> = all.into_keys().filter(|f| f.starts_with(&prefix)).collect();
    assert_eq!(fields.len(), 1, "one field of {}: {fields:?}", client.id());
    fields.into_iter().next().expect("one field")
}

/// The key that keeps read hold `k` of `field` alive.
fn hold_key(name: &str, field: &str, k: u32) -> String {
    format!("{{{name}}}:{field}:rwlock_timeout:{k}")
}

/// Issue 40, hole 5: a read hold lives in its own key; the hash field
/// alone keeps nothing (the next release of another reader deletes the
/// hash when no key of the holder is left, and a writer gets in). A
/// watched read hold whose key is gone (it expired while its client was
/// paused; here a side connection deletes it) must be reported lost at the
/// next renewal, as a plain lock whose hash is gone is, not renewed.
#[test]
fn a_read_hold_whose_key_is_gone_is_reported_lost_at_the_next_renewal() {
    let server = RedisServer::start();
    let (b, lost) = client_reporting_losses(&server);
    let a = server.client();
    let name = "rw:keyless";
    let guard = b.read_write_lock(name).read().lock().unwrap();
    // Another reader with a long lease keeps the hash (and B's field) alive.
    let other = a
        .read_write_lock(name)
        .read()
        .lock_with_lease(Duration::from_secs(60))
        .unwrap();
    let field = only_field_of(&server, name, &b);
    let key = hold_key(name, &field, 1);
    let deleted: i64 = server.cmd(&["DEL", &key]);
    assert_eq!(deleted, 1, "{key} was there to delete");

    let reported = bounded::wait_until(3 * TIMEOUT, || !lost.lock().unwrap().is_empty());
    assert!(
        reported.is_some(),
        "B's read hold of {name}, whose key {key} is gone, was not reported lost within {:?} \
         ({} renewal passes; the hash still has B's field: {:?})",
        3 * TIMEOUT,
        b.stats().renewal_passes,
        server.cmd::<HashMap<String, String>>(&["HGETALL", name]),
    );
    assert_eq!(*lost.lock().unwrap(), vec![name.to_owned()]);
    assert!(!guard.is_held(), "the guard sees the loss");
    // Why it is lost: A's release leaves no hold key, deletes the hash, and
    // a writer gets in while B's field was still there.
    other.unlock().unwrap();
    let writer = a.read_write_lock(name).write().try_lock().unwrap();
    assert!(writer.is_some(), "A's release left {name} to a writer");
    assert!(matches!(guard.unlock(), Err(Error::LockLost { .. })));
}

/// The other side of hole 5's rule: a watched read hold whose key is still
/// there is not lost because a leased hold of the same thread ran out (its
/// key expired, the field still counts it): the hash lives as long as the
/// watched hold's key, which the watchdog renews.
#[test]
fn a_watched_read_hold_outlives_a_leased_one_of_the_same_thread() {
    let server = RedisServer::start();
    let (client, lost) = client_reporting_losses(&server);
    let name = "rw:mixed";
    let lock = client.read_write_lock(name).read();
    let watched = lock.lock().unwrap();
    let leased = lock.lock_with_lease(Duration::from_millis(200)).unwrap();
    let field = only_field_of(&server, name, &client);
    let passes = client.stats().renewal_passes;
    // The leased hold's key expires; the watchdog renews the watched one.
    let gone = bounded::wait_until(3 * TIMEOUT, || {
        pttl(&server, &hold_key(name, &field, 2)) == -2
            && client.stats().renewal_passes >= passes + 3
    });
    assert!(gone.is_some(), "the leased hold's key did not expire");
    assert!(
        lost.lock().unwrap().is_empty(),
        "the watched read hold was reported lost: {:?}",
        lost.lock().unwrap()
    );
    assert!(watched.is_held());
    assert!(pttl(&server, &hold_key(name, &field, 1)) > 0);
    let _ = leased.unlock();
    watched
        .unlock()
        .expect("the watched read hold is still ours");
    assert!(!server.exists(name));
}
