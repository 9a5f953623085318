//! The pub/sub connection killed by the server (`CLIENT KILL TYPE pubsub`)
//! while a thread waits: the subscriber reconnects with backoff and
//! resubscribes, and the waiter still gets the lock promptly after the
//! release (promise 3), long before the 30 s lease would have run out.

use std::thread;
use std::time::{Duration, Instant};

use crate::bounded::{self, Bounded};
use crate::common::{channel_of, wait_for_subscribers, PROMPTLY};
use crate::support::RedisServer;

/// A holder that holds `name` on the calling thread, and a waiter for it on
/// another client and thread, parked on the lock's channel. The waiter's
/// thread returns when it got the lock.
fn held_and_awaited(
    server: &RedisServer,
    name: &str,
) -> (redhold::Client, redhold::LockGuard, Bounded<Instant>) {
    let holder = server.client();
    assert_eq!(holder.watchdog_timeout(), Duration::from_secs(30));
    let guard = holder.lock(name).lock().expect("holder: lock");
    let waiter = {
        let lock = server.client().lock(name);
        bounded::spawn("waiter", move || {
            let guard = lock.lock().expect("waiter: lock");
            let acquired = Instant::now();
            guard.unlock().expect("waiter: unlock");
            acquired
        })
    };
    wait_for_subscribers(server, &channel_of(name), 1);
    // Let the waiter park on the channel.
    waiter.assert_running_for(Duration::from_millis(200));
    (holder, guard, waiter)
}

/// Kills every pub/sub connection of the server.
fn kill_pubsub(server: &RedisServer) {
    let killed: i64 = server.cmd(&["CLIENT", "KILL", "TYPE", "pubsub"]);
    assert!(killed >= 1, "CLIENT KILL TYPE pubsub killed nothing");
}

#[test]
fn a_waiter_is_woken_by_a_release_after_the_resubscription() {
    let server = RedisServer::start();
    let name = "pubsub-killed-then-resubscribed";
    let (_holder, guard, waiter) = held_and_awaited(&server, name);
    kill_pubsub(&server);
    // The subscriber notices, reconnects and subscribes again.
    wait_for_subscribers(&server, &channel_of(name), 1);
    guard.unlock().expect("holder: unlock");
    let released = Instant::now();
    let waited = waiter.join_within(PROMPTLY).duration_since(released);
    assert!(waited < PROMPTLY, "waited {waited:?} after the release");
}

#[test]
fn repeated_kills_never_stop_the_subscriber() {
    let server = RedisServer::start();
    let name = "pubsub-killed-repeatedly";
    let channel = channel_of(name);
    let (_holder, guard, waiter) = held_and_awaited(&server, name);
    for _ in 0..5 {
        kill_pubsub(&server);
        wait_for_subscribers(&server, &channel, 1);
    }
    guard.unlock().expect("holder: unlock");
    let released = Instant::now();
    let waited = waiter.join_within(PROMPTLY).duration_since(released);
    assert!(waited < PROMPTLY, "waited {waited:?} after the release");
}

/// The release is published while the waiter's client cannot reconnect (the
/// server refuses new connections: `maxclients` is reached), so its message
/// is lost. The subscriber must keep trying with backoff, not in a tight
/// loop, and once it is subscribed again the waiter must re-check the lock.
#[test]
fn a_waiter_is_woken_after_its_release_was_missed_during_the_reconnect() {
    let server = RedisServer::start();
    let name = "pubsub-killed-release-missed";
    let (_holder, guard, waiter) = held_and_awaited(&server, name);

    // Commands from here go over one admin connection: new ones are refused.
    let mut admin = server.connection();
    let info: String = redis::cmd("INFO")
        .arg("clients")
        .query(&mut admin)
        .expect("INFO clients");
    let connected: i64 = info_field(&info, "connected_clients");
    // Full once the waiter's pub/sub connection is gone.
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxclients")
        .arg(connected - 1)
        .query(&mut admin)
        .expect("CONFIG SET maxclients");
    let rejected_before = rejected_connections(&mut admin);
    let killed: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("pubsub")
        .query(&mut admin)
        .expect("CLIENT KILL");
    assert_eq!(
        killed, 1,
        "expected to kill the waiter's pub/sub connection"
    );

    // Let the waiter see the connection drop and go back to waiting, then
    // release while nobody listens on the channel.
    thread::sleep(Duration::from_millis(300));
    guard
        .unlock()
        .expect("holder: unlock (over a pooled connection)");
    let released = Instant::now();
    thread::sleep(Duration::from_millis(700));
    let rejected = rejected_connections(&mut admin) - rejected_before;
    assert!(
        (1..=20).contains(&rejected),
        "the subscriber tried to reconnect {rejected} times in a second: \
         expected a few tries with backoff"
    );

    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxclients")
        .arg(10_000)
        .query(&mut admin)
        .expect("CONFIG SET maxclients");
    let waited = waiter.join_within(PROMPTLY).duration_since(released);
    assert!(
        waited < Duration::from_secs(1) + PROMPTLY,
        "waited {waited:?} after the release"
    );
}

fn rejected_connections(admin: &mut redis::Connection) -> i64 {
    let info: String = redis::cmd("INFO")
        .arg("stats")
        .query(admin)
        .expect("INFO stats");
    info_field(&info, "rejected_connections")
}

/// A numeric field of an INFO reply.
fn info_field(info: &str, field: &str) -> i64 {
    info.lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {field} in INFO: {info}"))
}
