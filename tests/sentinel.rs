//! Locks through Redis Sentinel (a master, one replica, three sentinels, all
//! real processes): they work, and after the master is killed the same
//! clients, never rebuilt, work against the promoted replica within 10 s of
//! the failover, wake-ups included.
#![cfg(feature = "sentinel")]

mod bounded;
mod support;

use std::time::{Duration, Instant};

use redhold::Client;
use support::sentinel::{SentinelSetup, MASTER_NAME};

/// Generous bound for anything that should take milliseconds; far below the
/// 30 s watchdog timeout, so meeting it proves a wake-up, not an expiry.
const PROMPTLY: Duration = Duration::from_secs(5);

/// How long the sentinels may take to promote the replica (about 2.6 s here).
const FAILOVER_LIMIT: Duration = Duration::from_secs(30);

/// How soon after the failover the clients must work again.
const RECOVERY_LIMIT: Duration = Duration::from_secs(10);

fn client(setup: &SentinelSetup) -> Client {
    Client::builder()
        .sentinel(setup.sentinel_urls(), MASTER_NAME)
        .connect_timeout(Duration::from_secs(1))
        .response_timeout(Duration::from_secs(1))
        .build()
        .unwrap_or_else(|e| panic!("sentinel client for {:?}: {e}", setup.sentinel_urls()))
}

/// Holds `name` on `holder`, blocks a waiter on `waiter`, releases, and
/// checks that the waiter gets it promptly.
fn waiter_is_woken(holder: &Client, waiter: &Client, name: &str) {
    let guard = holder.lock(name).lock().expect("holder");
    let lock = waiter.lock(name);
    let blocked = bounded::spawn("waiter", move || {
        let guard = lock.lock().map_err(|e| e.to_string())?;
        guard.unlock().map_err(|e| e.to_string())
    });
    blocked.assert_running_for(Duration::from_millis(300));
    let released = Instant::now();
    guard.unlock().expect("release");
    blocked
        .join_within(PROMPTLY)
        .unwrap_or_else(|e| panic!("waiter on {name}: {e}"));
    let took = released.elapsed();
    assert!(took < PROMPTLY, "{name}: woken {took:?} after the release");
}

#[test]
fn locks_follow_the_master_through_a_failover() {
    let mut setup = SentinelSetup::start();
    let (a, b) = (client(&setup), client(&setup));

    // Before: locks land on the master and replicate to the replica.
    let guard = a.lock("before").lock().expect("lock through sentinel");
    assert_eq!(setup.master.cmd::<i64>(&["EXISTS", "before"]), 1);
    assert!(
        b.lock("before").try_lock().expect("try_lock").is_none(),
        "a second client got a held lock"
    );
    guard.unlock().expect("unlock");
    assert_eq!(setup.master.cmd::<i64>(&["EXISTS", "before"]), 0);
    {
        let _read = a
            .read_write_lock("rw-before")
            .read()
            .lock()
            .expect("read lock");
        let _fair = a.fair_lock("fair-before").lock().expect("fair lock");
        let _fenced = a.fenced_lock("fenced-before").lock().expect("fenced lock");
    }
    waiter_is_woken(&a, &b, "wake-before");

    // The master dies; the sentinels promote the replica.
    let killed = Instant::now();
    setup.kill_master();
    let failover = setup.wait_for_failover(FAILOVER_LIMIT);
    eprintln!("failover announced {failover:?} after the kill");

    // The same clients work again within 10 s of the failover. Calls may
    // fail while they find the new master; each failure is retried.
    let recovered = {
        let (a, b) = (a.clone(), b.clone());
        bounded::spawn("recovery", move || {
            let since_failover = Instant::now();
            let mut last_errors = Vec::new();
            for c in [&a, &b] {
                loop {
                    match c.lock("after").try_lock() {
                        Ok(Some(guard)) => match guard.unlock() {
                            Ok(()) => break,
                            Err(e) => last_errors.push(format!("unlock: {e}")),
                        },
                        Ok(None) => last_errors.push("held by somebody".to_owned()),
                        Err(e) => last_errors.push(e.to_string()),
                    }
                    if since_failover.elapsed() > RECOVERY_LIMIT {
                        last_errors.reverse();
                        last_errors.truncate(5);
                        return Err(format!(
                            "no lock within {RECOVERY_LIMIT:?} of the failover; last errors: {last_errors:#?}"
                        ));
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
            Ok(since_failover.elapsed())
        })
    }
    .join_within(FAILOVER_LIMIT + RECOVERY_LIMIT)
    .unwrap_or_else(|e| panic!("{e}"));
    eprintln!(
        "clients recovered {recovered:?} after the failover ({:?} after the kill)",
        killed.elapsed()
    );

    // After: every lock kind works on the promoted replica, and wake-ups
    // (a pub/sub connection of its own) arrive from it.
    let guard = a.lock("after").lock().expect("lock after the failover");
    assert_eq!(setup.replica.cmd::<i64>(&["EXISTS", "after"]), 1);
    assert!(
        b.lock("after").try_lock().expect("try_lock").is_none(),
        "a second client got a held lock after the failover"
    );
    drop(guard);
    {
        let _read = a
            .read_write_lock("rw-after")
            .read()
            .lock()
            .expect("read lock");
        let _fair = a.fair_lock("fair-after").lock().expect("fair lock");
        let _fenced = a.fenced_lock("fenced-after").lock().expect("fenced lock");
        let _spin = a.spin_lock("spin-after").lock().expect("spin lock");
    }
    waiter_is_woken(&a, &b, "wake-after");
    waiter_is_woken(&b, &a, "wake-after-2");
}
