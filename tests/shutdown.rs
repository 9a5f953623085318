//! Shutting a client down: `shutdown()` joins the background threads, every
//! later call fails with `Error::Shutdown`, threads parked in `lock()` wake up
//! with it, and held locks are no longer renewed; also when `shutdown()` is
//! called by an `on_lock_lost` callback.
//!
//! The tests count the process's `redhold-*` threads, so they run one at a
//! time (the `SERIAL` mutex) and this file holds nothing else.

mod bounded;
mod support;

use std::fs;
use std::sync::{mpsc, Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use redhold::{Client, Error};
use support::RedisServer;

/// Generous bound for things that should take milliseconds.
const PROMPTLY: Duration = Duration::from_secs(5);

/// Taken by every test of this file: the thread count is process-wide.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// How many threads of this process have a name starting with `redhold-`
/// (Linux truncates names to 15 bytes, which keeps the prefix).
fn redhold_threads() -> usize {
    let tasks = fs::read_dir("/proc/self/task").expect("/proc/self/task");
    tasks
        .filter_map(|task| fs::read_to_string(task.ok()?.path().join("comm")).ok())
        .filter(|name| name.starts_with("redhold-"))
        .count()
}

/// The `redhold-*` thread count once threads of earlier tests are gone: a
/// dropped client's watchdog thread ends shortly after the drop, not during it.
fn settled_threads() -> usize {
    bounded::wait_until(Duration::from_secs(3), || redhold_threads() == 0);
    redhold_threads()
}

fn is_shutdown<T>(result: &redhold::Result<T>) -> bool {
    matches!(result, Err(Error::Shutdown))
}

#[test]
fn shutdown_joins_threads_and_later_calls_fail() {
    let _serial = serial();
    let server = RedisServer::start();
    let before = settled_threads();
    let client = server.client();
    // A new thread names itself once it runs, a moment after build() returns.
    bounded::wait_until(Duration::from_secs(2), || redhold_threads() >= before + 2)
        .expect("a client runs a watchdog and a subscriber thread");
    let lock = client.lock("closing");
    assert!(!lock.is_locked().unwrap(), "works before shutdown");
    let clone = client.clone();

    let started = Instant::now();
    client.shutdown().expect("shutdown");
    assert!(
        started.elapsed() < PROMPTLY,
        "shutdown took {:?}",
        started.elapsed()
    );
    assert!(client.is_shut_down() && clone.is_shut_down());
    // Joined threads may linger in /proc for a moment after join returns.
    bounded::wait_until(Duration::from_secs(2), || redhold_threads() == before).unwrap_or_else(
        || {
            panic!(
                "{} redhold threads after shutdown returned, {before} before the client",
                redhold_threads()
            )
        },
    );

    assert!(is_shutdown(&lock.lock()));
    assert!(is_shutdown(&lock.lock_with_lease(Duration::from_secs(1))));
    assert!(is_shutdown(&lock.try_lock()));
    assert!(is_shutdown(&lock.try_lock_for(Duration::from_millis(100))));
    assert!(is_shutdown(
        &lock.lock_interruptibly(&redhold::Interrupt::new())
    ));
    assert!(is_shutdown(&lock.force_unlock()));
    assert!(is_shutdown(&lock.is_locked()));
    assert!(is_shutdown(&lock.is_held_by_current_thread()));
    assert!(is_shutdown(&lock.hold_count()));
    assert!(is_shutdown(&lock.remaining_lease()));
    assert!(is_shutdown(&lock.unlock()));
    assert!(is_shutdown(&clone.lock("other").try_lock()));
    let text = Error::Shutdown.to_string();
    assert!(text.contains("shut down"), "{text}");

    clone.shutdown().expect("a second shutdown does nothing");
}

#[test]
fn shutdown_wakes_a_thread_parked_in_lock() {
    let _serial = serial();
    let server = RedisServer::start();
    let holding_client = server.client();
    let holder = holding_client.lock("parked");
    let client = server.client();
    let waiter_lock = client.lock("parked");
    let held = holder.lock().unwrap();

    let waiter = bounded::spawn("parked-waiter", move || {
        waiter_lock.lock().map(|g| g.is_held())
    });
    waiter.assert_running_for(Duration::from_millis(300));

    // shutdown() itself must return, so run it where a hang is caught too.
    let closer = bounded::spawn("closer", move || client.shutdown());
    closer
        .join_within(PROMPTLY)
        .expect("shutdown reports no error");
    let outcome = waiter.join_within(PROMPTLY);
    assert!(
        is_shutdown(&outcome),
        "parked lock() after shutdown: {outcome:?}"
    );
    drop(held);
    holding_client.shutdown().unwrap();
}

#[test]
fn held_lock_expires_after_shutdown() {
    let _serial = serial();
    let server = RedisServer::start();
    let client = server.client_with_watchdog(Duration::from_secs(1));
    let lock = client.lock("orphaned");
    let guard = lock.lock().unwrap();

    client.shutdown().unwrap();
    assert!(
        is_shutdown(&guard.unlock()),
        "a release after shutdown reports Shutdown"
    );
    let gone = bounded::wait_until(Duration::from_secs(4), || {
        server.cmd::<i64>(&["EXISTS", "orphaned"]) == 0
    });
    assert!(
        gone.is_some(),
        "no longer renewed, the lock expires after the 1 s watchdog timeout"
    );
}

#[test]
fn dropping_the_last_clone_stops_the_threads() {
    let _serial = serial();
    let server = RedisServer::start();
    let before = settled_threads();
    let client = server.client();
    let lock = client.lock("dropped");
    bounded::wait_until(Duration::from_secs(2), || redhold_threads() >= before + 2)
        .expect("a client runs a watchdog and a subscriber thread");
    drop(client);
    assert!(
        redhold_threads() >= before + 2,
        "the lock handle keeps the client alive"
    );
    assert!(!lock.is_locked().unwrap());
    drop(lock);
    bounded::wait_until(Duration::from_secs(3), || redhold_threads() == before)
        .expect("threads end once the last clone is gone");
}

#[test]
fn shutdown_called_by_on_lock_lost_completes() {
    let _serial = serial();
    let server = RedisServer::start();
    let before = settled_threads();
    let holding_client = server.client();
    let held = holding_client.lock("busy").lock().unwrap();

    // The callback shuts down the client that called it.
    let slot: Arc<OnceLock<Client>> = Arc::default();
    let (done_tx, done_rx) = mpsc::channel();
    let client = {
        let slot = Arc::clone(&slot);
        server
            .builder()
            .watchdog_timeout(Duration::from_millis(600))
            .on_lock_lost(move |_| {
                if let Some(client) = slot.get() {
                    let _ = done_tx.send(client.shutdown().map_err(|e| e.to_string()));
                }
            })
            .build()
            .unwrap()
    };
    let _ = slot.set(client.clone());

    // A thread of that client waits for a lock held for 30 s by another.
    let waiter = {
        let lock = client.lock("busy");
        bounded::spawn("parked-waiter", move || lock.lock().map(|g| g.is_held()))
    };
    waiter.assert_running_for(Duration::from_millis(300));

    let _doomed = client.lock("doomed").lock().unwrap();
    server.cmd::<i64>(&["DEL", "doomed"]);
    done_rx
        .recv_timeout(PROMPTLY)
        .expect("the callback's shutdown() returned")
        .expect("shutdown reports no error");
    assert!(client.is_shut_down());
    let outcome = waiter.join_within(PROMPTLY);
    assert!(
        is_shutdown(&outcome),
        "parked lock() after shutdown from a callback: {outcome:?}"
    );
    drop(held);
    holding_client.shutdown().unwrap();
    bounded::wait_until(Duration::from_secs(3), || redhold_threads() == before).unwrap_or_else(
        || {
            panic!(
                "{} redhold threads after both clients shut down, {before} before",
                redhold_threads()
            )
        },
    );
}
