//! The read-write lock on real redis-server processes: readers overlap, a
//! writer excludes everyone, the downgrade, the refused upgrade, read holds
//! that expire when their reader dies or are renewed by the watchdog while
//! it lives, a write release that wakes every waiting reader, a read
//! release that cuts the lock's TTL (or gives a hash without expiry one)
//! and wakes a parked writer, mutual exclusion under contention, and the
//! Redis layout of `docs/wire-format.md`.

mod bounded;
mod support;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use redhold::{Client, Error};
use support::RedisServer;

/// Generous bound for anything that should take milliseconds.
const PROMPTLY: Duration = Duration::from_secs(5);

/// The lock hash as Redis has it: `mode` and holder field → hold count.
fn hash(server: &RedisServer, name: &str) -> HashMap<String, String> {
    server.cmd(&["HGETALL", name])
}

fn pttl(server: &RedisServer, key: &str) -> i64 {
    server.cmd(&["PTTL", key])
}

/// The key that keeps read hold `k` of `field` alive.
fn hold_key(name: &str, field: &str, k: u32) -> String {
    format!("{{{name}}}:{field}:rwlock_timeout:{k}")
}

/// Every read-hold key of lock `name`.
fn hold_keys(server: &RedisServer, name: &str) -> Vec<String> {
    let mut keys: Vec<String> = server.cmd(&["KEYS", &format!("{{{name}}}:*:rwlock_timeout:*")]);
    keys.sort();
    keys
}

/// The hash's holder fields of `client` (everything but `mode`).
fn fields_of(server: &RedisServer, name: &str, client: &Client) -> Vec<(String, String)> {
    let prefix = format!("{}:", client.id());
    let mut fields: Vec<_> = hash(server, name)
        .into_iter()
        .filter(|(field, _)| field.starts_with(&prefix))
        .collect();
    fields.sort();
    fields
}

/// The only holder field of `client`.
#[track_caller]
fn only_field_of(server: &RedisServer, name: &str, client: &Client) -> (String, String) {
    let fields = fields_of(server, name, client);
    assert_eq!(fields.len(), 1, "one field of {}: {fields:?}", client.id());
    fields.into_iter().next().expect("one field")
}

/// The current value of a shared counter.
fn count(counter: &AtomicUsize) -> usize {
    counter.load(Ordering::SeqCst)
}

#[test]
fn readers_on_two_clients_overlap() {
    let server = RedisServer::start();
    let clients = [server.client(), server.client()];
    let name = "rw:readers";
    let holding = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..4)
        .map(|i| {
            let rw = clients[i % 2].read_write_lock(name);
            let (holding, done) = (Arc::clone(&holding), Arc::clone(&done));
            bounded::spawn(&format!("reader-{i}"), move || {
                let guard = rw.read().lock().expect("read lock");
                holding.fetch_add(1, Ordering::SeqCst);
                // Hold until every reader holds at once and main has looked.
                let told = bounded::wait_until(PROMPTLY, || done.load(Ordering::SeqCst));
                guard.unlock().expect("read release");
                told.is_some()
            })
        })
        .collect();
    let all_in = bounded::wait_until(PROMPTLY, || count(&holding) == 4);
    assert!(all_in.is_some(), "only {} readers got in", count(&holding));

    // One hash: mode=read and one field per reader, each with its hold key.
    let h = hash(&server, name);
    assert_eq!(h.get("mode").map(String::as_str), Some("read"), "{h:?}");
    assert_eq!(h.len(), 5, "mode plus four readers: {h:?}");
    let mut expected_keys = Vec::new();
    for client in &clients {
        let fields = fields_of(&server, name, client);
        assert_eq!(fields.len(), 2, "two readers per client: {fields:?}");
        for (field, count) in fields {
            assert_eq!(count, "1");
            let rest = &field[client.id().to_string().len() + 1..];
            assert!(
                rest.parse::<u64>().is_ok(),
                "field {field:?} is uuid:thread"
            );
            let key = hold_key(name, &field, 1);
            assert!(pttl(&server, &key) > 0, "{key} lives with a TTL");
            expected_keys.push(key);
        }
    }
    expected_keys.sort();
    assert_eq!(hold_keys(&server, name), expected_keys);
    assert!(pttl(&server, name) > 0, "the hash has a TTL");
    let rw = clients[0].read_write_lock(name);
    assert!(rw.read().is_locked().unwrap());
    assert!(!rw.write().is_locked().unwrap());
    assert_eq!(rw.name(), name);

    done.store(true, Ordering::SeqCst);
    for reader in readers {
        assert!(reader.join_within(PROMPTLY), "a reader was not told to go");
    }
    assert!(!server.exists(name), "the last reader deletes the hash");
    assert!(hold_keys(&server, name).is_empty());
}

