//! A guard dropped while the server is frozen (SIGSTOP): the drop returns
//! within about one response timeout, the release goes on in the
//! background and frees the lock soon after the server resumes; the same
//! thread taking the lock again meanwhile ends with exactly its own hold;
//! shutdown waits for pending releases within its grace (issue 22, part 3).

use std::thread;
use std::time::{Duration, Instant};

use crate::common::PROMPTLY;
use crate::support::RedisServer;
use redhold::Error;

const CONNECT_TIMEOUT: Duration = Duration::from_millis(300);
const RESPONSE_TIMEOUT: Duration = Duration::from_millis(300);
/// Before issue 22 part 3 a drop on a frozen server took the retry rule's
/// whole bound: up to (connect + response) × 7 + 6 retry delays ≈ 4.5 s
/// here (1.4 s measured with 3 retries).
const DROP_BOUND: Duration = Duration::from_millis(2 * 300 + 700);

fn client(server: &RedisServer) -> redhold::Client {
    server
        .builder()
        .connect_timeout(CONNECT_TIMEOUT)
        .response_timeout(RESPONSE_TIMEOUT)
        .retry_attempts(6)
        .retry_delay(Duration::from_millis(50))
        .build()
        .expect("client")
}

/// Drops `guard` and returns how long the drop took.
fn timed_drop<T>(guard: T) -> Duration {
    let started = Instant::now();
    drop(guard);
    started.elapsed()
}

fn field_count(server: &RedisServer, name: &str) -> Vec<(String, String)> {
    server.cmd(&["HGETALL", name])
}

#[test]
fn a_guard_dropped_on_a_frozen_server_returns_quickly_and_frees_the_lock_after_it_resumes() {
    let server = RedisServer::start();
    let holder = client(&server);
    let other = server.client();
    let name = "drop-frozen";
    let guard = holder.lock(name).lock().unwrap();
    server.freeze();
    let took = timed_drop(guard);
    assert!(took < DROP_BOUND, "the drop blocked {took:?}");
    assert_eq!(holder.stats().pending_releases, 1);
    thread::sleep(Duration::from_millis(500));
    server.thaw();
    // The lock has a 30 s TTL: only the background release frees it now.
    let started = Instant::now();
    let taken = other.lock(name).try_lock_for(PROMPTLY).unwrap();
    assert!(
        taken.is_some(),
        "not released {:?} after the thaw",
        started.elapsed()
    );
    // The worker counts its release done just after Redis confirmed it,
    // which may be a moment after the other client got the lock.
    let settled = crate::bounded::wait_until(PROMPTLY, || holder.stats().pending_releases == 0);
    assert!(settled.is_some(), "{:?}", holder.stats());
    assert_eq!(holder.stats().locks_lost, 0);
}

#[test]
fn the_same_thread_taking_the_lock_again_during_the_stall_holds_it_exactly_once() {
    let server = RedisServer::start();
    let holder = client(&server);
    let name = "drop-relock";
    let lock = holder.lock(name);
    let outer = lock.lock().unwrap();
    let inner = lock.lock().unwrap();
    server.freeze();
    // A nested hold and then the last one: both releases go background.
    let took = timed_drop(inner) + timed_drop(outer);
    assert!(took < DROP_BOUND * 2, "the drops blocked {took:?}");
    assert_eq!(holder.stats().pending_releases, 2);
    let thaw = {
        let pid_server = &server;
        thread::scope(|s| {
            s.spawn(|| {
                thread::sleep(Duration::from_millis(800));
                pid_server.thaw();
            });
            // Rides the stall out (a waiting call), and must wait for the
            // pending releases of this thread's field first.
            lock.lock().unwrap()
        })
    };
    // Let any late release run: it must not take the new hold away.
    thread::sleep(Duration::from_millis(1500));
    assert_eq!(holder.stats().pending_releases, 0);
    let field = field_count(&server, name);
    assert_eq!(field.len(), 1, "{field:?}");
    assert_eq!(field[0].1, "1", "Redis counts {field:?}");
    assert_eq!(lock.hold_count().unwrap(), 1);
    assert!(thaw.is_held());
    thaw.unlock().unwrap();
    assert!(!server.exists(name), "a hold was left behind");
    assert_eq!(holder.stats().locks_lost, 0);
}

#[test]
fn shutdown_finishes_a_pending_release_within_its_grace() {
    let server = RedisServer::start();
    let holder = client(&server);
    let name = "drop-shutdown";
    let guard = holder.lock(name).lock().unwrap();
    server.freeze();
    let took = timed_drop(guard);
    assert!(took < DROP_BOUND, "the drop blocked {took:?}");
    assert_eq!(holder.stats().pending_releases, 1);
    thread::scope(|s| {
        s.spawn(|| {
            thread::sleep(Duration::from_millis(200));
            server.thaw();
        });
        let started = Instant::now();
        holder.shutdown().unwrap();
        let grace = CONNECT_TIMEOUT + RESPONSE_TIMEOUT;
        assert!(
            started.elapsed() < grace + Duration::from_secs(1),
            "shutdown took {:?}",
            started.elapsed()
        );
    });
    assert_eq!(holder.stats().pending_releases, 0);
    assert!(
        !server.exists(name),
        "the pending release was dropped at shutdown"
    );
}

#[test]
fn shutdown_on_a_server_frozen_for_good_returns_within_its_grace() {
    let server = RedisServer::start();
    let holder = client(&server);
    let name = "drop-shutdown-frozen";
    let guard = holder.lock(name).lock().unwrap();
    server.freeze();
    let took = timed_drop(guard);
    assert!(took < DROP_BOUND, "the drop blocked {took:?}");
    let started = Instant::now();
    holder.shutdown().unwrap();
    let grace = CONNECT_TIMEOUT + RESPONSE_TIMEOUT;
    assert!(
        started.elapsed() < grace + Duration::from_secs(1),
        "shutdown took {:?}",
        started.elapsed()
    );
    assert_eq!(holder.stats().pending_releases, 0);
    server.thaw();
}

#[test]
fn unlock_on_a_frozen_server_gives_up_at_the_retry_bound_and_says_so() {
    let server = RedisServer::start();
    let holder = client(&server);
    let other = server.client();
    let name = "unlock-frozen";
    let guard = holder.lock(name).lock().unwrap();
    server.freeze();
    let started = Instant::now();
    let outcome = guard.unlock();
    let took = started.elapsed();
    // (connect + response) × 7 + 6 retry delays, and slack.
    let bound = (CONNECT_TIMEOUT + RESPONSE_TIMEOUT) * 7 + Duration::from_millis(300 + 1000);
    assert!(took < bound, "unlock took {took:?}");
    match &outcome {
        Err(e @ Error::ReleaseUnconfirmed { .. }) => {
            assert!(e.to_string().contains("did not confirm the release"), "{e}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(holder.stats().pending_releases, 1);
    server.thaw();
    let taken = other.lock(name).try_lock_for(PROMPTLY).unwrap();
    assert!(taken.is_some(), "the unconfirmed release never ran");
    // Counted done a moment after Redis confirmed it (see above).
    let settled = crate::bounded::wait_until(PROMPTLY, || holder.stats().pending_releases == 0);
    assert!(settled.is_some(), "{:?}", holder.stats());
}
