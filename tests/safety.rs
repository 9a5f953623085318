//! Regression tests for what a careful review found: ordinary use of the API
//! that could give a lock two holders, leave queue entries behind, or mix
//! kinds of lock on one name. Each test failed before its fix.

mod bounded;
mod support;

use std::thread;
use std::time::Duration;

use redhold::{Client, Error};
use support::RedisServer;

/// Longer than every lease in these tests: a key that should have outlived
/// a short lease is checked after this.
const PAST_SHORT_LEASE: Duration = Duration::from_millis(500);
const SHORT_LEASE: Duration = Duration::from_millis(200);

fn pttl(server: &RedisServer, key: &str) -> i64 {
    server.cmd(&["PTTL", key])
}

/// Puts the server to sleep (`DEBUG SLEEP`) for `seconds` from another
/// thread, and returns once it sleeps.
fn sleep_server(server: &RedisServer, seconds: f64) -> thread::JoinHandle<()> {
    let url = server.url();
    let sleeper = thread::spawn(move || {
        let mut con = redis::Client::open(url)
            .and_then(|c| c.get_connection())
            .expect("a raw connection");
        redis::cmd("DEBUG")
            .arg("SLEEP")
            .arg(seconds)
            .query::<()>(&mut con)
            .expect("DEBUG SLEEP");
    });
    thread::sleep(Duration::from_millis(150));
    sleeper
}

/// The review's first finding, as written: a re-entry with a short lease
/// set the lock's TTL to that lease, and once it ran out another client got
/// in while the outer hold was still believed held.
#[test]
fn a_reentrant_lease_never_cuts_short_the_hold_beneath_it() {
    let server = RedisServer::start();
    let mine = server.client();
    let other = server.client().lock("nested");
    let lock = mine.lock("nested");

    let outer = lock.lock().unwrap();
    let inner = lock
        .try_lock_for_with_lease(Duration::ZERO, SHORT_LEASE)
        .unwrap()
        .expect("re-entry");
    assert!(
        pttl(&server, "nested") > 20_000,
        "the re-entry kept the TTL"
    );
    drop(inner);
    assert!(pttl(&server, "nested") > 20_000, "the release kept the TTL");
    thread::sleep(PAST_SHORT_LEASE);
    assert!(outer.is_held());
    assert!(
        other.try_lock().unwrap().is_none(),
        "another client got in while the outer hold was held"
    );
    assert_eq!(lock.hold_count().unwrap(), 1);
    outer.unlock().unwrap();
    assert!(!server.exists("nested"));
}

/// The same for every kind whose hash a re-entry or release touches.
#[test]
fn no_kind_lets_a_short_inner_lease_shorten_the_lock() {
    let server = RedisServer::start();
    let client = server.client();
    let long_lived = |key: &str| pttl(&server, key) > 20_000;

    let fair = client.fair_lock("fair");
    let outer = fair.lock().unwrap();
    drop(fair.lock_with_lease(SHORT_LEASE).unwrap());
    assert!(long_lived("fair"), "fair lock");
    drop(outer);

    let fenced = client.fenced_lock("fenced");
    let outer = fenced.lock().unwrap();
    drop(fenced.lock_with_lease(SHORT_LEASE).unwrap());
    assert!(long_lived("fenced"), "fenced lock");
    drop(outer);

    let rw = client.read_write_lock("rw");
    let outer = rw.write().lock().unwrap();
    drop(rw.write().lock_with_lease(SHORT_LEASE).unwrap());
    assert!(long_lived("rw"), "write lock re-entered");
    // A writer that also reads: the read release must not cut the write short.
    drop(rw.read().lock_with_lease(SHORT_LEASE).unwrap());
    assert!(long_lived("rw"), "write lock after a read release");
    thread::sleep(PAST_SHORT_LEASE);
    let stranger = server.client().read_write_lock("rw");
    assert!(stranger.read().try_lock().unwrap().is_none());
    assert!(stranger.write().try_lock().unwrap().is_none());
    drop(outer);
    assert!(!server.exists("rw"));
}

/// A watched re-entry (renewed to the watchdog timeout) must not cut short
/// an outer hold taken with a longer lease either.
#[test]
fn renewals_never_shorten_a_longer_lease_of_the_same_holder() {
    let server = RedisServer::start();
    let client = server.client_with_watchdog(Duration::from_millis(600));
    let lock = client.lock("renewed");
    let outer = lock.lock_with_lease(Duration::from_secs(20)).unwrap();
    let inner = lock.lock().unwrap();
    // Several renewals at a 600 ms timeout.
    thread::sleep(Duration::from_millis(800));
    drop(inner);
    thread::sleep(Duration::from_millis(1_000));
    assert!(outer.is_held());
    assert!(
        server
            .client()
            .lock("renewed")
            .try_lock()
            .unwrap()
            .is_none(),
        "the renewals shortened the 20 s lease to the watchdog timeout"
    );
    outer.unlock().unwrap();
}

