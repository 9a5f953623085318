//! Waiting for a held lock: woken by the release message long before the TTL,
//! bounded waits that give up on time, force_unlock waking waiters, and a
//! wait that ends when the holder's lease runs out without any message.
//!
//! Holders here keep the default 30 s TTL, so a waiter that returns within a
//! few seconds can only have been woken by the release message.

mod bounded;
mod support;

use std::time::{Duration, Instant};

use support::RedisServer;

/// How long a waiter gets to notice a release: far below the 30 s TTL, far
/// above anything a loaded machine needs.
const WAKE_LIMIT: Duration = Duration::from_secs(5);

/// How long a waiter must stay blocked to count as parked.
const STAYS_BLOCKED: Duration = Duration::from_millis(300);

#[test]
fn release_wakes_a_waiter_on_another_client() {
    let server = RedisServer::start();
    let holder = server.client().lock("contended");
    let waiter_lock = server.client().lock("contended");

    let guard = holder.lock().unwrap();
    let waiter = bounded::spawn("waiter", move || {
        let guard = waiter_lock.lock().expect("lock after release");
        let acquired = Instant::now();
        let count = waiter_lock.hold_count().expect("hold_count");
        guard.unlock().expect("release");
        (acquired, count)
    });
    waiter.assert_running_for(STAYS_BLOCKED);

    let released = Instant::now();
    guard.unlock().unwrap();
    let (acquired, count) = waiter.join_within(WAKE_LIMIT);
    let woken_after = acquired.saturating_duration_since(released);
    assert!(
        woken_after < WAKE_LIMIT,
        "waiter took {woken_after:?} after the release"
    );
    assert_eq!(count, 1, "the waiter held the lock once");
}

#[test]
fn release_wakes_a_waiter_on_the_same_client() {
    let server = RedisServer::start();
    let client = server.client();
    let holder = client.lock("local");
    let waiter_lock = client.lock("local");

    let guard = holder.lock().unwrap();
    let waiter = bounded::spawn("local-waiter", move || {
        let guard = waiter_lock.lock().expect("lock after release");
        let acquired = Instant::now();
        drop(guard);
        acquired
    });
    waiter.assert_running_for(STAYS_BLOCKED);
    let released = Instant::now();
    drop(guard);
    let acquired = waiter.join_within(WAKE_LIMIT);
    assert!(acquired.saturating_duration_since(released) < WAKE_LIMIT);
}

#[test]
fn every_waiter_gets_the_lock_in_turn() {
    const WAITERS: usize = 4;
    let server = RedisServer::start();
    let holder = server.client().lock("queue");
    let waiting_client = server.client();

    let guard = holder.lock().unwrap();
    let waiters: Vec<_> = (0..WAITERS)
        .map(|i| {
            let lock = waiting_client.lock("queue");
            bounded::spawn(&format!("waiter-{i}"), move || {
                let guard = lock.lock().expect("lock");
                std::thread::sleep(Duration::from_millis(50));
                guard.unlock().expect("release");
            })
        })
        .collect();
    std::thread::sleep(STAYS_BLOCKED);
    drop(guard);
    // Each release must wake the next local waiter: a lost wake-up would
    // leave one parked until the 30 s TTL.
    for waiter in waiters {
        waiter.join_within(WAKE_LIMIT * 2);
    }
    assert_eq!(server.cmd::<i64>(&["EXISTS", "queue"]), 0);
}

#[test]
fn try_lock_for_gives_up_on_time() {
    let server = RedisServer::start();
    let holder = server.client().lock("busy");
    let other = server.client().lock("busy");
    let _guard = holder.lock().unwrap();

    let wait = Duration::from_millis(500);
    let started = Instant::now();
    let got = other.try_lock_for(wait).unwrap();
    let waited = started.elapsed();
    assert!(got.is_none(), "the lock is held elsewhere");
    assert!(
        waited >= wait,
        "gave up after {waited:?}, before the {wait:?} wait"
    );
    assert!(
        waited < wait + Duration::from_secs(3),
        "gave up only after {waited:?} for a {wait:?} wait"
    );

    let started = Instant::now();
    assert!(other.try_lock().unwrap().is_none());
    let lease = Duration::from_secs(5);
    assert!(other
        .try_lock_for_with_lease(wait, lease)
        .unwrap()
        .is_none());
    assert!(started.elapsed() < wait + Duration::from_secs(3));
    assert_eq!(other.hold_count().unwrap(), 0, "nothing was taken");
}

#[test]
fn try_lock_for_succeeds_when_released_in_time() {
    let server = RedisServer::start();
    let holder = server.client().lock("soon-free");
    let other = server.client().lock("soon-free");

    let guard = holder.lock().unwrap();
    let waiter = bounded::spawn("bounded-waiter", move || {
        let got = other
            .try_lock_for_with_lease(Duration::from_secs(20), Duration::from_secs(7))
            .expect("try_lock_for");
        let acquired = Instant::now();
        let ttl = other.remaining_lease().expect("remaining_lease");
        (got.is_some(), acquired, ttl)
    });
    waiter.assert_running_for(STAYS_BLOCKED);
    let released = Instant::now();
    drop(guard);
    let (got, acquired, ttl) = waiter.join_within(WAKE_LIMIT);
    assert!(got, "released well within the wait");
    assert!(acquired.saturating_duration_since(released) < WAKE_LIMIT);
    let ttl = ttl.expect("locked by the waiter when asked");
    assert!(
        ttl <= Duration::from_secs(7),
        "the waiter's lease is 7 s, TTL {ttl:?}"
    );
}

