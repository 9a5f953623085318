//! `Client::stats`: every figure moves when what it counts happens.

mod bounded;
mod support;

use std::time::Duration;

use support::RedisServer;

#[test]
fn a_new_client_has_done_nothing() {
    let server = RedisServer::start();
    let stats = server.client().stats();
    assert_eq!(stats, redhold::Stats::default());
}

#[test]
fn holds_waiters_channels_and_hand_offs_are_counted() {
    let server = RedisServer::start();
    let client = server.client();
    let lock = client.lock("counted");
    let first = lock.lock().unwrap();
    let again = lock.lock().unwrap();
    let other = client.lock("counted-too").lock().unwrap();
    assert_eq!(client.stats().held_locks, 2, "one per lock and thread");

    let waiter_lock = client.lock("counted");
    let waiter = bounded::spawn("waiter", move || waiter_lock.lock().map(drop));
    bounded::wait_until(Duration::from_secs(5), || {
        let stats = client.stats();
        stats.parked_waiters == 1 && stats.subscribed_channels == 1
    })
    .expect("the waiter is counted, and its channel once subscribed");
    drop(again);
    drop(first);
    waiter
        .join_within(Duration::from_secs(10))
        .expect("the waiter gets the lock");
    let stats = client.stats();
    assert_eq!(stats.parked_waiters, 0);
    assert_eq!(
        stats.local_handoffs + stats.direct_handoffs,
        1,
        "handed over once, by a message or directly: {stats:?}"
    );
    assert_eq!(stats.held_locks, 1);
    drop(other);
    assert_eq!(client.stats().held_locks, 0);
}

#[test]
fn renewals_losses_and_reconnects_are_counted() {
    let server = RedisServer::start();
    let client = server.client_with_watchdog(Duration::from_millis(600));
    let guard = client.lock("renewed").lock().unwrap();
    bounded::wait_until(Duration::from_secs(5), || {
        client.stats().renewal_passes >= 2
    })
    .expect("the watchdog makes passes");
    assert!(server.client().lock("renewed").force_unlock().unwrap());
    bounded::wait_until(Duration::from_secs(5), || client.stats().locks_lost == 1)
        .expect("the next pass finds the lock lost");
    assert!(!guard.is_held());
    drop(guard);

    // A waiter keeps the pub/sub connection in use.
    let _held = server.client().lock("busy").lock().unwrap();
    let waiter_lock = client.lock("busy");
    let _waiter = bounded::spawn("waiter", move || {
        waiter_lock
            .try_lock_for(Duration::from_secs(8))
            .map(|g| g.is_some())
    });
    bounded::wait_until(Duration::from_secs(5), || {
        client.stats().subscribed_channels == 1
    })
    .expect("subscribed");
    server.cmd::<i64>(&["CLIENT", "KILL", "TYPE", "pubsub"]);
    bounded::wait_until(Duration::from_secs(5), || {
        client.stats().pubsub_reconnects == 1
    })
    .expect("the subscriber reconnects");
    client.shutdown().unwrap();
}