#[test]
fn read_holds_are_reentrant_with_one_key_per_hold() {
    let server = RedisServer::start();
    let client = server.client();
    let name = "rw:reentrant-read";
    let read = client.read_write_lock(name).read();
    let first = read.lock().expect("read");
    let second = read.lock().expect("read again");
    let (field, count) = only_field_of(&server, name, &client);
    assert_eq!(count, "2");
    assert_eq!(read.hold_count().unwrap(), 2);
    assert_eq!(
        hold_keys(&server, name),
        vec![hold_key(name, &field, 1), hold_key(name, &field, 2)]
    );
    drop(second);
    assert_eq!(hold_keys(&server, name), vec![hold_key(name, &field, 1)]);
    assert_eq!(read.hold_count().unwrap(), 1);
    first.unlock().expect("last read release");
    assert!(!server.exists(name));
    assert!(hold_keys(&server, name).is_empty());
}

#[test]
fn hash_tagged_names_keep_their_tag_in_hold_keys_and_channel() {
    let server = RedisServer::start();
    let client = server.client_with_watchdog(Duration::from_secs(1));
    let name = "{cfg}:app";
    let rw = client.read_write_lock(name);
    let write = rw.write().lock().expect("write lock");
    let read = rw.read().lock().expect("read lock");
    let field = fields_of(&server, name, &client)[0].0.clone();
    let key = format!("{{cfg}}:app:{field}:rwlock_timeout:1");
    assert!(server.exists(&key), "hold key {key}");
    // The watchdog renews the tagged hold key too.
    thread::sleep(Duration::from_millis(1500));
    assert!(server.exists(&key), "hold key {key} renewed");

    let other = client.read_write_lock(name);
    let waiter = bounded::spawn("tagged-writer", move || other.write().lock().map(drop));
    let channel = "redisson_rwlock:{cfg}:app";
    let listening = bounded::wait_until(PROMPTLY, || {
        server
            .cmd::<(String, i64)>(&["PUBSUB", "NUMSUB", channel])
            .1
            == 1
    });
    assert!(listening.is_some(), "nobody listens on {channel}");
    drop(write);
    drop(read);
    waiter.join_within(PROMPTLY).expect("write lock");
}

#[test]
fn a_writer_excludes_readers_and_other_writers() {
    let server = RedisServer::start();
    let (a, b) = (server.client(), server.client());
    let name = "rw:writer";
    let rw = a.read_write_lock(name);
    let write = rw.write().lock().expect("write lock");

    let h = hash(&server, name);
    assert_eq!(h.get("mode").map(String::as_str), Some("write"), "{h:?}");
    let (field, count) = only_field_of(&server, name, &a);
    assert!(
        field.ends_with(":write"),
        "the writer's field is uuid:thread:write: {field}"
    );
    assert_eq!(count, "1");
    assert!(
        hold_keys(&server, name).is_empty(),
        "a writer has no hold keys"
    );
    assert!(rw.write().is_locked().unwrap());
    assert!(!rw.read().is_locked().unwrap());
    assert_eq!(rw.write().hold_count().unwrap(), 1);
    assert_eq!(rw.read().hold_count().unwrap(), 0);

    // Nobody else gets in, on this client or another, in either mode.
    for (who, client) in [("same-client", &a), ("other-client", &b)] {
        let rw = client.read_write_lock(name);
        let seen = bounded::spawn(who, move || {
            (
                rw.read().try_lock().map(|g| g.is_some()),
                rw.write().try_lock().map(|g| g.is_some()),
                rw.read()
                    .try_lock_for(Duration::from_millis(200))
                    .map(|g| g.is_some()),
            )
        })
        .join_within(PROMPTLY);
        assert!(matches!(seen.0, Ok(false)), "{who} read: {:?}", seen.0);
        assert!(matches!(seen.1, Ok(false)), "{who} write: {:?}", seen.1);
        assert!(
            matches!(seen.2, Ok(false)),
            "{who} read with wait: {:?}",
            seen.2
        );
    }

    // A waiting writer gets in once the writer leaves.
    let other = b.read_write_lock(name).write();
    let waiter = bounded::spawn("waiting-writer", move || {
        let guard = other.lock().expect("write lock after the first writer");
        guard.unlock().expect("write release");
    });
    waiter.assert_running_for(Duration::from_millis(300));
    write.unlock().expect("write release");
    waiter.join_within(PROMPTLY);
    assert!(!server.exists(name));
}

