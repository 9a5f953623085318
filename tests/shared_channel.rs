//! Locks whose names share one pub/sub channel: Redisson's naming gives `x`
//! and `{x}` the same channel (`redisson_lock__channel:{x}`). They are two
//! locks all the same: a release of one must never hand the lock to a
//! waiter of the other, nor spend its wake-up on one.

mod bounded;
mod support;

use std::time::Duration;

use support::RedisServer;

/// How long a waiter must stay blocked to count as parked.
const STAYS_BLOCKED: Duration = Duration::from_millis(300);

/// Far above what a loaded machine needs to wake a waiter, far below the
/// holders' 30 s TTL: a waiter done within it was woken by the release.
const WAKE_LIMIT: Duration = Duration::from_secs(5);

/// The lock's hash as (field, holds) pairs.
fn holders(server: &RedisServer, name: &str) -> Vec<(String, i64)> {
    let mut pairs: Vec<(String, i64)> = server.cmd(&["HGETALL", name]);
    pairs.sort();
    pairs
}

/// Thread A of a client releases `x` while thread W of the same client
/// waits for `{x}`, which another client holds: the release must not hand
/// `x` to W (W's guard would stand for a field written into hash `x`,
/// while the other client holds `{x}`).
#[test]
fn a_release_never_hands_the_lock_to_a_waiter_of_another_lock_on_its_channel() {
    let server = RedisServer::start();
    let client = server.client();
    let other = server.client();
    for round in 0..3 {
        let (plain_name, braced_name) = (format!("x{round}"), format!("{{x{round}}}"));
        let braced = other.lock(braced_name.as_str()).lock().unwrap();
        let plain = client.lock(plain_name.as_str()).lock().unwrap();
        let lock = client.lock(braced_name.as_str());
        let waiter = bounded::spawn("waiter-of-{x}", move || {
            let guard = lock.lock().expect("the waiter of {x} gets it in the end");
            let held = guard.is_held();
            drop(guard);
            held
        });
        waiter.assert_running_for(STAYS_BLOCKED);
        drop(plain);
        // `{x}` is still the other client's: its waiter must go on waiting,
        // and hash `x` must be gone with its only holder.
        waiter.assert_running_for(STAYS_BLOCKED);
        assert_eq!(
            holders(&server, &plain_name),
            vec![],
            "round {round}: hash {plain_name} keeps a field after its only holder released it"
        );
        assert_eq!(
            holders(&server, &braced_name).len(),
            1,
            "round {round}: {braced_name} has one holder, the other client"
        );
        drop(braced);
        assert!(
            waiter.join_within(WAKE_LIMIT),
            "round {round}: its guard was held"
        );
        assert!(!server.exists(&braced_name) && !server.exists(&plain_name));
    }
    assert_eq!(client.stats().direct_handoffs, 0, "nothing was handed over");
}

/// Two threads of one client wait, the older one for `{x}` and the younger
/// one for `x`; another client releases `x`, and its one message on the
/// shared channel must reach the waiter of `x`, not be spent on the waiter
/// of `{x}` (which would find `{x}` still taken and park again, leaving the
/// waiter of `x` asleep until the TTL it saw, 30 s).
#[test]
fn a_release_message_on_a_shared_channel_reaches_a_waiter_of_the_released_lock() {
    let server = RedisServer::start();
    let client = server.client();
    let other = server.client();
    for round in 0..3 {
        let (plain_name, braced_name) = (format!("y{round}"), format!("{{y{round}}}"));
        let braced = other.lock(braced_name.as_str()).lock().unwrap();
        let plain = other.lock(plain_name.as_str()).lock().unwrap();
        let older = {
            let lock = client.lock(braced_name.as_str());
            bounded::spawn("waiter-of-{y}", move || drop(lock.lock().unwrap()))
        };
        older.assert_running_for(STAYS_BLOCKED);
        let younger = {
            let lock = client.lock(plain_name.as_str());
            bounded::spawn("waiter-of-y", move || drop(lock.lock().unwrap()))
        };
        younger.assert_running_for(STAYS_BLOCKED);
        drop(plain);
        younger.join_within(WAKE_LIMIT);
        older.assert_running_for(STAYS_BLOCKED);
        drop(braced);
        older.join_within(WAKE_LIMIT);
    }
}

/// The same with the release coming from the waiters' own client: a
/// direct hand-over may go to the waiter of `x` only, and when the release
/// announces instead, the waiter of `x` is the one woken.
#[test]
fn a_local_release_wakes_or_hands_over_to_a_waiter_of_the_released_lock() {
    let server = RedisServer::start();
    let client = server.client();
    let other = server.client();
    for round in 0..3 {
        let (plain_name, braced_name) = (format!("z{round}"), format!("{{z{round}}}"));
        let braced = other.lock(braced_name.as_str()).lock().unwrap();
        let plain = client.lock(plain_name.as_str()).lock().unwrap();
        let older = {
            let lock = client.lock(braced_name.as_str());
            bounded::spawn("waiter-of-{z}", move || drop(lock.lock().unwrap()))
        };
        older.assert_running_for(STAYS_BLOCKED);
        let younger = {
            let lock = client.lock(plain_name.as_str());
            bounded::spawn("waiter-of-z", move || {
                let guard = lock.lock().unwrap();
                assert_eq!(lock.hold_count().unwrap(), 1);
                drop(guard);
            })
        };
        younger.assert_running_for(STAYS_BLOCKED);
        drop(plain);
        younger.join_within(WAKE_LIMIT);
        older.assert_running_for(STAYS_BLOCKED);
        assert_eq!(holders(&server, &braced_name).len(), 1);
        drop(braced);
        older.join_within(WAKE_LIMIT);
    }
}