#[test]
fn waiter_takes_the_lock_when_the_holders_lease_runs_out() {
    let server = RedisServer::start();
    let holder = server.client().lock("expiring");
    let other = server.client().lock("expiring");

    // Never released, so no message: only the TTL bounds the wait.
    let lease = Duration::from_millis(400);
    holder.lock_with_lease(lease).unwrap().leak();
    let started = Instant::now();
    let got = other
        .try_lock_for(Duration::from_secs(10))
        .unwrap()
        .is_some();
    let waited = started.elapsed();
    assert!(got, "the lease ran out within the wait");
    assert!(
        waited < Duration::from_secs(4),
        "a waiter parks no longer than the holder's TTL, waited {waited:?}"
    );
    assert_eq!(server.cmd::<i64>(&["EXISTS", "expiring"]), 0);
}

#[test]
fn force_unlock_wakes_waiters() {
    let server = RedisServer::start();
    let holder = server.client().lock("stuck");
    let waiter_lock = server.client().lock("stuck");
    let operator = server.client().lock("stuck");

    assert!(!operator.force_unlock().unwrap(), "nothing to delete yet");
    let guard = holder.lock().unwrap();
    let waiter = bounded::spawn("waiter", move || {
        let guard = waiter_lock.lock().expect("lock after force_unlock");
        let acquired = Instant::now();
        guard.unlock().expect("release");
        acquired
    });
    waiter.assert_running_for(STAYS_BLOCKED);

    let forced = Instant::now();
    assert!(operator.force_unlock().unwrap(), "a lock was deleted");
    let acquired = waiter.join_within(WAKE_LIMIT);
    assert!(acquired.saturating_duration_since(forced) < WAKE_LIMIT);

    // The original holder finds out on release.
    let err = guard.unlock().expect_err("the lock was taken away");
    assert!(matches!(err, redhold::Error::LockLost { .. }), "{err:?}");
    assert!(!operator.force_unlock().unwrap());
}

#[test]
fn try_lock_for_accepts_an_endless_wait() {
    let server = RedisServer::start();
    let holder = server.client().lock("forever");
    let other = server.client().lock("forever");

    let guard = holder.lock().unwrap();
    // `Duration::MAX` is the natural way to say "no time limit".
    let waiter = bounded::spawn("endless", move || {
        other
            .try_lock_for(Duration::MAX)
            .map(|g| g.is_some())
            .map_err(|e| e.to_string())
    });
    waiter.assert_running_for(STAYS_BLOCKED);
    drop(guard);
    assert_eq!(waiter.join_within(WAKE_LIMIT), Ok(true));
}

#[test]
fn local_waiters_share_one_subscription() {
    let server = RedisServer::start();
    let holder = server.client().lock("popular");
    let client = server.client();
    let guard = holder.lock().unwrap();

    let waiters: Vec<_> = (0..3)
        .map(|i| {
            let lock = client.lock("popular");
            bounded::spawn(&format!("waiter-{i}"), move || lock.lock().map(drop))
        })
        .collect();
    waiters[0].assert_running_for(STAYS_BLOCKED);
    let numsub: (String, i64) =
        server.cmd(&["PUBSUB", "NUMSUB", "redisson_lock__channel:{popular}"]);
    assert_eq!(numsub.1, 1, "one subscription per client and channel");

    drop(guard);
    for waiter in waiters {
        waiter.join_within(WAKE_LIMIT).expect("lock");
    }
}

/// A thread that releases and at once locks again does not take the lock
/// back from a local thread that was already waiting for it: the woken
/// waiter goes first (threads of one client take turns).
#[test]
fn a_parked_local_waiter_goes_before_a_thread_that_comes_straight_back() {
    let server = RedisServer::start();
    let client = server.client();
    let lock = client.lock("turns");
    let order = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));

    let first = lock.lock().expect("first hold");
    let waiter = {
        let lock = lock.clone();
        let order = std::sync::Arc::clone(&order);
        bounded::spawn("waiter", move || {
            let guard = lock.lock().expect("waiter's lock");
            order.lock().unwrap().push("waiter");
            std::thread::sleep(Duration::from_millis(50));
            drop(guard);
        })
    };
    // The waiter has failed its first try and subscribed; give it time to
    // park after its second try.
    let subscribed = bounded::wait_until(WAKE_LIMIT, || {
        server
            .cmd::<(String, u32)>(&["PUBSUB", "NUMSUB", "redisson_lock__channel:{turns}"])
            .1
            == 1
    });
    assert!(subscribed.is_some(), "the waiter never subscribed");
    std::thread::sleep(STAYS_BLOCKED);

    drop(first);
    let again = lock.lock().expect("lock again");
    order.lock().unwrap().push("releaser");
    drop(again);
    waiter.join_within(WAKE_LIMIT);
    assert_eq!(*order.lock().unwrap(), ["waiter", "releaser"]);
}