#[test]
fn readers_exclude_writers_until_the_last_one_leaves() {
    let server = RedisServer::start();
    let (a, b) = (server.client(), server.client());
    let name = "rw:readers-block-writer";
    let first = a.read_write_lock(name).read().lock().expect("read lock");
    let rw = b.read_write_lock(name);
    let (taken_tx, taken_rx) = std::sync::mpsc::channel();
    let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
    let second = bounded::spawn("second-reader", move || {
        let guard = rw.read().lock().expect("read lock");
        taken_tx.send(()).expect("main waits");
        let _ = go_rx.recv_timeout(PROMPTLY);
        guard.unlock().expect("read release");
    });
    taken_rx.recv_timeout(PROMPTLY).expect("second reader in");

    let rw = b.read_write_lock(name);
    let writer = bounded::spawn("writer", move || {
        let guard = rw.write().lock().expect("write lock after the readers");
        guard.unlock().expect("write release");
    });
    writer.assert_running_for(Duration::from_millis(300));
    // One reader leaving is not enough.
    first.unlock().expect("read release");
    writer.assert_running_for(Duration::from_millis(300));
    // The last one's release wakes the writer (30 s TTL: no time-out help).
    go_tx.send(()).expect("second reader waits");
    second.join_within(PROMPTLY);
    writer.join_within(PROMPTLY);
    assert!(!server.exists(name));
}

#[test]
fn the_writer_downgrades_to_a_reader() {
    let server = RedisServer::start();
    let (a, b) = (server.client(), server.client());
    let name = "rw:downgrade";
    let rw = a.read_write_lock(name);
    let write = rw.write().lock().expect("write lock");
    let read = rw.read().lock().expect("the writer may read");
    let again = rw.write().lock().expect("and write again (reentrant)");
    assert_eq!(rw.write().hold_count().unwrap(), 2);
    drop(again);

    let h = hash(&server, name);
    assert_eq!(h.get("mode").map(String::as_str), Some("write"), "{h:?}");
    let fields = fields_of(&server, name, &a);
    assert_eq!(fields.len(), 2, "reader and writer fields: {fields:?}");
    let (reader_field, writer_field) = (&fields[0].0, &fields[1].0);
    assert_eq!(writer_field, &format!("{reader_field}:write"));
    assert_eq!(
        hold_keys(&server, name),
        vec![hold_key(name, reader_field, 1)]
    );

    // Release the write: the thread keeps reading.
    write.unlock().expect("write release");
    let h = hash(&server, name);
    assert_eq!(h.get("mode").map(String::as_str), Some("read"), "{h:?}");
    assert_eq!(h.len(), 2, "mode and the reader: {h:?}");
    assert_eq!(h.get(reader_field).map(String::as_str), Some("1"));
    assert_eq!(rw.read().hold_count().unwrap(), 1);
    assert!(rw.read().is_locked().unwrap());

    // Other readers may enter; writers may not.
    let other = b.read_write_lock(name);
    let seen = bounded::spawn("other-reader", move || {
        let read = other.read().try_lock().map(|g| g.is_some());
        let write = other.write().try_lock().map(|g| g.is_some());
        (read, write)
    })
    .join_within(PROMPTLY);
    assert!(
        matches!(seen.0, Ok(true)),
        "a reader after the downgrade: {:?}",
        seen.0
    );
    assert!(
        matches!(seen.1, Ok(false)),
        "a writer after the downgrade: {:?}",
        seen.1
    );
    // And the downgraded thread cannot go back to writing.
    assert!(matches!(
        rw.write().try_lock(),
        Err(Error::UpgradeNotSupported { .. })
    ));

    read.unlock().expect("read release");
    assert!(!server.exists(name));
    assert!(hold_keys(&server, name).is_empty());
}

