//! Waiting calls ride out an outage (promise 4): `lock()`,
//! `try_lock_for` and `lock_interruptibly` keep trying while Redis is
//! unreachable and take the lock once it is back. They give up only at
//! their own deadline (with [`Error::Unreachable`], never `Ok(None)`: the
//! lock's state was unknown), on interrupt or shutdown, or after the
//! client's outage tolerance. Calls that do not wait (`try_lock`,
//! `is_locked`) still fail fast.
//!
//! The servers run without persistence, so a restart wipes the locks: a
//! hold taken before the outage is gone after it, and the waiter finds the
//! lock free.

use std::thread;
use std::time::{Duration, Instant};

use redhold::{Error, Interrupt, Lock, LockKind};

use crate::bounded;
use crate::common::{channel_of, wait_for_subscribers, PROMPTLY};
use crate::fault_proxy::{Action, FaultProxy, Matcher, Rule};
use crate::support::RedisServer;

const CONNECT_TIMEOUT: Duration = Duration::from_millis(500);
const RESPONSE_TIMEOUT: Duration = Duration::from_millis(500);
const RETRIES: u32 = 2;
const RETRY_DELAY: Duration = Duration::from_millis(50);

/// How long the server stays down in the restart tests.
const OUTAGE: Duration = Duration::from_secs(3);

/// The longest one call may take against an unreachable server: every
/// attempt may spend the connect timeout and then the response timeout.
fn call_bound() -> Duration {
    (CONNECT_TIMEOUT + RESPONSE_TIMEOUT) * (RETRIES + 1) + RETRY_DELAY * RETRIES
}

/// Slack for a busy machine.
const SLACK: Duration = Duration::from_secs(2);

/// A client with short timeouts and the default outage tolerance (60 s).
fn client(server: &RedisServer) -> redhold::Client {
    builder(server).build().expect("client")
}

fn builder(server: &RedisServer) -> redhold::ClientBuilder {
    server
        .builder()
        .connect_timeout(CONNECT_TIMEOUT)
        .response_timeout(RESPONSE_TIMEOUT)
        .retry_attempts(RETRIES)
        .retry_delay(RETRY_DELAY)
}

/// Stops `server` for `down_for` and starts it again on a thread of its
/// own; returns when it is down. The thread, joined, gives the server back
/// and the moment its restart began (no guard can come before it).
fn outage(mut server: RedisServer, down_for: Duration) -> bounded::Bounded<(RedisServer, Instant)> {
    server.stop();
    bounded::spawn("outage", move || {
        thread::sleep(down_for);
        let restarting = Instant::now();
        server.start_again();
        (server, restarting)
    })
}

/// `lock()` parked on a lock another client holds; the server dies and
/// comes back empty after 3 s: the waiter gets the lock, with no error,
/// soon after the server is back. For every kind that waits (`hold` is the
/// kind the holder takes: a reader waits for a writer).
fn waiter_rides_out_a_restart<H: LockKind, K: LockKind>(
    hold: fn(&redhold::Client) -> Lock<H>,
    make: fn(&redhold::Client) -> Lock<K>,
) {
    let server = RedisServer::start();
    let holder_client = server.client();
    let name = make(&holder_client).name().to_owned();
    let held = hold(&holder_client).lock().expect("the holder's hold");
    let waiter_client = client(&server);
    let waiter = {
        let lock = make(&waiter_client);
        bounded::spawn("waiter", move || {
            let guard = lock.lock();
            let got = Instant::now();
            let outcome = guard.map(|guard| {
                let count = lock.hold_count();
                (guard.is_held(), count, guard.unlock())
            });
            (outcome, got)
        })
    };
    waiter.assert_running_for(Duration::from_millis(300));

    let stopped = Instant::now();
    let restart = outage(server, OUTAGE);
    // Down the whole outage, and never a guard meanwhile.
    waiter.assert_running_for(OUTAGE - Duration::from_millis(500));
    let (server, back) = restart.join_within(OUTAGE + PROMPTLY);

    let (outcome, got) = waiter.join_within(call_bound() + PROMPTLY);
    let (held_now, count, unlocked) = outcome.unwrap_or_else(|e| {
        panic!(
            "{name}: the waiter failed {:?} after the server stopped: {}",
            stopped.elapsed(),
            e.report()
        )
    });
    assert!(
        got >= back,
        "{name}: a guard before the server was started again"
    );
    assert!(held_now, "{name}: the waiter's guard is not held");
    assert_eq!(
        count.expect("hold_count"),
        1,
        "{name}: the waiter holds the lock once in Redis"
    );
    unlocked.expect("the waiter's unlock");
    assert!(
        !server.exists(&name),
        "{name}: the lock stays held after the waiter's release"
    );
    // The restart wiped the holder's hold: its release says so.
    match held.unlock() {
        Err(Error::LockLost { .. }) => {}
        other => panic!("{name}: the old holder's release: {other:?}"),
    }
}

