//! Interrupting a wait: `lock_interruptibly` returns `Err(Interrupted)`
//! promptly after `Interrupt::trigger` on another thread, and at once when it
//! was triggered before the call.

mod bounded;
mod support;

use std::time::{Duration, Instant};

use redhold::{Error, Interrupt};
use support::RedisServer;

/// Generous bound for a reaction that should take milliseconds. The holder
/// keeps the 30 s default TTL, so this is far below any TTL-driven retry.
const PROMPTLY: Duration = Duration::from_secs(3);

#[test]
fn trigger_from_another_thread_ends_the_wait() {
    let server = RedisServer::start();
    let holder = server.client().lock("jobs");
    let waiter_lock = server.client().lock("jobs");
    let guard = holder.lock().unwrap();

    let stop = Interrupt::new();
    let waiter = {
        let stop = stop.clone();
        bounded::spawn("interruptible", move || {
            let outcome = waiter_lock.lock_interruptibly(&stop).map(|g| g.is_held());
            (outcome, Instant::now(), waiter_lock.hold_count())
        })
    };
    waiter.assert_running_for(Duration::from_millis(300));

    let triggered = Instant::now();
    stop.trigger();
    assert!(stop.is_triggered());
    let (outcome, returned, count) = waiter.join_within(PROMPTLY);
    match outcome {
        Err(Error::Interrupted { lock }) => assert_eq!(lock, "jobs"),
        other => panic!("expected Interrupted, got {other:?}"),
    }
    assert!(returned.saturating_duration_since(triggered) < PROMPTLY);
    assert!(
        matches!(count, Ok(0)),
        "the interrupted waiter holds nothing"
    );
    assert!(guard.is_held(), "the holder is unaffected");
    guard.unlock().expect("holder releases normally");
}

#[test]
fn trigger_before_the_call_fails_at_once() {
    let server = RedisServer::start();
    let client = server.client();
    let lock = client.lock("jobs");
    let stop = Interrupt::new();
    stop.trigger();

    // Free lock: still refused, and nothing is taken.
    let started = Instant::now();
    let err = lock
        .lock_interruptibly(&stop)
        .expect_err("already triggered");
    assert!(matches!(err, Error::Interrupted { .. }), "{err:?}");
    assert!(err.to_string().contains("jobs"), "{err}");
    assert!(started.elapsed() < PROMPTLY);
    assert_eq!(
        server.cmd::<i64>(&["EXISTS", "jobs"]),
        0,
        "nothing was locked"
    );

    // Held lock: refused without waiting for it.
    let _theirs = server.client().lock("jobs").lock().unwrap();
    let started = Instant::now();
    let err = lock
        .lock_interruptibly_with_lease(&stop, Duration::from_secs(5))
        .expect_err("already triggered");
    assert!(matches!(err, Error::Interrupted { .. }), "{err:?}");
    assert!(started.elapsed() < PROMPTLY);
}

#[test]
fn one_trigger_stops_every_wait_sharing_the_interrupt() {
    let server = RedisServer::start();
    let _guard = server.client().lock("shared-stop").lock().unwrap();
    let client = server.client();
    let stop = Interrupt::new();
    let waiters: Vec<_> = (0..3)
        .map(|i| {
            let lock = client.lock("shared-stop");
            let stop = stop.clone();
            bounded::spawn(&format!("waiter-{i}"), move || {
                lock.lock_interruptibly(&stop).map(|_| ())
            })
        })
        .collect();
    waiters[0].assert_running_for(Duration::from_millis(300));
    stop.trigger();
    for waiter in waiters {
        let outcome = waiter.join_within(PROMPTLY);
        assert!(
            matches!(outcome, Err(Error::Interrupted { .. })),
            "{outcome:?}"
        );
    }
}

#[test]
fn untriggered_interrupt_lets_the_lock_be_taken() {
    let server = RedisServer::start();
    let holder = server.client().lock("calm");
    let waiter_lock = server.client().lock("calm");
    let stop = Interrupt::new();

    let guard = holder.lock().unwrap();
    let waiter = {
        let stop = stop.clone();
        bounded::spawn("calm-waiter", move || {
            let guard = waiter_lock
                .lock_interruptibly_with_lease(&stop, Duration::from_secs(8))
                .expect("lock after release");
            let ttl = waiter_lock.remaining_lease().expect("remaining_lease");
            guard.unlock().expect("release");
            ttl
        })
    };
    waiter.assert_running_for(Duration::from_millis(300));
    drop(guard);
    let ttl = waiter.join_within(PROMPTLY).expect("was locked");
    assert!(ttl <= Duration::from_secs(8), "lease 8 s, TTL {ttl:?}");
    assert!(!stop.is_triggered());
}

#[test]
fn interrupted_waiter_passes_on_a_wake_up_it_was_handed() {
    // Two local waiters: the interruptible one parked first, so a release
    // message wakes it. If its interrupt fires at that very moment, the
    // wake-up must still reach the other waiter; otherwise that one sleeps
    // until the holder's 30 s TTL runs out. The race is narrow, hence the
    // repetitions; each round takes well under a second.
    const ROUNDS: usize = 20;
    let server = RedisServer::start();
    let holder = server.client().lock("handover");
    let waiters = server.client();

    for round in 0..ROUNDS {
        let guard = holder.lock().unwrap();
        let stop = Interrupt::new();
        let first = {
            let lock = waiters.lock("handover");
            let stop = stop.clone();
            bounded::spawn(&format!("interruptible-{round}"), move || {
                lock.lock_interruptibly(&stop).map(drop)
            })
        };
        first.assert_running_for(Duration::from_millis(60));
        let second = {
            let lock = waiters.lock("handover");
            bounded::spawn(&format!("patient-{round}"), move || lock.lock().map(drop))
        };
        second.assert_running_for(Duration::from_millis(60));

        guard.unlock().unwrap();
        stop.trigger();
        // Either outcome is fine for the interrupted one: the trigger
        // races with the release.
        let first = first.join_within(PROMPTLY);
        assert!(
            matches!(first, Ok(()) | Err(Error::Interrupted { .. })),
            "round {round}: {first:?}"
        );
        second
            .join_within(PROMPTLY)
            .unwrap_or_else(|e| panic!("round {round}: {e}"));
    }
}