#[test]
fn an_upgrade_attempt_fails_at_once() {
    let server = RedisServer::start();
    let (a, b) = (server.client(), server.client());
    let name = "rw:upgrade";
    let rw = a.read_write_lock(name);
    let read = rw.read().lock().expect("read lock");
    // Another client reads too: the upgrade is refused all the same.
    let other = b.read_write_lock(name);
    let other_read = bounded::spawn("other-reader", move || {
        other.read().lock().map(|g| g.leak())
    });
    other_read.join_within(PROMPTLY).expect("second reader");
    let before = hash(&server, name);

    let started = Instant::now();
    match rw.write().lock() {
        Err(Error::UpgradeNotSupported { lock }) => assert_eq!(lock, name),
        other => panic!("lock() on the write side while reading: {other:?}"),
    }
    match rw.write().try_lock_for(Duration::from_secs(20)) {
        Err(Error::UpgradeNotSupported { .. }) => {}
        other => panic!("try_lock_for on the write side while reading: {other:?}"),
    }
    let interrupt = redhold::Interrupt::new();
    assert!(matches!(
        rw.write().lock_interruptibly(&interrupt),
        Err(Error::UpgradeNotSupported { .. })
    ));
    assert!(
        started.elapsed() < PROMPTLY,
        "the upgrade attempts took {:?}",
        started.elapsed()
    );
    assert_eq!(
        hash(&server, name),
        before,
        "the refused upgrade changed nothing"
    );
    let message = Error::UpgradeNotSupported { lock: name.into() }.to_string();
    assert!(message.contains(name), "{message}");

    // A thread that does not read simply waits for the write lock.
    let rw_b = b.read_write_lock(name);
    let waited = bounded::spawn("non-reader", move || {
        rw_b.write()
            .try_lock_for(Duration::from_millis(200))
            .map(|g| g.is_some())
    })
    .join_within(PROMPTLY);
    assert!(matches!(waited, Ok(false)), "{waited:?}");
    drop(read);
}

#[test]
fn a_dead_readers_holds_expire() {
    let server = RedisServer::start();
    let (a, b) = (server.client(), server.client());

    // A reader with a lease that never comes back to release it.
    let name = "rw:dead-leased";
    let read = a.read_write_lock(name).read();
    read.lock_with_lease(Duration::from_millis(600))
        .expect("read lock")
        .leak();
    read.lock_with_lease(Duration::from_millis(600))
        .expect("read again")
        .leak();
    let (field, _) = only_field_of(&server, name, &a);
    let keys = [hold_key(name, &field, 1), hold_key(name, &field, 2)];
    for key in &keys {
        let ttl = pttl(&server, key);
        assert!(ttl > 0 && ttl <= 600, "{key} has TTL {ttl}, lease 600");
    }
    let ttl = pttl(&server, name);
    assert!(ttl > 0 && ttl <= 600, "the hash has TTL {ttl}, lease 600");
    let gone = bounded::wait_until(PROMPTLY, || {
        !server.exists(name) && keys.iter().all(|k| !server.exists(k))
    });
    assert!(
        gone.is_some(),
        "the dead reader's hash and hold keys stayed"
    );
    let rw_b = b.read_write_lock(name);
    let wrote = bounded::spawn("writer", move || {
        rw_b.write().try_lock().map(|g| g.is_some())
    })
    .join_within(PROMPTLY);
    assert!(matches!(wrote, Ok(true)), "{wrote:?}");

    // A watched reader whose client shuts down (as when its process dies):
    // nobody renews its holds any more.
    let name = "rw:dead-watched";
    let short = server.client_with_watchdog(Duration::from_millis(800));
    short
        .read_write_lock(name)
        .read()
        .lock()
        .expect("read lock")
        .leak();
    let (field, _) = only_field_of(&server, name, &short);
    let key = hold_key(name, &field, 1);
    assert!(server.exists(&key));
    short.shutdown().expect("shutdown");
    let gone = bounded::wait_until(PROMPTLY, || !server.exists(name) && !server.exists(&key));
    assert!(gone.is_some(), "the shut-down reader's holds stayed");
}

