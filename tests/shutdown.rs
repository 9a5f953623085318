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

/// A lock's hash as (field, holds) pairs.
fn holders(server: &RedisServer, name: &str) -> Vec<(String, i64)> {
    server.cmd(&["HGETALL", name])
}

/// A thread parked in `lock()` whose lock a release hands over while
/// `shutdown()` runs: the release's script is held up by the server
/// (`CLIENT PAUSE`) until after shutdown began, so the waiter was reserved
/// for the hand-over before shutdown and handed the lock after it. It must
/// give that hold back and report `Shutdown`, not return a guard.
#[test]
fn a_waiter_handed_the_lock_after_shutdown_began_gets_no_guard() {
    let _serial = serial();
    let server = RedisServer::start();
    let client = server.client();
    let name = "reserved";

    let (held_tx, held_rx) = mpsc::channel();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let holder = {
        let lock = client.lock(name);
        bounded::spawn("holder", move || {
            let guard = lock.lock().expect("the holder takes the free lock");
            held_tx.send(()).unwrap();
            release_rx.recv().unwrap();
            guard.unlock()
        })
    };
    held_rx
        .recv_timeout(PROMPTLY)
        .expect("the holder has the lock");
    let waiter = {
        let lock = client.lock(name);
        bounded::spawn("waiter", move || lock.lock().map(|guard| guard.is_held()))
    };
    waiter.assert_running_for(Duration::from_millis(300));

    // Every command waits for the pause to end: the release reserves the
    // parked waiter and sends its script, which runs only after shutdown
    // has begun.
    server.pause_for(Duration::from_millis(600));
    release_tx.send(()).unwrap();
    std::thread::sleep(Duration::from_millis(150));
    let closer = {
        let client = client.clone();
        bounded::spawn("closer", move || client.shutdown())
    };
    closer
        .join_within(PROMPTLY)
        .expect("shutdown reports no error");

    let outcome = waiter.join_within(PROMPTLY);
    assert!(
        is_shutdown(&outcome),
        "a waiter handed the lock after shutdown began returned {outcome:?}"
    );
    let released = holder.join_within(PROMPTLY);
    assert!(
        released.is_ok(),
        "the release ran before shutdown and handed the lock over: {released:?}"
    );
    assert_eq!(
        client.stats().direct_handoffs,
        1,
        "the release handed the lock to the reserved waiter"
    );
    assert_eq!(
        holders(&server, name),
        Vec::new(),
        "the hold handed over after shutdown began was given back"
    );
}

/// What the waiter of one race saw: its call's outcome (the guard's
/// `is_held`, or the error) and when the call returned.
type Waited = (redhold::Result<bool>, Instant);