#[test]
fn a_waiting_lock_rides_out_a_restart() {
    waiter_rides_out_a_restart(|c| c.lock("outage-plain"), |c| c.lock("outage-plain"));
}

#[test]
fn a_waiting_fair_lock_rides_out_a_restart() {
    waiter_rides_out_a_restart(
        |c| c.fair_lock("outage-fair"),
        |c| c.fair_lock("outage-fair"),
    );
}

#[test]
fn a_waiting_read_and_write_lock_ride_out_a_restart() {
    // A reader waits for a writer, and a writer for a reader.
    waiter_rides_out_a_restart(
        |c| c.read_write_lock("outage-rw").write(),
        |c| c.read_write_lock("outage-rw").read(),
    );
    waiter_rides_out_a_restart(
        |c| c.read_write_lock("outage-wr").read(),
        |c| c.read_write_lock("outage-wr").write(),
    );
}

#[test]
fn a_waiting_fenced_and_spin_lock_ride_out_a_restart() {
    waiter_rides_out_a_restart(
        |c| c.fenced_lock("outage-fenced"),
        |c| c.fenced_lock("outage-fenced"),
    );
    waiter_rides_out_a_restart(
        |c| c.spin_lock("outage-spin"),
        |c| c.spin_lock("outage-spin"),
    );
}

/// `lock()` called while the server is down: it waits, and gets the lock
/// once the server is back (about 2 s later).
#[test]
fn lock_called_while_the_server_is_down_waits_for_it() {
    let server = RedisServer::start();
    let client = client(&server);
    let lock = client.lock("outage-called-down");
    let restart = outage(server, Duration::from_secs(2));
    let waiter = bounded::spawn("caller", move || {
        let result = lock.lock().map(|guard| guard.unlock());
        (result, Instant::now())
    });
    let (server, back) = restart.join_within(Duration::from_secs(2) + PROMPTLY);
    let (result, got) = waiter.join_within(call_bound() + PROMPTLY);
    match result {
        Ok(unlocked) => unlocked.expect("unlock after the outage"),
        Err(e) => panic!("lock() called while the server was down: {}", e.report()),
    }
    assert!(got >= back, "a guard before the server was started again");
    assert!(!server.exists("outage-called-down"));
}

/// `try_lock_for(10 s)` spanning a 2 s outage gets the lock, well before
/// its deadline.
#[test]
fn try_lock_for_spanning_an_outage_gets_the_lock() {
    let server = RedisServer::start();
    let holder = server.client();
    let _held = holder
        .lock("outage-try-for")
        .lock()
        .expect("the holder's hold");
    let client = client(&server);
    let lock = client.lock("outage-try-for");
    let waiter = bounded::spawn("try_lock_for", move || {
        let started = Instant::now();
        let result = lock
            .try_lock_for(Duration::from_secs(10))
            .map(|guard| guard.map(|g| g.unlock()));
        (result, started.elapsed())
    });
    wait_for_subscribers(&server, &channel_of("outage-try-for"), 1);
    let restart = outage(server, Duration::from_secs(2));
    let (_server, _) = restart.join_within(Duration::from_secs(2) + PROMPTLY);
    let (result, took) = waiter.join_within(Duration::from_secs(10) + call_bound() + SLACK);
    match result {
        Ok(Some(unlocked)) => unlocked.expect("unlock after the outage"),
        Ok(None) => panic!("try_lock_for gave up after {took:?} on a lock free after the restart"),
        Err(e) => panic!("try_lock_for spanning an outage: {}", e.report()),
    }
    assert!(
        took < Duration::from_secs(10),
        "took its whole wait: {took:?}"
    );
}