#[test]
fn a_dead_readers_field_does_not_outlive_the_live_readers() {
    let server = RedisServer::start();
    let (a, b) = (server.client(), server.client());
    let name = "rw:dead-and-alive";
    // A live reader, renewed by the watchdog...
    let alive = a.read_write_lock(name).read().lock().expect("read lock");
    // ...and a dead one whose hold key expires while the hash lives on.
    let rw_b = b.read_write_lock(name);
    bounded::spawn("dead-reader", move || {
        rw_b.read()
            .lock_with_lease(Duration::from_millis(300))
            .map(|g| g.leak())
    })
    .join_within(PROMPTLY)
    .expect("second reader");
    let (dead_field, _) = only_field_of(&server, name, &b);
    let gone = bounded::wait_until(PROMPTLY, || !server.exists(&hold_key(name, &dead_field, 1)));
    assert!(gone.is_some());
    assert!(
        hash(&server, name).contains_key(&dead_field),
        "the dead reader's field stays in the hash meanwhile"
    );
    // When the live reader leaves, the lock is free although the dead
    // reader's field was still in the hash.
    alive.unlock().expect("read release");
    assert!(!server.exists(name));
    let rw = b.read_write_lock(name);
    let wrote = bounded::spawn("writer", move || rw.write().try_lock().map(|g| g.is_some()))
        .join_within(PROMPTLY);
    assert!(matches!(wrote, Ok(true)), "{wrote:?}");
}

#[test]
fn the_watchdog_renews_read_holds() {
    let server = RedisServer::start();
    let client = server.client_with_watchdog(Duration::from_secs(1));
    let name = "rw:renewed";
    let rw = client.read_write_lock(name);
    let first = rw.read().lock().expect("read lock");
    let second = rw.read().lock().expect("read again");
    let (field, _) = only_field_of(&server, name, &client);
    let keys = [hold_key(name, &field, 1), hold_key(name, &field, 2)];

    thread::sleep(Duration::from_secs(3));
    assert!(first.is_held() && second.is_held());
    let ttl = pttl(&server, name);
    assert!(ttl > 0 && ttl <= 1000, "the hash lives on, TTL {ttl}");
    for key in &keys {
        let ttl = pttl(&server, key);
        assert!(ttl > 0 && ttl <= 1000, "{key} lives on, TTL {ttl}");
    }
    assert_eq!(rw.read().hold_count().unwrap(), 2);
    second.unlock().expect("read release");
    first.unlock().expect("last read release");
    assert!(!server.exists(name));
    assert!(hold_keys(&server, name).is_empty());
}

#[test]
fn a_write_release_wakes_every_waiting_reader() {
    let server = RedisServer::start();
    let clients = [server.client(), server.client()];
    let name = "rw:wake-all";
    // Load the read script, so that each attempt below is one EVALSHA.
    drop(clients[1].read_write_lock("rw:warm-up").read().lock());
    let write = clients[0]
        .read_write_lock(name)
        .write()
        .lock()
        .expect("write lock");
    let scripts_before = server.scripts_run();

    const READERS: usize = 6;
    let started = Arc::new(AtomicUsize::new(0));
    let holding = Arc::new(AtomicUsize::new(0));
    let readers: Vec<_> = (0..READERS)
        .map(|i| {
            let rw = clients[i % 2].read_write_lock(name);
            let (started, holding) = (Arc::clone(&started), Arc::clone(&holding));
            bounded::spawn(&format!("reader-{i}"), move || {
                started.fetch_add(1, Ordering::SeqCst);
                let guard = rw.read().lock().expect("read lock");
                let acquired = Instant::now();
                holding.fetch_add(1, Ordering::SeqCst);
                // All of them hold at once.
                let overlapped =
                    bounded::wait_until(PROMPTLY, || count(&holding) == READERS).is_some();
                guard.unlock().expect("read release");
                (acquired, overlapped)
            })
        })
        .collect();
    assert!(bounded::wait_until(PROMPTLY, || count(&started) == READERS).is_some());
    // Both clients listen on the read-write channel; give every reader time
    // to park. Without a wake-up they would sleep out the 30 s lock TTL.
    let channel = format!("redisson_rwlock:{{{name}}}");
    let listening = bounded::wait_until(PROMPTLY, || {
        server
            .cmd::<(String, i64)>(&["PUBSUB", "NUMSUB", &channel])
            .1
            == 2
    });
    assert!(listening.is_some(), "two clients listen on {channel}");
    // Every reader tried and parked (one or two attempts each: a reader
    // whose channel was already subscribed may skip the second).
    let parked = bounded::wait_until(PROMPTLY, || {
        clients
            .iter()
            .map(|c| c.stats().parked_waiters)
            .sum::<usize>()
            == READERS
    });
    assert!(
        parked.is_some(),
        "the readers did not all park: {:?}",
        clients.iter().map(|c| c.stats()).collect::<Vec<_>>()
    );
    assert!(server.scripts_run() >= scripts_before + READERS as u64);
    thread::sleep(Duration::from_millis(100));
    assert_eq!(count(&holding), 0, "no reader gets in past the writer");

    let released = Instant::now();
    write.unlock().expect("write release");
    for reader in readers {
        let (acquired, overlapped) = reader.join_within(Duration::from_secs(10));
        let after = acquired.saturating_duration_since(released);
        assert!(
            after < Duration::from_secs(3),
            "a reader got in {after:?} after the release"
        );
        assert!(overlapped, "the readers did not all hold at once");
    }
    assert!(!server.exists(name));
}