/// Read holds are numbered keys, not tied to guards: releasing a short
/// lease must not leave the long one with the short one's TTL.
#[test]
fn releasing_one_read_hold_keeps_the_longer_ones() {
    let server = RedisServer::start();
    let client = server.client();
    let read = client.read_write_lock("reads").read();
    let short = read.lock_with_lease(SHORT_LEASE).unwrap();
    let long = read.lock_with_lease(Duration::from_secs(20)).unwrap();
    drop(short);
    // Another reader keeps the hash alive past the short lease on its own.
    let other = server.client().read_write_lock("reads");
    let other_read = other.read().lock_with_lease(PAST_SHORT_LEASE).unwrap();
    drop(other_read);
    thread::sleep(PAST_SHORT_LEASE);
    assert!(long.is_held());
    assert!(
        other.write().try_lock().unwrap().is_none(),
        "a writer got in while a 20 s read hold was held"
    );
    long.unlock().unwrap();
}

/// The review's second finding, as written: a guard whose lease ran out
/// released the hold its thread took afterwards.
#[test]
fn a_stale_leased_guard_releases_nothing() {
    let server = RedisServer::start();
    let client = server.client();
    let lock = client.lock("stale");
    let other = server.client().lock("stale");

    let stale = lock.lock_with_lease(Duration::from_millis(100)).unwrap();
    thread::sleep(Duration::from_millis(250));
    let current = lock.lock().unwrap();
    assert!(!stale.is_held(), "the old generation is over");
    match stale.unlock() {
        Err(Error::LockLost { .. }) => {}
        other => panic!("a stale guard must report LockLost, got {other:?}"),
    }
    assert!(current.is_held());
    assert_eq!(lock.hold_count().unwrap(), 1, "the new hold was released");
    assert!(other.try_lock().unwrap().is_none(), "two holders");
    drop(current);
    assert!(!server.exists("stale"));
}

/// A stale guard dropped (not unlocked) sends nothing either, and a guard of
/// a watched hold that was deleted and taken anew is stale too.
#[test]
fn stale_guards_of_deleted_locks_drop_silently() {
    let server = RedisServer::start();
    let client = server.client();
    let lock = client.lock("deleted");
    let operator = server.client().lock("deleted");

    let first = lock.lock().unwrap();
    assert!(operator.force_unlock().unwrap());
    // Taken anew before the watchdog noticed: a new generation.
    let second = lock.lock().unwrap();
    assert!(!first.is_held());
    drop(first);
    assert!(second.is_held());
    assert_eq!(lock.hold_count().unwrap(), 1);
    assert!(operator.try_lock().unwrap().is_none(), "two holders");
    second.unlock().unwrap();
    assert!(!server.exists("deleted"));
}

/// `Lock::unlock` tells "never held" from "held, but lost".
#[test]
fn manual_unlock_reports_a_lost_hold_as_lost() {
    let server = RedisServer::start();
    let client = server.client();
    let lock = client.lock("manual");
    assert!(matches!(lock.unlock(), Err(Error::NotHeld { .. })));

    lock.lock_with_lease(Duration::from_millis(100))
        .unwrap()
        .leak();
    thread::sleep(Duration::from_millis(250));
    assert!(matches!(lock.unlock(), Err(Error::LockLost { .. })));
    assert!(matches!(lock.unlock(), Err(Error::NotHeld { .. })));

    lock.lock().unwrap().leak();
    lock.unlock().unwrap();
    assert!(!server.exists("manual"));
}

/// `Lock::unlock` of a leaked lease, while the thread also holds the lock
/// through a watched guard, gives back the lease, not the watched hold:
/// the watchdog keeps renewing the lock for the guard.
#[test]
fn manual_unlock_of_a_leaked_lease_keeps_the_watched_hold_renewed() {
    let server = RedisServer::start();
    let client = server.client_with_watchdog(Duration::from_millis(600));
    let lock = client.lock("leaked-beside");
    let watched = lock.lock().unwrap();
    lock.lock_with_lease(Duration::from_millis(300))
        .unwrap()
        .leak();
    lock.unlock().unwrap();
    assert_eq!(lock.hold_count().unwrap(), 1);
    // Several watchdog timeouts: without renewal the lock would be gone.
    thread::sleep(Duration::from_millis(1_800));
    assert!(watched.is_held());
    assert!(server
        .client()
        .lock("leaked-beside")
        .try_lock()
        .unwrap()
        .is_none());
    watched.unlock().unwrap();
    assert!(!server.exists("leaked-beside"));
}

