//! A holder *process* killed with SIGKILL in the middle of its hold: nothing
//! releases its lock, so the lock must expire on its own (promise 2), and no
//! earlier than Redis says it may (promise 1).
//!
//! The holder is this test executable run again as a child process (the test
//! `child_holder` below, which does nothing in a normal run).

use std::io::Write;
use std::thread;
use std::time::{Duration, Instant};

use crate::bounded;
use crate::child::ChildTest;
use crate::common::PROMPTLY;
use crate::support::RedisServer;

const URL_ENV: &str = "REDHOLD_TEST_HOLDER_URL";
const LOCK_ENV: &str = "REDHOLD_TEST_HOLDER_LOCK";

/// The holder's watchdog timeout: its lock lives this long after the last
/// renewal, and is renewed every third of it.
const WATCHDOG: Duration = Duration::from_secs(2);

/// How late a renewal pass may run on a busy machine.
const SCHEDULING_SLACK: Duration = Duration::from_millis(500);

/// Redis keeps expiry times in whole milliseconds.
const CLOCK_SLACK: Duration = Duration::from_millis(5);

/// The child: takes the lock with the watchdog, says "HELD", and sleeps
/// until the parent kills it. Does nothing unless run by the parent test.
#[test]
fn child_holder() {
    let (Ok(url), Ok(name)) = (std::env::var(URL_ENV), std::env::var(LOCK_ENV)) else {
        return;
    };
    let client = redhold::Client::builder()
        .url(url)
        .watchdog_timeout(WATCHDOG)
        .build()
        .expect("child: cannot build a client");
    let _guard = client
        .lock(name)
        .lock()
        .expect("child: cannot take the lock");
    println!("HELD");
    std::io::stdout()
        .flush()
        .expect("child: cannot write to stdout");
    thread::sleep(Duration::from_secs(60));
    panic!("child_holder was not killed within 60 s");
}

#[test]
fn a_killed_holders_lock_expires_after_the_watchdog_timeout_and_not_before() {
    let server = RedisServer::start();
    let name = "holder-killed";
    let url = server.url();
    let mut holder = ChildTest::spawn(
        "holder_killed::child_holder",
        &[(URL_ENV, url.as_str()), (LOCK_ENV, name)],
    );
    holder
        .wait_for_line("HELD", Duration::from_secs(30))
        .expect("the child process never reported holding the lock");

    // Outlive a whole watchdog timeout: the lock is still there only because
    // the child's watchdog renewed it, so its expiry now comes from renewals.
    thread::sleep(WATCHDOG + WATCHDOG / 2);
    assert!(
        server.exists(name),
        "the child's watchdog did not keep its lock alive"
    );

    // Another process (this one) waits for the lock.
    let client = server.client();
    let waiter = {
        let lock = client.lock(name);
        bounded::spawn("waiter", move || {
            let guard = lock.lock().expect("waiter: lock");
            let acquired = Instant::now();
            guard.unlock().expect("waiter: unlock");
            acquired
        })
    };
    waiter.assert_running_for(Duration::from_millis(300));

    holder.kill();
    let killed = Instant::now();
    let pttl: i64 = server.cmd(&["PTTL", name]);
    assert!(
        pttl > 0,
        "the lock must outlive its killed holder, but PTTL is {pttl}"
    );
    let remaining = Duration::from_millis(pttl as u64);
    // The last renewal set the TTL to WATCHDOG at most WATCHDOG / 3 (plus a
    // late pass) before the kill, so at least this much of it was left.
    let least_left = WATCHDOG - WATCHDOG / 3 - SCHEDULING_SLACK;
    assert!(
        remaining >= least_left,
        "only {remaining:?} of the lease was left at the kill: renewals were late"
    );

    let acquired = waiter.join_within(WATCHDOG + PROMPTLY);
    let waited = acquired.duration_since(killed);
    // Not before: Redis kept the key for `remaining` after `killed` at least.
    assert!(
        waited + CLOCK_SLACK >= remaining,
        "the waiter got the lock {waited:?} after the kill, but it had {remaining:?} left"
    );
    assert!(
        waited >= least_left,
        "the lock was free after only {waited:?}"
    );
    // And not much after: the waiter sleeps no longer than the lock's TTL.
    assert!(
        waited <= WATCHDOG + PROMPTLY,
        "the waiter got the lock only {waited:?} after the kill"
    );
    assert!(!server.exists(name), "the waiter's release left the lock");
}