/// `try_lock_for(1 s)` with the server down the whole time: it waits its
/// whole second, then fails with `Unreachable` (not `Ok(None)`: nobody
/// knows whether the lock was free), without a tolerance named.
#[test]
fn try_lock_for_fails_at_its_deadline_while_the_server_is_down() {
    let mut server = RedisServer::start();
    let client = client(&server);
    let lock = client.lock("outage-deadline");
    server.stop();
    let wait = Duration::from_secs(1);
    let started = Instant::now();
    let result = lock.try_lock_for(wait).map(|g| g.is_some());
    let took = started.elapsed();
    match result {
        Err(
            ref e @ Error::Unreachable {
                ref lock,
                unreachable_for,
                exceeded_tolerance: None,
                ..
            },
        ) => {
            assert_eq!(lock, "outage-deadline");
            assert!(e.is_connection_error(), "{e:?}");
            assert!(
                unreachable_for >= wait.mul_f32(0.9),
                "unreachable for {unreachable_for:?} only"
            );
            let text = e.to_string();
            assert!(text.contains("outage-deadline"), "{text}");
            assert!(text.contains("unreachable"), "{text}");
        }
        other => panic!("try_lock_for with the server down: {other:?}"),
    }
    assert!(took >= wait, "gave up after {took:?}, before its deadline");
    assert!(
        took <= wait + call_bound() + SLACK,
        "gave up {took:?} after the call, long past its deadline"
    );
}

/// With an outage tolerance of 1 s, `lock()` gives up about 1 s into the
/// outage, and the error says how long Redis was unreachable.
#[test]
fn lock_gives_up_after_the_outage_tolerance() {
    let mut server = RedisServer::start();
    let tolerance = Duration::from_secs(1);
    let client = builder(&server)
        .outage_tolerance(Some(tolerance))
        .build()
        .expect("client");
    let lock = client.lock("outage-tolerance");
    server.stop();
    let started = Instant::now();
    let result = lock.lock().map(drop);
    let took = started.elapsed();
    match result {
        Err(
            ref e @ Error::Unreachable {
                unreachable_for,
                exceeded_tolerance: Some(exceeded),
                ..
            },
        ) => {
            assert_eq!(exceeded, tolerance);
            assert!(unreachable_for >= tolerance, "{unreachable_for:?}");
            assert!(unreachable_for <= took, "{unreachable_for:?} > {took:?}");
            let text = e.to_string();
            let secs = format!("{:.1} s", unreachable_for.as_secs_f64());
            assert!(text.contains(&secs), "the length {secs} is not in: {text}");
            assert!(text.contains("outage_tolerance"), "{text}");
            assert!(
                e.report().to_lowercase().contains("refused"),
                "{}",
                e.report()
            );
        }
        other => panic!("lock() past the outage tolerance: {other:?}"),
    }
    assert!(took >= tolerance, "gave up after {took:?}");
    assert!(took <= tolerance + call_bound() + SLACK, "took {took:?}");
}