/// A fair waiter whose client shuts down leaves the queue before
/// `shutdown()` returns; before the fix its entry stayed for the fair wait
/// timeout (300 s) and every later waiter queued behind it.
#[test]
fn a_fair_waiter_leaves_the_queue_when_its_client_shuts_down() {
    let server = RedisServer::start();
    let holder = server.client();
    let guard = holder.fair_lock("queue").lock().unwrap();

    let waiter_client = server.client();
    let lock = waiter_client.fair_lock("queue");
    let waiter = bounded::spawn("fair waiter", move || lock.lock().map(drop));
    bounded::wait_until(Duration::from_secs(5), || {
        server.cmd::<i64>(&["LLEN", "redisson_lock_queue:{queue}"]) == 1
    })
    .expect("the waiter queues");
    waiter_client.shutdown().unwrap();
    assert!(
        !server.exists("redisson_lock_queue:{queue}"),
        "the queue entry outlived the shutdown"
    );
    assert!(!server.exists("redisson_lock_timeout:{queue}"));
    assert!(matches!(
        waiter.join_within(Duration::from_secs(10)),
        Err(Error::Shutdown)
    ));
    drop(guard);
}

/// A fair waiter whose first attempt queued it but whose reply was lost
/// (the server stalled past the response timeout) leaves the queue too.
#[test]
fn a_fair_waiter_whose_first_reply_was_lost_leaves_the_queue() {
    let server = RedisServer::start_with_args(support::server_version().debug_command_args());
    let _guard = server.client().fair_lock("lost-reply").lock().unwrap();
    let client = server
        .builder()
        .response_timeout(Duration::from_millis(500))
        .retry_attempts(0)
        // Gives up at the first failure instead of waiting the stall out:
        // the way out with an error is what this test is about.
        .outage_tolerance(Some(Duration::ZERO))
        .build()
        .unwrap();
    let lock = client.fair_lock("lost-reply");

    // The server sleeps through the attempt, which times out at 500 ms and
    // closes its connection; on waking the server still runs the attempt
    // (it reads the request before it sees the close), so the waiter is
    // queued with nobody to read the reply. The give-up, sent at 500 ms,
    // runs after it.
    let sleeper = sleep_server(&server, 0.9);
    let outcome = lock.try_lock_for(Duration::from_secs(5));
    assert!(
        matches!(outcome, Err(Error::Unreachable { .. })),
        "the reply was lost: {outcome:?}"
    );
    sleeper.join().unwrap();
    bounded::wait_until(Duration::from_secs(2), || {
        !server.exists("redisson_lock_queue:{lost-reply}")
    })
    .expect("the waiter left the queue it joined");
}

/// An acquire whose reply was lost is retried and counted twice by Redis;
/// the client gives the extra hold back, so the lock is free after the one
/// guard's release (before, it stayed held, unrenewed, until its TTL ran
/// out).
#[test]
fn an_acquire_counted_twice_is_given_back() {
    let server = RedisServer::start_with_args(support::server_version().debug_command_args());
    let client = server
        .builder()
        .response_timeout(Duration::from_millis(500))
        .retry_attempts(1)
        .build()
        .unwrap();
    let lock = client.lock("twice");
    // Loads the scripts: a first attempt answered NOSCRIPT would not count.
    drop(lock.lock().unwrap());
    // The first attempt times out at 650 ms; the retry, sent at 700 ms, is
    // answered when the server wakes at 900 ms, after the first ran.
    let sleeper = sleep_server(&server, 0.9);
    let guard = lock.lock().unwrap();
    sleeper.join().unwrap();
    assert_eq!(server.cmd::<i64>(&["HLEN", "twice"]), 1);
    assert_eq!(
        lock.hold_count().unwrap(),
        1,
        "the extra hold is given back"
    );
    guard.unlock().unwrap();
    assert!(
        !server.exists("twice"),
        "the lock stayed held after its release"
    );
}

