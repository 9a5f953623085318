//! The server stopped while a lock is held and threads wait for it, then
//! started again on the same port (without persistence, so it comes back
//! empty). While it is down the waiters keep waiting, and every call that
//! does not wait fails within the configured timeouts, as does a wait
//! whose own deadline passes (promise 4); once it is back one waiter gets
//! the lock, then the other, with no error; the holder learns that its
//! lock is gone (promise 5); and the same client works again, wake-ups
//! included, with no restart of the client (promise 3).

use std::thread;
use std::time::{Duration, Instant};

use redhold::{Error, LossCause};

use crate::bounded;
use crate::common::{channel_of, wait_for_subscribers, PROMPTLY};
use crate::support::RedisServer;

const CONNECT_TIMEOUT: Duration = Duration::from_millis(500);
const RESPONSE_TIMEOUT: Duration = Duration::from_millis(500);
const RETRIES: u32 = 2;
const RETRY_DELAY: Duration = Duration::from_millis(50);

/// The longest one call may take against an unreachable server: every
/// attempt may spend the connect timeout and then the response timeout.
fn call_bound() -> Duration {
    (CONNECT_TIMEOUT + RESPONSE_TIMEOUT) * (RETRIES + 1) + RETRY_DELAY * RETRIES
}

/// Slack for a busy machine on top of [`call_bound`].
const SLACK: Duration = Duration::from_secs(2);

/// Runs `call` and checks that it failed with a connection error within
/// the bound.
#[track_caller]
fn fails_in_time<T: std::fmt::Debug>(what: &str, call: impl FnOnce() -> redhold::Result<T>) {
    let started = Instant::now();
    let result = call();
    let took = started.elapsed();
    match result {
        Err(e) => assert!(
            e.is_connection_error(),
            "{what}: expected a connection error, got {e:?}"
        ),
        Ok(value) => panic!("{what} succeeded with the server down: {value:?}"),
    }
    assert!(
        took <= call_bound() + SLACK,
        "{what} took {took:?} to fail, bound {:?}",
        call_bound()
    );
}

#[test]
fn waiters_ride_out_a_restart_and_other_calls_fail_in_time() {
    let mut server = RedisServer::start();
    let client = server
        .builder()
        .connect_timeout(CONNECT_TIMEOUT)
        .response_timeout(RESPONSE_TIMEOUT)
        .retry_attempts(RETRIES)
        .retry_delay(RETRY_DELAY)
        .build()
        .expect("client");
    let name = "restart";
    let lock = client.lock(name);
    let guard = lock.lock().expect("lock before the outage");

    // Each waiter keeps its guard a moment, so that the other must wait
    // for its release too.
    let waiters: Vec<_> = (0..2)
        .map(|i| {
            let lock = lock.clone();
            bounded::spawn(&format!("waiter {i}"), move || {
                lock.lock().map(|guard| {
                    let got = Instant::now();
                    thread::sleep(Duration::from_millis(200));
                    let releasing = Instant::now();
                    (got, releasing, guard.unlock())
                })
            })
        })
        .collect();
    wait_for_subscribers(&server, &channel_of(name), 1);
    for waiter in &waiters {
        waiter.assert_running_for(Duration::from_millis(100));
    }

    server.stop();
    let stopped = Instant::now();

    // The waiters hear the pub/sub connection drop, find Redis away, and
    // keep waiting.
    fails_in_time("is_locked", || lock.is_locked());
    fails_in_time("try_lock", || lock.try_lock().map(|g| g.is_some()));
    // A wait's own deadline ends it, with an error that says why.
    let started = Instant::now();
    match lock.try_lock_for(Duration::from_secs(1)) {
        Err(ref e @ Error::Unreachable { .. }) => assert!(e.is_connection_error()),
        other => panic!("try_lock_for with the server down: {other:?}"),
    }
    let took = started.elapsed();
    assert!(
        took >= Duration::from_secs(1) && took <= Duration::from_secs(1) + call_bound() + SLACK,
        "try_lock_for(1 s) with the server down took {took:?}"
    );
    fails_in_time("hold_count", || lock.hold_count());
    fails_in_time("force_unlock", || lock.force_unlock());
    let started = Instant::now();
    match server.builder().connect_timeout(CONNECT_TIMEOUT).build() {
        Err(Error::Connect { .. }) => {}
        other => panic!("a new client with the server down: {other:?}"),
    }
    assert!(started.elapsed() <= CONNECT_TIMEOUT + SLACK);

    // Long enough for the subscriber's reconnect backoff to reach its cap.
    thread::sleep(Duration::from_secs(2).saturating_sub(stopped.elapsed()));
    for waiter in &waiters {
        waiter.assert_running_for(Duration::from_millis(10));
    }
    let back = Instant::now();
    server.start_again();

    // Both waiters get the lock, one after the other, with no error.
    let mut sections = Vec::new();
    for waiter in waiters {
        match waiter.join_within(PROMPTLY + PROMPTLY) {
            Ok((got, releasing, unlocked)) => {
                unlocked.expect("a waiter's unlock after the restart");
                assert!(got >= back, "a waiter got the lock with the server down");
                sections.push((got, releasing));
            }
            Err(e) => panic!("a waiter failed across the restart: {}", e.report()),
        }
    }
    sections.sort();
    assert!(
        sections[0].1 <= sections[1].0,
        "the waiters' sections overlap: {sections:?}"
    );

    // The restarted server has no data: the hold is gone, and the release
    // says so instead of pretending it worked.
    match guard.unlock() {
        Err(Error::LockLost { lock, cause, .. }) => {
            assert_eq!(lock, name);
            assert_eq!(cause, LossCause::Vanished, "the restart wiped it");
        }
        other => panic!("releasing a lock the restart wiped: {other:?}"),
    }

    // The same client hands a lock over from one thread to another, woken
    // by pub/sub (the lease is 30 s, so a prompt hand-over is a wake-up).
    let after = client.lock("restart-after");
    let holder = after.lock().expect("lock after the restart");
    let waiter = {
        let after = after.clone();
        bounded::spawn("waiter after the restart", move || {
            let guard = after.lock().expect("waiter after the restart: lock");
            let acquired = Instant::now();
            guard.unlock().expect("waiter after the restart: unlock");
            acquired
        })
    };
    waiter.assert_running_for(Duration::from_millis(700));
    holder.unlock().expect("unlock after the restart");
    let released = Instant::now();
    let waited = waiter.join_within(PROMPTLY).duration_since(released);
    assert!(waited < PROMPTLY, "the hand-over took {waited:?}");
    assert!(!server.exists("restart-after"));
}
