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