/// A name holds one kind of lock; using it as another is refused with a
/// clear error and changes nothing.
#[test]
fn mixing_kinds_on_one_name_is_refused() {
    let server = RedisServer::start();
    let client = server.client();

    let plain = client.lock("mixed");
    let guard = plain.lock().unwrap();
    let before: Vec<String> = server.cmd(&["HGETALL", "mixed"]);
    let rw = server.client().read_write_lock("mixed");
    for outcome in [
        rw.read().try_lock().map(|g| g.is_some()),
        rw.write().try_lock().map(|g| g.is_some()),
    ] {
        match outcome {
            Err(Error::WrongKind { lock, found, .. }) => {
                assert_eq!(lock, "mixed");
                assert!(found.contains("plain"), "{found}");
            }
            other => panic!("a read-write lock on a plain lock: {other:?}"),
        }
    }
    assert_eq!(server.cmd::<Vec<String>>(&["HGETALL", "mixed"]), before);
    drop(guard);

    let rw = client.read_write_lock("rw-mixed");
    let _read = rw.read().lock().unwrap();
    let other = server.client();
    for outcome in [
        other.lock("rw-mixed").try_lock().map(|g| g.is_some()),
        other.fair_lock("rw-mixed").try_lock().map(|g| g.is_some()),
        other
            .fenced_lock("rw-mixed")
            .try_lock()
            .map(|g| g.is_some()),
        // The same thread, which holds a read hold under its plain field.
        client.lock("rw-mixed").try_lock().map(|g| g.is_some()),
    ] {
        assert!(
            matches!(outcome, Err(Error::WrongKind { .. })),
            "a plain lock on a read-write lock: {outcome:?}"
        );
    }

    server.cmd::<()>(&["SET", "a-string", "x"]);
    let outcome = client.lock("a-string").try_lock().map(|g| g.is_some());
    match outcome {
        Err(e @ Error::WrongKind { .. }) => assert!(e.to_string().contains("a-string"), "{e}"),
        other => panic!("a lock on a string key: {other:?}"),
    }
    assert_eq!(server.cmd::<String>(&["GET", "a-string"]), "x");
}

/// Not a finding, but the rule the fixes keep: a client shut down while a
/// thread holds a lock leaves that lock to expire, and nothing else.
#[test]
fn shutdown_with_a_held_lock_leaves_only_that_lock() {
    let server = RedisServer::start();
    let client: Client = server.client_with_watchdog(Duration::from_millis(600));
    let guard = client.lock("held-at-shutdown").lock().unwrap();
    client.shutdown().unwrap();
    assert!(guard.is_held(), "held until its last renewal runs out");
    bounded::wait_until(Duration::from_secs(5), || {
        !server.exists("held-at-shutdown")
    })
    .expect("the lock expires after the watchdog timeout");
    assert!(!guard.is_held(), "nothing renews it any more");
    assert!(matches!(guard.unlock(), Err(Error::Shutdown)));
}

/// Commands the server ran since its last `CONFIG RESETSTAT`, but the
/// `INFO` and `CONFIG` that the test itself sends.
fn commands_run(server: &RedisServer) -> Vec<String> {
    let info: String = server.cmd(&["INFO", "commandstats"]);
    info.lines()
        .filter_map(|l| l.strip_prefix("cmdstat_"))
        .filter(|l| !l.starts_with("info:") && !l.starts_with("config"))
        .map(str::to_owned)
        .collect()
}

/// `Lock::unlock` is for holds whose guard was leaked. With two live guards
/// and none leaked it must release neither: before the fix it gave back one
/// of the guards' holds, and when one guard was dropped the other thread's
/// lock was free while the other guard still stood for it.
#[test]
fn manual_unlock_never_releases_a_hold_a_live_guard_owns() {
    let server = RedisServer::start();
    let client = server.client();
    let lock = client.lock("guarded-twice");
    let first = lock.lock().unwrap();
    let second = lock.lock().unwrap();

    let _: () = server.cmd(&["CONFIG", "RESETSTAT"]);
    match lock.unlock() {
        Err(Error::NotHeld { lock }) => assert_eq!(lock, "guarded-twice"),
        other => panic!("unlock with only live guards: expected NotHeld, got {other:?}"),
    }
    assert!(
        commands_run(&server).is_empty(),
        "unlock with only live guards sent commands: {:?}",
        commands_run(&server)
    );
    assert_eq!(lock.hold_count().unwrap(), 2);

    drop(second);
    assert!(first.is_held());
    assert!(
        server
            .client()
            .lock("guarded-twice")
            .try_lock()
            .unwrap()
            .is_none(),
        "another client got the lock while a guard still stands for it"
    );

    // A leaked hold beside the live guard is released, and only it.
    lock.lock().unwrap().leak();
    lock.unlock().expect("unlock of the leaked hold");
    assert_eq!(lock.hold_count().unwrap(), 1);
    let _: () = server.cmd(&["CONFIG", "RESETSTAT"]);
    assert!(matches!(lock.unlock(), Err(Error::NotHeld { .. })));
    assert!(
        commands_run(&server).is_empty(),
        "{:?}",
        commands_run(&server)
    );
    assert!(first.is_held());
    first.unlock().unwrap();
    assert!(!server.exists("guarded-twice"));
}