/// A read release that cuts the hash's TTL must tell the waiters of every
/// client (`read_release.lua` publishes when the longest remaining read
/// hold ends sooner than the hash did). Client A reads with a 20 s lease,
/// client C with a 2 s one; client B's writer parks on the hash's 20 s
/// TTL. A's release leaves only C's hold, so the hash now ends with it;
/// nobody releases C's hold (it expires, which announces nothing). B must
/// get the write lock within a few seconds of the hash's end: without the
/// release's message it sleeps on the old TTL until its own 8 s wait runs
/// out.
#[test]
fn a_read_release_that_shortens_the_ttl_wakes_a_parked_writer() {
    /// A's lease: what B's writer is told the lock lives for.
    const LONG: Duration = Duration::from_secs(20);
    /// C's lease: the lock's life once A's hold is gone.
    const SHORT: Duration = Duration::from_secs(2);
    /// How long B's writer waits at most: shorter than `LONG`.
    const WRITER_WAIT: Duration = Duration::from_secs(8);
    /// B must get the lock within this long after it became free (a
    /// wake-up and two attempts take milliseconds; the rest is room for a
    /// loaded machine).
    const BOUND: Duration = Duration::from_secs(3);

    let server = RedisServer::start();
    let (a, b, c) = (server.client(), server.client(), server.client());
    let name = "rw:shortened";
    let long = a
        .read_write_lock(name)
        .read()
        .lock_with_lease(LONG)
        .expect("long read lock");
    // A reader that never releases: its hold ends with its lease.
    c.read_write_lock(name)
        .read()
        .lock_with_lease(SHORT)
        .expect("short read lock")
        .leak();
    let told = pttl(&server, name);
    assert!(
        told > SHORT.as_millis() as i64,
        "the hash lives as long as the long hold: TTL {told}"
    );

    let rw_b = b.read_write_lock(name);
    let writer = bounded::spawn("writer", move || {
        rw_b.write()
            .try_lock_for(WRITER_WAIT)
            .expect("write lock")
            .map(|guard| {
                let at = Instant::now();
                drop(guard);
                at
            })
    });
    let parked = bounded::wait_until(PROMPTLY, || b.stats().parked_waiters == 1);
    assert!(parked.is_some(), "the writer did not park: {:?}", b.stats());

    long.unlock().expect("long read release");
    // The case under test: the release cut the TTL, it did not free the
    // lock (a free lock is announced anyway). Fails on a machine so slow
    // that C's hold ended before A's release.
    let cut = pttl(&server, name);
    assert!(
        cut > 0 && cut <= SHORT.as_millis() as i64,
        "after the long hold's release the hash's TTL is {cut} ms, not cut to C's {SHORT:?}"
    );
    let released = Instant::now();
    // When the lock became free: C's lease ended.
    let free = loop {
        if !server.exists(name) {
            break Instant::now();
        }
        assert!(
            released.elapsed() < SHORT + PROMPTLY,
            "{name} still exists {:?} after the release",
            released.elapsed()
        );
        thread::sleep(Duration::from_millis(10));
    };
    match writer.join_within(WRITER_WAIT + PROMPTLY) {
        Some(at) => assert!(
            at.saturating_duration_since(free) <= BOUND,
            "B's writer got {name} {:.1} s after it became free (the read release cut the \
             TTL from {told} ms to {cut} ms)",
            at.saturating_duration_since(free).as_secs_f64()
        ),
        None => panic!(
            "B's writer gave up after {WRITER_WAIT:?}; {name} had been free for {:.1} s (the \
             read release cut the TTL from {told} ms to {cut} ms)",
            free.elapsed().as_secs_f64()
        ),
    }
}

