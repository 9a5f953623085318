//! Issue 40, hole 2: a lock key without expiry (PTTL -1, as a foreign
//! client or a user's `PERSIST` can leave it) lives longer than any lease,
//! and the scripts compare with it as such. A re-entry, a second reader
//! and a renewal leave it without expiry: giving it a TTL would end it
//! sooner than its waiters, parked on "no expiry", were told, and nothing
//! would tell them. A read release neither cuts a read hold without expiry
//! short nor frees the lock of a reader whose hold has none.
//!
//! The releases that do give such a lock a TTL (a hand-over, a read release
//! down to holds with one) announce it: `handover_short_lease.rs` and
//! `read_write_lock.rs` test that.

mod bounded;
mod support;

use std::time::Duration;

use support::RedisServer;

/// A lease far longer than any of these tests.
const LEASE: Duration = Duration::from_secs(60);

fn pttl(server: &RedisServer, key: &str) -> i64 {
    server.cmd(&["PTTL", key])
}

/// Takes `key`'s TTL away, as a foreign client's key never had one.
#[track_caller]
fn persist(server: &RedisServer, key: &str) {
    let persisted: i64 = server.cmd(&["PERSIST", key]);
    assert_eq!(persisted, 1, "{key} had a TTL to remove");
}

/// Every read-hold key of lock `name`, sorted.
fn hold_keys(server: &RedisServer, name: &str) -> Vec<String> {
    let mut keys: Vec<String> = server.cmd(&["KEYS", &format!("{{{name}}}:*:rwlock_timeout:*")]);
    keys.sort();
    keys
}

#[test]
fn a_re_entry_leaves_a_lock_without_expiry_without_one() {
    let server = RedisServer::start();
    let client = server.client();
    let mut gave_a_ttl = Vec::new();

    let lock = client.lock("plain");
    let outer = lock.lock_with_lease(LEASE).expect("plain lock");
    persist(&server, "plain");
    let inner = lock.lock_with_lease(LEASE).expect("plain re-entry");
    gave_a_ttl.push(("plain", pttl(&server, "plain")));
    drop((inner, outer));

    let lock = client.fenced_lock("fenced");
    let outer = lock.lock_with_lease(LEASE).expect("fenced lock");
    persist(&server, "fenced");
    let inner = lock.lock_with_lease(LEASE).expect("fenced re-entry");
    gave_a_ttl.push(("fenced", pttl(&server, "fenced")));
    drop((inner, outer));

    let lock = client.fair_lock("fair");
    let outer = lock.lock_with_lease(LEASE).expect("fair lock");
    persist(&server, "fair");
    let inner = lock.lock_with_lease(LEASE).expect("fair re-entry");
    gave_a_ttl.push(("fair", pttl(&server, "fair")));
    drop((inner, outer));

    let lock = client.read_write_lock("rw").write();
    let outer = lock.lock_with_lease(LEASE).expect("write lock");
    persist(&server, "rw");
    let inner = lock.lock_with_lease(LEASE).expect("write re-entry");
    gave_a_ttl.push(("write", pttl(&server, "rw")));
    drop((inner, outer));

    gave_a_ttl.retain(|&(_, ttl)| ttl != -1);
    assert!(
        gave_a_ttl.is_empty(),
        "a re-entry gave a lock without expiry a TTL (kind, PTTL after): {gave_a_ttl:?}"
    );
}

#[test]
fn a_second_reader_leaves_a_hash_without_expiry_without_one() {
    let server = RedisServer::start();
    let (a, b) = (server.client(), server.client());
    let first = a
        .read_write_lock("rw")
        .read()
        .lock_with_lease(LEASE)
        .expect("A's read lock");
    persist(&server, "rw");
    let second = b
        .read_write_lock("rw")
        .read()
        .lock_with_lease(Duration::from_secs(1))
        .expect("B's read lock");
    assert_eq!(
        pttl(&server, "rw"),
        -1,
        "a second reader gave a hash without expiry a TTL"
    );
    drop((first, second));
}

#[test]
fn a_renewal_leaves_a_lock_without_expiry_without_one() {
    /// Renewed every ~333 ms.
    const WATCHDOG: Duration = Duration::from_secs(1);
    let server = RedisServer::start();
    let client = server.client_with_watchdog(WATCHDOG);
    let plain = client.lock("plain").lock().expect("plain lock");
    let read = client
        .read_write_lock("rw")
        .read()
        .lock()
        .expect("read lock");
    let holds = hold_keys(&server, "rw");
    assert_eq!(holds.len(), 1, "one read-hold key: {holds:?}");
    persist(&server, "plain");
    persist(&server, "rw");
    persist(&server, &holds[0]);
    // Two passes that began after the PERSIST.
    let passes = client.stats().renewal_passes;
    let renewed = bounded::wait_until(5 * WATCHDOG, || client.stats().renewal_passes >= passes + 2);
    assert!(renewed.is_some(), "no renewal pass: {:?}", client.stats());
    let ttls = [
        ("plain", pttl(&server, "plain")),
        ("rw", pttl(&server, "rw")),
        (holds[0].as_str(), pttl(&server, &holds[0])),
    ];
    assert!(
        ttls.iter().all(|&(_, ttl)| ttl == -1),
        "a renewal gave keys without expiry a TTL (key, PTTL after): {ttls:?}"
    );
    assert!(plain.is_held() && read.is_held());
    drop((plain, read));
}

#[test]
fn a_read_release_keeps_a_read_hold_without_expiry() {
    let server = RedisServer::start();
    let client = server.client();
    let lock = client.read_write_lock("rw").read();
    let first = lock.lock_with_lease(LEASE).expect("read lock");
    let second = lock.lock_with_lease(LEASE).expect("read re-entry");
    let holds = hold_keys(&server, "rw");
    assert_eq!(holds.len(), 2, "two read-hold keys: {holds:?}");
    let (one, two) = (&holds[0], &holds[1]);
    assert!(one.ends_with(":1") && two.ends_with(":2"), "{holds:?}");
    persist(&server, one);
    // Which hold a release ends is unknown: the one that ends soonest goes.
    drop(second);
    assert_eq!(
        (pttl(&server, one), pttl(&server, two)),
        (-1, -2),
        "a read release cut the hold without expiry ({one}) short, or kept the other ({two})"
    );
    first
        .unlock()
        .expect("the hold without expiry is still there");
}

#[test]
fn a_read_release_keeps_the_lock_of_a_reader_whose_hold_has_no_expiry() {
    let server = RedisServer::start();
    let (a, c) = (server.client(), server.client());
    let lasting = c
        .read_write_lock("rw")
        .read()
        .lock_with_lease(LEASE)
        .expect("C's read lock");
    let holds = hold_keys(&server, "rw");
    assert_eq!(holds.len(), 1, "C's read-hold key: {holds:?}");
    persist(&server, &holds[0]);
    let brief = a
        .read_write_lock("rw")
        .read()
        .lock_with_lease(LEASE)
        .expect("A's read lock");
    brief.unlock().expect("A's read release");
    assert!(
        server.exists("rw"),
        "A's read release freed the lock while C's read hold, without expiry, remains"
    );
    assert_eq!(
        pttl(&server, "rw"),
        -1,
        "the hash outlives the hold without expiry"
    );
    lasting.unlock().expect("C still holds its read lock");
    assert!(!server.exists("rw"), "C's release frees the lock");
}
