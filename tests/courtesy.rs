//! Clients take turns: a release that announces a lock while threads of its
//! own client wait on it, and that another process's subscriber hears too,
//! makes the local thread it wakes stand back a moment (a courtesy), so
//! that the other process's waiter, a pub/sub hop further away, gets the
//! lock instead of losing the race. A client alone never stands back, and
//! a client whose listener only lingers subscribed stands back ever more
//! rarely.

mod bounded;
mod support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bounded::Bounded;
use support::RedisServer;

/// Far above what a loaded machine needs for the hand-overs a test waits
/// for, far below a subscription's 10 s linger.
const LIMIT: Duration = Duration::from_secs(8);

/// Threads of `client` that lock `name`, hold it 1 ms and release it,
/// until `stop`: they hand the lock to each other directly, and every
/// bounded run of hand-overs ends with an announcement.
fn hand_around(client: &redhold::Client, name: &str, stop: &Arc<AtomicBool>) -> Vec<Bounded<()>> {
    (0..3)
        .map(|i| {
            let lock = client.lock(name);
            let stop = Arc::clone(stop);
            bounded::spawn(&format!("local-{i}"), move || {
                while !stop.load(Ordering::Relaxed) {
                    let guard = lock.lock().expect("local lock");
                    std::thread::sleep(Duration::from_millis(1));
                    drop(guard);
                }
            })
        })
        .collect()
}

fn stop_all(stop: &AtomicBool, workers: Vec<Bounded<()>>) {
    stop.store(true, Ordering::Relaxed);
    for worker in workers {
        worker.join_within(Duration::from_secs(30));
    }
}

#[test]
fn a_client_stands_back_for_another_clients_waiter() {
    let server = RedisServer::start();
    let busy = server.client();
    let stop = Arc::new(AtomicBool::new(false));
    let workers = hand_around(&busy, "shared", &stop);
    bounded::wait_until(LIMIT, || busy.stats().direct_handoffs >= 20)
        .expect("the local threads hand the lock to each other");

    let other = server.client();
    let got = other
        .lock("shared")
        .try_lock_for(LIMIT)
        .expect("try_lock_for");
    assert!(got.is_some(), "the other client never got the lock");
    drop(got);
    // The other client stays subscribed a while (its linger), so the
    // announcements go on reaching it: `busy` stands back.
    bounded::wait_until(LIMIT, || busy.stats().courtesy_pauses >= 1)
        .expect("a client whose announcement another client heard stands back");
    stop_all(&stop, workers);
    assert!(!server.exists("shared"));
}

#[test]
fn a_client_alone_never_stands_back() {
    let server = RedisServer::start();
    let alone = server.client();
    let stop = Arc::new(AtomicBool::new(false));
    let workers = hand_around(&alone, "alone", &stop);
    // Each local hand-off by a message follows an announcement heard by
    // this client's own subscriber only.
    bounded::wait_until(LIMIT, || {
        let stats = alone.stats();
        stats.direct_handoffs >= 40 && stats.local_handoffs >= 10
    })
    .expect("the local threads hand the lock around, directly and by announcements");
    stop_all(&stop, workers);
    assert_eq!(
        alone.stats().courtesy_pauses,
        0,
        "its own subscriber is no other process"
    );
    assert!(!server.exists("alone"));
}

#[test]
fn a_listener_that_only_lingers_costs_ever_fewer_pauses() {
    let server = RedisServer::start();
    let busy = server.client();
    let other = server.client();
    // The other client waits once, so it subscribes; then it only lingers
    // subscribed, taking nothing.
    let first = busy.lock("lingered").lock().expect("lock");
    let lock = other.lock("lingered");
    let waiter = bounded::spawn("other", move || drop(lock.lock().expect("other lock")));
    std::thread::sleep(Duration::from_millis(200));
    drop(first);
    waiter.join_within(LIMIT);

    let stop = Arc::new(AtomicBool::new(false));
    let workers = hand_around(&busy, "lingered", &stop);
    bounded::wait_until(LIMIT, || busy.stats().local_handoffs >= 100)
        .expect("about 100 announcements");
    stop_all(&stop, workers);
    // Unused courtesies are offered at announcements 1, 3, 7, 15, 31, 63,
    // then one in 64: a pause at every announcement would be about 100.
    let pauses = busy.stats().courtesy_pauses;
    assert!(
        (1..=12).contains(&pauses),
        "{pauses} pauses for a listener that never took the lock"
    );
}

/// Redisson's acquire, as another process runs it: take the lock when it
/// is free (or ours already) for `ARGV[1]` ms under field `ARGV[2]`; nil
/// when taken, else the PTTL.
const FOREIGN_ACQUIRE: &str = "if (redis.call('exists', KEYS[1]) == 0) or \
     (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then \
     redis.call('hincrby', KEYS[1], ARGV[2], 1); \
     redis.call('pexpire', KEYS[1], ARGV[1]); return nil; end; \
     return redis.call('pttl', KEYS[1]);";

/// Another process's release: the lock is gone and announced.
const FOREIGN_RELEASE: &str =
    "redis.call('del', KEYS[1]); return redis.call('publish', KEYS[2], '0');";

#[test]
fn a_slow_waiter_of_another_process_gets_its_turn() {
    // Another process whose woken waiter needs 3 ms from the announcement
    // to its attempt (a JVM thread on a loaded machine needs about that):
    // a 1 ms courtesy never let it in, and courtesies it could not use
    // were then offered ever more rarely.
    const SLOW: Duration = Duration::from_millis(3);
    let server = RedisServer::start();
    let busy = server.client();
    let stop = Arc::new(AtomicBool::new(false));
    let workers = hand_around(&busy, "slow", &stop);
    bounded::wait_until(LIMIT, || busy.stats().direct_handoffs >= 20)
        .expect("the local threads hand the lock to each other");

    let mut listener = server.connection();
    let mut commands = server.connection();
    let mut pubsub = listener.as_pubsub();
    pubsub
        .subscribe("redisson_lock__channel:{slow}")
        .expect("subscribe");
    pubsub
        .set_read_timeout(Some(Duration::from_millis(100)))
        .expect("read timeout");
    let started = std::time::Instant::now();
    let mut attempts = 0;
    let got = loop {
        if started.elapsed() > LIMIT {
            break false;
        }
        if pubsub.get_message().is_err() {
            continue;
        }
        std::thread::sleep(SLOW);
        attempts += 1;
        let ttl: Option<i64> = redis::cmd("EVAL")
            .arg(FOREIGN_ACQUIRE)
            .arg(1)
            .arg("slow")
            .arg(30_000)
            .arg("other-process:1")
            .query(&mut commands)
            .expect("acquire");
        if ttl.is_none() {
            break true;
        }
    };
    if got {
        let _: i64 = redis::cmd("EVAL")
            .arg(FOREIGN_RELEASE)
            .arg(2)
            .arg("slow")
            .arg("redisson_lock__channel:{slow}")
            .query(&mut commands)
            .expect("release");
    }
    drop(pubsub);
    stop_all(&stop, workers);
    assert!(
        got,
        "a waiter 3 ms slow never got the lock in {attempts} announcements ({} courtesy pauses)",
        busy.stats().courtesy_pauses
    );
    assert!(!server.exists("slow"));
}