/// An interrupt and a shutdown end a wait that rides out an outage.
#[test]
fn interrupt_and_shutdown_end_a_wait_during_an_outage() {
    let mut server = RedisServer::start();
    let client = client(&server);
    server.stop();
    let interrupt = Interrupt::new();
    let interrupted = {
        let lock = client.lock("outage-interrupt");
        let interrupt = interrupt.clone();
        bounded::spawn("interruptible", move || {
            lock.lock_interruptibly(&interrupt).map(drop)
        })
    };
    let shut_down = {
        let lock = client.spin_lock("outage-shutdown");
        bounded::spawn("shut down", move || lock.lock().map(drop))
    };
    let parked = {
        let lock = client.lock("outage-shutdown-2");
        bounded::spawn("shut down 2", move || lock.lock().map(drop))
    };
    interrupted.assert_running_for(Duration::from_millis(1500));
    interrupt.trigger();
    match interrupted.join_within(call_bound() + SLACK) {
        Err(Error::Interrupted { .. }) => {}
        other => panic!("an interrupted wait during an outage: {other:?}"),
    }
    shut_down.assert_running_for(Duration::from_millis(100));
    client.shutdown().expect("shutdown");
    for waiter in [shut_down, parked] {
        match waiter.join_within(call_bound() + SLACK) {
            Err(Error::Shutdown) => {}
            other => panic!("a wait during an outage, client shut down: {other:?}"),
        }
    }
}

/// Calls that do not wait keep failing fast while the server is down.
#[test]
fn calls_that_do_not_wait_fail_fast_while_the_server_is_down() {
    let mut server = RedisServer::start();
    let client = client(&server);
    let lock = client.lock("outage-fast");
    server.stop();
    for _ in 0..3 {
        let started = Instant::now();
        match lock.try_lock() {
            Err(e) => assert!(e.is_connection_error(), "try_lock: {e:?}"),
            Ok(guard) => panic!("try_lock with the server down: {:?}", guard.is_some()),
        }
        match lock.is_locked() {
            Err(e) => assert!(e.is_connection_error(), "is_locked: {e:?}"),
            Ok(locked) => panic!("is_locked with the server down: {locked}"),
        }
        let took = started.elapsed();
        assert!(took <= 2 * call_bound() + SLACK, "took {took:?}");
    }
}

/// A waiting acquire whose reply is lost (the script ran, the connection
/// died) and that is not retried by the pool (`retry_attempts(0)`) tries
/// again after its backoff: the retry re-enters the lock it took, and the
/// hold counted twice is given back. One hold in Redis, none after the
/// release, for every kind.
fn lost_reply_is_retried_once_and_not_counted_twice<K: LockKind>(
    make: fn(&redhold::Client) -> Lock<K>,
) {
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.port());
    let client = redhold::Client::builder()
        .url(proxy.url())
        .retry_attempts(0)
        .build()
        .expect("client through the proxy");
    let lock = make(&client);
    let name = lock.name().to_owned();
    let armed = proxy.arming().arm(Rule {
        matcher: Matcher::script(&name, &[]),
        action: Action::LoseReply,
    });
    let guard = lock
        .lock()
        .unwrap_or_else(|e| panic!("{name}: lock() after a lost reply: {}", e.report()));
    assert!(
        armed.wait_fired(Duration::ZERO),
        "{name}: no reply was lost"
    );
    assert_eq!(lock.hold_count().expect("hold_count"), 1, "{name}");
    guard.unlock().expect("unlock");
    assert!(!server.exists(&name), "{name}: a hold left behind");
}

#[test]
fn a_lost_acquire_reply_is_retried_and_counted_once() {
    lost_reply_is_retried_once_and_not_counted_twice(|c| c.lock("outage-lost-plain"));
    lost_reply_is_retried_once_and_not_counted_twice(|c| c.fair_lock("outage-lost-fair"));
    lost_reply_is_retried_once_and_not_counted_twice(|c| {
        c.read_write_lock("outage-lost-rw").read()
    });
    lost_reply_is_retried_once_and_not_counted_twice(|c| {
        c.read_write_lock("outage-lost-rw").write()
    });
    lost_reply_is_retried_once_and_not_counted_twice(|c| c.fenced_lock("outage-lost-fenced"));
    lost_reply_is_retried_once_and_not_counted_twice(|c| c.spin_lock("outage-lost-spin"));
}
