//! Leases: a lock taken with a lease expires after it (the watchdog never
//! renews it), and releasing it afterwards reports `Error::LockLost` without
//! touching whoever holds the lock by then.

mod bounded;
mod support;

use std::time::{Duration, Instant};

use redhold::{Error, LossCause};
use support::RedisServer;

#[test]
fn leased_lock_expires_and_release_reports_it_lost() {
    let server = RedisServer::start();
    let client = server.client();
    let lock = client.lock("leased");
    let lease = Duration::from_millis(500);

    let guard = lock.lock_with_lease(lease).unwrap();
    let taken = Instant::now();
    let ttl: i64 = server.cmd(&["PTTL", "leased"]);
    assert!(ttl > 0 && ttl <= 500, "PTTL {ttl} for a 500 ms lease");

    let gone_after = bounded::wait_until(Duration::from_secs(5), || !server.exists("leased"))
        .expect("the key expires after its lease");
    let lived = taken.elapsed();
    assert!(
        lived >= Duration::from_millis(400),
        "key vanished after {lived:?}, before the 500 ms lease (polled {gone_after:?})"
    );
    assert!(!guard.is_held(), "the guard knows its lease ran out");

    match guard.unlock() {
        Err(Error::LockLost { lock, cause, .. }) => {
            assert_eq!(lock, "leased");
            assert_eq!(cause, LossCause::LeaseExpired);
        }
        other => panic!("release after the lease: expected LockLost, got {other:?}"),
    }
}

#[test]
fn watchdog_does_not_renew_a_leased_lock() {
    let server = RedisServer::start();
    // A watchdog renewing every ~333 ms would keep the key alive forever.
    let client = server.client_with_watchdog(Duration::from_secs(1));
    let lock = client.lock("leased-watched");
    let guard = lock.lock_with_lease(Duration::from_millis(600)).unwrap();
    bounded::wait_until(Duration::from_secs(4), || !server.exists("leased-watched"))
        .expect("a leased lock expires even with a watchdog running");
    drop(guard);
}

#[test]
fn late_release_leaves_the_next_holder_alone() {
    let server = RedisServer::start();
    let first = server.client().lock("relay");
    let second = server.client().lock("relay");

    let stale = first.lock_with_lease(Duration::from_millis(300)).unwrap();
    let taken = second
        .try_lock_for(Duration::from_secs(5))
        .unwrap()
        .expect("free once the lease ran out");
    let before: std::collections::HashMap<String, String> = server.cmd(&["HGETALL", "relay"]);
    assert_eq!(before.len(), 1);

    let err = stale.unlock().expect_err("our lease ran out");
    assert!(matches!(err, Error::LockLost { .. }), "{err:?}");
    assert!(err.to_string().contains("relay"), "{err}");
    let after: std::collections::HashMap<String, String> = server.cmd(&["HGETALL", "relay"]);
    assert_eq!(
        after, before,
        "the late release must not touch the new holder"
    );
    assert_eq!(second.hold_count().unwrap(), 1);

    taken.unlock().unwrap();
    assert!(!server.exists("relay"));
}

#[test]
fn dropping_an_expired_guard_is_harmless() {
    let server = RedisServer::start();
    let first = server.client().lock("drop-late");
    let second = server.client().lock("drop-late");
    let stale = first.lock_with_lease(Duration::from_millis(200)).unwrap();
    let taken = second
        .try_lock_for(Duration::from_secs(5))
        .unwrap()
        .expect("free once the lease ran out");
    drop(stale);
    assert_eq!(second.hold_count().unwrap(), 1, "still held by the second");
    taken.unlock().unwrap();
}
