//! Issue 33, defect 3: a direct hand-over to a thread of the same client
//! that asked for a shorter lease than the holder had. A waiter of another
//! client parked on the TTL it saw (the holder's long lease); once the
//! successor's short lease has run out (or the successor released), the
//! lock is free, and that waiter must get it within a bound, not when the
//! old TTL would have ended or its own wait runs out.

mod bounded;
mod support;

use std::time::{Duration, Instant};

use support::RedisServer;

/// The holder's lease: a waiter that sleeps on it would sleep for good.
const HOLDER_LEASE: Duration = Duration::from_secs(600);
/// The successor's lease: shorter than it holds, so Redis frees the lock
/// before the successor's own release.
const SUCCESSOR_LEASE: Duration = Duration::from_millis(300);
/// How long the successor keeps its guard.
const SUCCESSOR_HOLD: Duration = Duration::from_secs(1);
/// How long the other client's waiter waits at most.
const OTHER_WAIT: Duration = Duration::from_secs(10);
/// A waiter must get a free lock within this long (a wake-up takes
/// milliseconds; the rest is room for a loaded machine).
const BOUND: Duration = Duration::from_secs(3);

#[test]
fn another_clients_waiter_gets_a_lock_freed_after_a_hand_over_to_a_short_lease() {
    let server = RedisServer::start();
    let a = server.client();
    let b = server.client();
    let name = "handed-short";
    for _ in 0..5 {
        let before = a.stats().direct_handoffs;
        let guard = a.lock(name).lock_with_lease(HOLDER_LEASE).unwrap();
        let other = b.lock(name);
        let waiter = bounded::spawn("other client's waiter", move || {
            let got = other.try_lock_for(OTHER_WAIT).unwrap();
            got.map(|guard| {
                let at = Instant::now();
                drop(guard);
                at
            })
        });
        waiter.assert_running_for(Duration::from_millis(300));
        let own = a.lock(name);
        let successor = bounded::spawn("successor", move || {
            let got = own
                .try_lock_for_with_lease(OTHER_WAIT, SUCCESSOR_LEASE)
                .unwrap();
            if let Some(guard) = got {
                std::thread::sleep(SUCCESSOR_HOLD);
                // Its lease ran out before: the release may say so.
                let _ = guard.unlock();
            }
        });
        successor.assert_running_for(Duration::from_millis(300));
        drop(guard);
        // When the lock became free: the successor's lease ended.
        let released = Instant::now();
        let free = loop {
            if !server.exists(name) {
                break Instant::now();
            }
            assert!(
                released.elapsed() < OTHER_WAIT,
                "{name} still exists {OTHER_WAIT:?} after the release"
            );
            std::thread::sleep(Duration::from_millis(10));
        };
        let direct = a.stats().direct_handoffs > before;
        let got = waiter.join_within(OTHER_WAIT + Duration::from_secs(5));
        successor.join_within(Duration::from_secs(5));
        if !direct {
            // The other client was first this time: try again.
            continue;
        }
        match got {
            Some(at) => assert!(
                at.saturating_duration_since(free) <= BOUND,
                "the other client's waiter got {name} {:.1} s after it became free \
                 (a direct hand-over to a {SUCCESSOR_LEASE:?} lease; the holder's lease was \
                 {HOLDER_LEASE:?})",
                at.saturating_duration_since(free).as_secs_f64()
            ),
            None => panic!(
                "the other client's waiter gave up after {OTHER_WAIT:?}; {name} had been free \
                 for {:.1} s (a direct hand-over to a {SUCCESSOR_LEASE:?} lease; the holder's \
                 lease was {HOLDER_LEASE:?})",
                free.elapsed().as_secs_f64()
            ),
        }
        return;
    }
    panic!("five releases with a parked thread of the same client and no direct hand-over");
}