/// Issue 40, hole 2: the same cut on a hash without expiry (PTTL -1, as a
/// foreign client or a user's `PERSIST` can leave it). B's writer saw no
/// expiry and parks on the release message, looking again only every
/// watchdog timeout of its client; the read release gives the hash C's
/// short TTL, so it now ends sooner than B was told, and B must hear so.
#[test]
fn a_read_release_that_gives_a_hash_without_expiry_a_ttl_wakes_a_parked_writer() {
    /// C's lease: the lock's life once A's hold is gone.
    const SHORT: Duration = Duration::from_secs(2);
    /// B's watchdog timeout: how long its writer parks on a lock without
    /// expiry, far longer than its wait.
    const B_WATCHDOG: Duration = Duration::from_secs(120);
    /// How long B's writer waits at most: far shorter than its watchdog
    /// timeout, far longer than `SHORT`.
    const WRITER_WAIT: Duration = Duration::from_secs(20);
    /// B must get the lock within this long after it became free.
    const BOUND: Duration = Duration::from_secs(3);

    let server = RedisServer::start();
    let (a, c) = (server.client(), server.client());
    let b = server.client_with_watchdog(B_WATCHDOG);
    let name = "rw:no-expiry";
    let long = a
        .read_write_lock(name)
        .read()
        .lock_with_lease(Duration::from_secs(600))
        .expect("long read lock");
    // A reader that never releases: its hold ends with its lease.
    c.read_write_lock(name)
        .read()
        .lock_with_lease(SHORT)
        .expect("short read lock")
        .leak();
    // The hash now lives for ever, as one made without PEXPIRE does.
    let persisted: i64 = server.cmd(&["PERSIST", name]);
    assert_eq!(persisted, 1, "{name} had a TTL to remove");

    let rw_b = b.read_write_lock(name);
    let writer = bounded::spawn("writer", move || {
        rw_b.write()
            .try_lock_for(WRITER_WAIT)
            .expect("write lock")
            .map(|guard| {
                let at = Instant::now();
                drop(guard);
                at
            })
    });
    let parked = bounded::wait_until(PROMPTLY, || b.stats().parked_waiters == 1);
    assert!(parked.is_some(), "the writer did not park: {:?}", b.stats());

    long.unlock().expect("long read release");
    // The case under test: the release gave the hash a TTL, it did not free
    // the lock (a free lock is announced anyway). Fails on a machine so
    // slow that C's hold ended before A's release.
    let cut = pttl(&server, name);
    assert!(
        cut > 0 && cut <= SHORT.as_millis() as i64,
        "after A's release the hash's TTL is {cut} ms, not C's {SHORT:?}"
    );
    let released = Instant::now();
    let free = loop {
        if !server.exists(name) {
            break Instant::now();
        }
        assert!(
            released.elapsed() < SHORT + PROMPTLY,
            "{name} still exists {:?} after the release",
            released.elapsed()
        );
        thread::sleep(Duration::from_millis(10));
    };
    match writer.join_within(WRITER_WAIT + PROMPTLY) {
        Some(at) => assert!(
            at.saturating_duration_since(free) <= BOUND,
            "B's writer got {name} {:.1} s after it became free (the read release gave a hash \
             without expiry a TTL of {cut} ms; B's watchdog timeout is {B_WATCHDOG:?})",
            at.saturating_duration_since(free).as_secs_f64()
        ),
        None => panic!(
            "B's writer gave up after {WRITER_WAIT:?}; {name} had been free for {:.1} s (the \
             read release gave a hash without expiry a TTL of {cut} ms, and no message told \
             the writer, parked on 'no expiry' for its {B_WATCHDOG:?} watchdog timeout)",
            free.elapsed().as_secs_f64()
        ),
    }
}

#[test]
fn force_unlock_deletes_only_the_named_mode() {
    let server = RedisServer::start();
    let client = server.client();
    let name = "rw:force";
    let rw = client.read_write_lock(name);
    let read = rw.read().lock().expect("read lock");
    assert!(!rw.write().force_unlock().unwrap(), "not write-locked");
    assert!(server.exists(name));
    assert!(rw.read().force_unlock().unwrap());
    assert!(!server.exists(name));
    assert!(matches!(read.unlock(), Err(Error::LockLost { .. })));

    let write = rw.write().lock().expect("write lock");
    assert!(!rw.read().force_unlock().unwrap(), "not read-locked");
    assert!(rw.write().force_unlock().unwrap());
    assert!(matches!(write.unlock(), Err(Error::LockLost { .. })));
}

