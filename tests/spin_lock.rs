//! The spin lock on real redis-server processes: mutual exclusion under
//! contention, a waiter that notices a release within its backoff bound
//! without any pub/sub, exponential backoff, and the plain lock's layout
//! shared with plain locks on the same name.

mod bounded;
mod support;

use std::collections::HashMap;
use std::thread;
use std::time::{Duration, Instant};

use support::contention::count_under_locks;
use support::RedisServer;

/// Generous bound for anything that should take milliseconds.
const PROMPTLY: Duration = Duration::from_secs(5);

/// Every channel anyone listens on.
fn channels(server: &RedisServer) -> Vec<String> {
    server.cmd(&["PUBSUB", "CHANNELS"])
}

#[test]
fn a_waiter_gets_the_lock_within_its_backoff_after_a_release() {
    let server = RedisServer::start();
    let (a, b) = (server.client(), server.client());
    let name = "spin:wake";
    let holder = a.spin_lock(name).lock().expect("free lock");

    let max_backoff = Duration::from_millis(50);
    let lock = b
        .spin_lock(name)
        .with_backoff(Duration::from_millis(1), max_backoff);
    let waiter = bounded::spawn("spinner", move || {
        let guard = lock.lock().expect("lock after the release");
        let got = Instant::now();
        guard.unlock().expect("release");
        got
    });
    // Long enough for the backoff to reach its maximum.
    waiter.assert_running_for(Duration::from_millis(600));
    assert!(
        channels(&server).is_empty(),
        "a spin lock waiter subscribes to nothing: {:?}",
        channels(&server)
    );
    let released = Instant::now();
    holder.unlock().expect("release");
    let got = waiter.join_within(PROMPTLY);
    let after = got.saturating_duration_since(released);
    // The lock's TTL is 30 s: only the backoff explains a quick pick-up.
    assert!(
        after < max_backoff + Duration::from_millis(950),
        "the waiter took {after:?} to notice the release, max backoff {max_backoff:?}"
    );
    assert!(!server.exists(name));
}

#[test]
fn the_default_backoff_grows_to_128_ms() {
    let server = RedisServer::start();
    let client = server.client();
    let name = "spin:default-backoff";
    let holder = client.spin_lock(name).lock().expect("free lock");
    let lock = client.spin_lock(name);
    let before = server.scripts_run();
    let waiter = bounded::spawn("spinner", move || {
        let guard = lock.lock().expect("lock after the release");
        let got = Instant::now();
        guard.unlock().expect("release");
        got
    });
    thread::sleep(Duration::from_secs(1));
    // 1, 2, 4, ... 128 ms, then every 128 ms: about 15 attempts in 1 s.
    let attempts = server.scripts_run() - before;
    assert!(
        (5..60).contains(&attempts),
        "{attempts} attempts in 1 s with a 1-128 ms backoff"
    );
    let released = Instant::now();
    holder.unlock().expect("release");
    let after = waiter
        .join_within(PROMPTLY)
        .saturating_duration_since(released);
    assert!(
        after < Duration::from_secs(2),
        "the waiter took {after:?} to notice the release"
    );
}

#[test]
fn try_lock_for_gives_up_after_its_wait() {
    let server = RedisServer::start();
    let client = server.client();
    let name = "spin:try";
    let holder = client.spin_lock(name).lock().expect("free lock");
    let lock = client.spin_lock(name);
    let (got, waited) = bounded::spawn("trier", move || {
        let started = Instant::now();
        let got = lock
            .try_lock_for(Duration::from_millis(300))
            .map(|g| g.is_some());
        (got, started.elapsed())
    })
    .join_within(PROMPTLY);
    assert!(matches!(got, Ok(false)), "{got:?}");
    assert!(
        waited >= Duration::from_millis(300) && waited < Duration::from_secs(3),
        "try_lock_for(300 ms) returned after {waited:?}"
    );
    drop(holder);
}

#[test]
fn spin_and_plain_locks_share_the_hash_and_exclude_each_other() {
    let server = RedisServer::start();
    let (a, b) = (server.client(), server.client());
    let name = "spin:shared";
    let lock = a.spin_lock(name);
    let outer = lock.lock().expect("free lock");
    let inner = lock.lock().expect("reentry");
    let hash: HashMap<String, String> = server.cmd(&["HGETALL", name]);
    assert_eq!(hash.len(), 1, "{hash:?}");
    let (field, count) = hash.into_iter().next().expect("one holder");
    assert!(field.starts_with(&format!("{}:", a.id())), "{field}");
    assert_eq!(count, "2");
    assert_eq!(lock.hold_count().unwrap(), 2);
    let ttl: i64 = server.cmd(&["PTTL", name]);
    assert!(ttl > 20_000 && ttl <= 30_000, "watchdog TTL, got {ttl}");

    // A plain waiter on the same name is excluded, and woken by the spin
    // lock's release (it publishes on the plain lock's channel).
    let plain = b.lock(name);
    let waiter = bounded::spawn("plain-waiter", move || {
        let guard = plain.lock()?;
        guard.unlock()
    });
    waiter.assert_running_for(Duration::from_millis(300));
    drop(inner);
    waiter.assert_running_for(Duration::from_millis(100));
    outer.unlock().expect("release");
    waiter
        .join_within(PROMPTLY)
        .expect("plain lock after the spin lock");

    // And the other way round.
    let plain = b.lock(name).lock().expect("plain lock");
    let spin = a.spin_lock(name);
    let tried = bounded::spawn("spin-try", move || spin.try_lock().map(|g| g.is_some()))
        .join_within(PROMPTLY);
    assert!(matches!(tried, Ok(false)), "{tried:?}");
    drop(plain);
    assert!(!server.exists(name));
}

#[test]
fn mutual_exclusion_under_contention() {
    let server = RedisServer::start();
    let clients = [server.client(), server.client()];
    let name = "spin:counter";
    // Four threads on each of two clients.
    let locks = (0..8)
        .map(|i| {
            clients[i % 2]
                .spin_lock(name)
                .with_backoff(Duration::from_millis(1), Duration::from_millis(16))
        })
        .collect();
    let total = count_under_locks(
        &server,
        locks,
        "spin:counter:value",
        25,
        Duration::from_secs(30),
    );
    assert_eq!(total, 8 * 25);
    assert!(!server.exists(name));
    assert!(channels(&server).is_empty(), "{:?}", channels(&server));
}