/// Issue 40, hole 2: the same hand-over on a lock key without expiry (PTTL
/// -1, as a foreign client or a user's `PERSIST` can leave it). A waiter
/// of another client that saw no expiry parks on the release message,
/// looking again only every watchdog timeout of its client; the hand-over
/// gives the lock the successor's short lease, so it now ends sooner than
/// that waiter was told, and the waiter must hear so.
#[test]
fn a_hand_over_that_gives_a_lock_without_expiry_a_lease_wakes_another_clients_waiter() {
    /// The other client's watchdog timeout: how long its waiter parks on a
    /// lock without expiry, far longer than its wait.
    const OTHER_WATCHDOG: Duration = Duration::from_secs(120);
    /// How long the other client's waiter waits at most: far shorter than
    /// its watchdog timeout, far longer than the successor's lease.
    const OTHER_WAIT: Duration = Duration::from_secs(20);

    let server = RedisServer::start();
    let a = server.client();
    let b = server.client_with_watchdog(OTHER_WATCHDOG);
    let name = "handed-no-expiry";
    for _ in 0..5 {
        let before = a.stats().direct_handoffs;
        let guard = a.lock(name).lock_with_lease(HOLDER_LEASE).unwrap();
        // The key now lives for ever, as one made without PEXPIRE does.
        let persisted: i64 = server.cmd(&["PERSIST", name]);
        assert_eq!(persisted, 1, "{name} had a TTL to remove");
        let other = b.lock(name);
        let waiter = bounded::spawn("other client's waiter", move || {
            let got = other.try_lock_for(OTHER_WAIT).unwrap();
            got.map(|guard| {
                let at = Instant::now();
                drop(guard);
                at
            })
        });
        let parked = bounded::wait_until(BOUND, || b.stats().parked_waiters == 1);
        assert!(parked.is_some(), "the other client's waiter did not park");
        let own = a.lock(name);
        let successor = bounded::spawn("successor", move || {
            let got = own
                .try_lock_for_with_lease(OTHER_WAIT, SUCCESSOR_LEASE)
                .unwrap();
            if let Some(guard) = got {
                std::thread::sleep(SUCCESSOR_HOLD);
                // Its lease ran out before: the release may say so.
                let _ = guard.unlock();
            }
        });
        let parked = bounded::wait_until(BOUND, || a.stats().parked_waiters == 1);
        assert!(parked.is_some(), "the successor did not park");
        drop(guard);
        let released = Instant::now();
        let free = loop {
            if !server.exists(name) {
                break Instant::now();
            }
            assert!(
                released.elapsed() < OTHER_WAIT,
                "{name} still exists {OTHER_WAIT:?} after the release"
            );
            std::thread::sleep(Duration::from_millis(10));
        };
        let direct = a.stats().direct_handoffs > before;
        let got = waiter.join_within(OTHER_WAIT + Duration::from_secs(5));
        successor.join_within(OTHER_WAIT + Duration::from_secs(5));
        if !direct {
            // The other client was first this time: try again.
            continue;
        }
        match got {
            Some(at) => assert!(
                at.saturating_duration_since(free) <= BOUND,
                "the other client's waiter got {name} {:.1} s after it became free (a direct \
                 hand-over gave a lock without expiry a {SUCCESSOR_LEASE:?} lease; the waiter's \
                 watchdog timeout is {OTHER_WATCHDOG:?})",
                at.saturating_duration_since(free).as_secs_f64()
            ),
            None => panic!(
                "the other client's waiter gave up after {OTHER_WAIT:?}; {name} had been free \
                 for {:.1} s (a direct hand-over gave a lock without expiry a \
                 {SUCCESSOR_LEASE:?} lease, and no message told the waiter, parked on 'no \
                 expiry' for its {OTHER_WATCHDOG:?} watchdog timeout)",
                free.elapsed().as_secs_f64()
            ),
        }
        return;
    }
    panic!("five releases with a parked thread of the same client and no direct hand-over");
}