#[test]
fn mutual_exclusion_under_contention() {
    let server = RedisServer::start();
    let clients = [server.client(), server.client()];
    let name = "rw:counter";
    let counter = "rw:counter:value";
    const THREADS_PER_CLIENT: usize = 4;
    const ITERATIONS: usize = 20;
    let torn = Arc::new(Mutex::new(Vec::new()));
    let workers: Vec<_> = (0..2 * THREADS_PER_CLIENT)
        .map(|i| {
            let rw = clients[i % 2].read_write_lock(name);
            let mut con = server.connection();
            let torn = Arc::clone(&torn);
            bounded::spawn(&format!("worker-{i}"), move || {
                for n in 0..ITERATIONS {
                    if n % 2 == 0 {
                        let guard = rw.write().lock().expect("write lock");
                        increment(&mut con, counter);
                        guard.unlock().expect("write release");
                    } else {
                        // A reader sees no write while it reads.
                        let guard = rw.read().lock().expect("read lock");
                        let first = get(&mut con, counter);
                        thread::sleep(Duration::from_millis(1));
                        let second = get(&mut con, counter);
                        guard.unlock().expect("read release");
                        if first != second {
                            torn.lock().unwrap().push((first, second));
                        }
                    }
                }
            })
        })
        .collect();
    for worker in workers {
        worker.join_within(Duration::from_secs(30));
    }
    let total: usize = server.cmd(&["GET", counter]);
    assert_eq!(total, 2 * THREADS_PER_CLIENT * ITERATIONS / 2);
    assert!(
        torn.lock().unwrap().is_empty(),
        "writes during reads: {torn:?}"
    );
    assert!(!server.exists(name));
    assert!(hold_keys(&server, name).is_empty());
}

fn get(con: &mut redis::Connection, key: &str) -> u64 {
    let value: Option<u64> = redis::cmd("GET").arg(key).query(con).expect("GET");
    value.unwrap_or(0)
}

/// A read-modify-write that loses updates unless callers exclude each other.
fn increment(con: &mut redis::Connection, key: &str) {
    let value = get(con, key);
    thread::yield_now();
    redis::cmd("SET")
        .arg(key)
        .arg(value + 1)
        .query::<()>(con)
        .expect("SET");
}

/// A writer that also reads holds read holds: `read().is_locked()` says so,
/// as Redisson's `readLock().isLocked()` does.
#[test]
fn read_is_locked_while_the_writer_also_reads() {
    let server = RedisServer::start();
    let client = server.client();
    let rw = client.read_write_lock("writer-reads");
    let write = rw.write().lock().unwrap();
    assert!(!rw.read().is_locked().unwrap());
    let read = rw.read().lock().unwrap();
    assert!(rw.read().is_locked().unwrap());
    assert!(rw.write().is_locked().unwrap());
    drop(read);
    assert!(!rw.read().is_locked().unwrap());
    drop(write);
}

/// A thread holds a read lock twice: once with a short lease, once
/// watched. The leased hold's key expires; the field still counts it, and
/// so does the client, until its guard goes. A re-entry then must not
/// take the field for wiped: the watched hold is still there, and its
/// guard must stay held, with no loss reported. (A first cut of the
/// read acquire that dropped every expired hold's count made the reply
/// count one hold fewer than the client, which then judged the
/// generation lost; the seeded checker met it, seed
/// 4595255896211224185.)
#[test]
fn a_reentry_after_one_of_the_threads_read_holds_expired_keeps_the_others() {
    let server = RedisServer::start();
    let client = server.client();
    let name = "rw:mixed-expiry";
    let read = client.read_write_lock(name).read();
    let leased = read
        .lock_with_lease(Duration::from_millis(100))
        .expect("the leased read hold");
    let watched = read.lock().expect("the watched read hold");
    let (field, _) = only_field_of(&server, name, &client);
    let expired = bounded::wait_until(PROMPTLY, || pttl(&server, &hold_key(name, &field, 1)) == -2);
    assert!(expired.is_some(), "the leased hold's key did not expire");
    let again = read
        .lock_with_lease(Duration::from_secs(10))
        .expect("the re-entry");
    assert!(
        watched.is_held(),
        "the watched read hold was taken for lost on the re-entry (HGETALL {:?}, keys {:?})",
        hash(&server, name),
        hold_keys(&server, name)
    );
    assert_eq!(client.stats().locks_lost, 0, "no loss was reported");
    drop(again);
    drop(leased);
    assert!(watched.is_held(), "the watched hold outlives the others");
    drop(watched);
    assert!(!server.exists(name), "the last release frees the lock");
}