/// One release racing `shutdown()` while a thread of the same client is
/// parked in `lock()`, many times with varied timing: the release may
/// come first (the waiter may be handed the lock, or woken to take it
/// itself), or shutdown may, or they may overlap at any point of the
/// hand-over. After `shutdown()` returns, the waiter holds a guard only if
/// its call returned before shutdown began; otherwise its call failed with
/// `Shutdown` and nothing of it is left in Redis.
#[test]
fn a_release_racing_shutdown_never_hands_a_guard_out_after_it() {
    /// How much later than the start of `shutdown()` a guard may be seen
    /// returned and still count as returned before it: the waiter reads
    /// the clock right after its call returns, shutdown closes the client
    /// right after the clock is read there, and either thread may be
    /// descheduled in between. On a loaded 2-core machine that was seen to
    /// take 0.43 ms, so the bound is generous; the defect this test guards
    /// against shows in the count of refusals below, which no timing blurs.
    const SLACK: Duration = Duration::from_millis(20);
    const RACES: u32 = 200;

    let _serial = serial();
    let server = RedisServer::start();
    let mut late_guards = Vec::new();
    let mut outcomes = [0u32; 3];
    for race in 0..RACES {
        let client = server.client();
        let name = format!("race-{race}");
        // From shutdown 100 µs first to the release 1.5 ms first, most
        // of them within a release's round trip of each other.
        let step = i64::from(race * 37 % 200);
        let offset = step * step / 25 - 100;
        let (shutdown_first, delay) = (offset < 0, Duration::from_micros(offset.unsigned_abs()));

        let (held_tx, held_rx) = mpsc::channel();
        let (release_tx, release_rx) = mpsc::channel::<()>();
        let holder = {
            let lock = client.lock(name.as_str());
            bounded::spawn("holder", move || {
                let guard = lock.lock().expect("the holder takes the free lock");
                held_tx.send(()).unwrap();
                release_rx.recv().unwrap();
                if shutdown_first {
                    spin_for(delay);
                }
                guard.unlock()
            })
        };
        held_rx
            .recv_timeout(PROMPTLY)
            .expect("the holder has the lock");
        let (waited_tx, waited_rx) = mpsc::channel::<Waited>();
        let (checked_tx, checked_rx) = mpsc::channel::<()>();
        let waiter = {
            let lock = client.lock(name.as_str());
            bounded::spawn("waiter", move || {
                let outcome = lock.lock();
                let returned_at = Instant::now();
                let seen = outcome.as_ref().map(|guard| guard.is_held()).map_err(|e| {
                    // Errors are not Clone: keep the one that matters.
                    if matches!(e, Error::Shutdown) {
                        Error::Shutdown
                    } else {
                        panic!("the waiter failed with {e:?}")
                    }
                });
                waited_tx.send((seen, returned_at)).unwrap();
                // A guard stays alive (held) until the main thread looked.
                let _ = checked_rx.recv();
                drop(outcome);
            })
        };
        bounded::wait_until(PROMPTLY, || client.stats().parked_waiters == 1)
            .expect("the waiter parks");

        release_tx.send(()).unwrap();
        if !shutdown_first {
            spin_for(delay);
        }
        let shutdown_began = Instant::now();
        client.shutdown().expect("shutdown reports no error");

        let (seen, returned_at) = waited_rx
            .recv_timeout(PROMPTLY)
            .expect("the waiter's call returned");
        let released = holder.join_within(PROMPTLY);
        let left = holders(&server, &name);
        match seen {
            Ok(_) => {
                outcomes[0] += 1;
                if returned_at > shutdown_began + SLACK {
                    late_guards.push(format!(
                        "race {race}: a guard returned {:?} after shutdown began",
                        returned_at - shutdown_began
                    ));
                }
                assert!(released.is_ok(), "race {race}: {released:?}");
                assert_eq!(left.len(), 1, "race {race}: the guard's hold: {left:?}");
            }
            Err(_) if released.is_ok() => {
                outcomes[1] += 1;
                assert_eq!(
                    left,
                    Vec::new(),
                    "race {race}: released, and the waiter got nothing: the lock is free"
                );
            }
            Err(_) => {
                outcomes[2] += 1;
                assert!(is_shutdown(&released), "race {race}: {released:?}");
                assert_eq!(
                    left.len(),
                    1,
                    "race {race}: only the holder's hold, never released: {left:?}"
                );
            }
        }
        checked_tx.send(()).unwrap();
        waiter.join_within(PROMPTLY);
    }
    assert!(
        late_guards.is_empty(),
        "{} of {RACES} races handed out a guard after shutdown began \
         (guards / refused after a release / refused before it: {outcomes:?}):\n{}",
        late_guards.len(),
        late_guards.join("\n")
    );
    // Releases that went through as shutdown began must sometimes end with
    // the waiter refused: before the fix a waiter handed the lock (or woken
    // to take it) always came out with a guard, so this count was 0 in
    // every run (outcomes like [102, 0, 98]), and with the fix it is about
    // a third of the races.
    assert!(
        outcomes[1] > 0,
        "no release that went through as shutdown began ended with the waiter \
         refused: guards are handed out after shutdown began (guards / refused \
         after a release / refused before it: {outcomes:?})"
    );
}

/// Busy-waits for `duration`: finer than a sleep, for racing two threads.
fn spin_for(duration: Duration) {
    let until = Instant::now() + duration;
    while Instant::now() < until {
        std::hint::spin_loop();
    }
}
