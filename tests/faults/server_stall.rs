//! The server stalled with `DEBUG SLEEP` (it accepts connections but answers
//! nothing): calls that do not wait fail with a timeout error within the
//! configured bounds, a waiting `lock()` waits the stall out (promise 4),
//! and a release whose reply was lost, sent again, releases one
//! hold only (the unlock latch).

use std::thread;
use std::time::{Duration, Instant};

use crate::bounded::{self, Bounded};
use crate::common::PROMPTLY;
use crate::support::{server_version, RedisServer};
use redhold::{Lock, LockKind};

const CONNECT_TIMEOUT: Duration = Duration::from_millis(300);
const RESPONSE_TIMEOUT: Duration = Duration::from_millis(300);
const RETRY_DELAY: Duration = Duration::from_millis(50);

/// How long `DEBUG SLEEP` takes to reach the server and start blocking it.
const STALL_SETTLES: Duration = Duration::from_millis(150);

fn debuggable_server() -> RedisServer {
    RedisServer::start_with_args(server_version().debug_command_args())
}

/// Blocks the whole server for `duration` with `DEBUG SLEEP`, sent from a
/// connection of its own on another thread, and returns once it runs,
/// with the moment just before it was sent: the server sleeps from some
/// moment after that one, so it wakes no earlier than it plus `duration`.
fn stall(server: &RedisServer, duration: Duration) -> (Bounded<()>, Instant) {
    let mut conn = server.connection();
    let seconds = format!("{:.3}", duration.as_secs_f64());
    let (sent_tx, sent_rx) = std::sync::mpsc::channel();
    let staller = bounded::spawn("staller", move || {
        let _ = sent_tx.send(Instant::now());
        redis::cmd("DEBUG")
            .arg("SLEEP")
            .arg(seconds)
            .query::<()>(&mut conn)
            .expect("DEBUG SLEEP");
    });
    let sent = sent_rx.recv().expect("the staller started");
    thread::sleep(STALL_SETTLES);
    (staller, sent)
}

fn client(server: &RedisServer, retries: u32) -> redhold::Client {
    server
        .builder()
        .connect_timeout(CONNECT_TIMEOUT)
        .response_timeout(RESPONSE_TIMEOUT)
        .retry_attempts(retries)
        .retry_delay(RETRY_DELAY)
        .build()
        .expect("client")
}

#[test]
fn calls_fail_with_a_timeout_while_the_server_is_stalled() {
    let server = debuggable_server();
    const RETRIES: u32 = 1;
    let client = client(&server, RETRIES);
    // Each attempt may spend the connect timeout (the stalled server accepts
    // the connection but does not answer its handshake) and the response
    // timeout.
    let bound = (CONNECT_TIMEOUT + RESPONSE_TIMEOUT) * (RETRIES + 1) + RETRY_DELAY * RETRIES;
    let slack = Duration::from_millis(700);
    let stall_for = Duration::from_secs(3);
    assert!(bound + slack + STALL_SETTLES < stall_for);

    let lock = client.lock("stalled");
    let (staller, stall_sent) = stall(&server, stall_for);
    let started = Instant::now();
    // Three calls at once, each on its own connection. The waiting one
    // rides the stall out (promise 4) and takes the lock once the server
    // wakes; the other two fail within the bound.
    let waiting = {
        let lock = lock.clone();
        bounded::spawn("lock", move || {
            lock.lock().map(|guard| (Instant::now(), guard.unlock()))
        })
    };
    let calls = [
        {
            let lock = lock.clone();
            bounded::spawn("is_locked", move || lock.is_locked().map(drop))
        },
        {
            let lock = lock.clone();
            bounded::spawn("try_lock", move || lock.try_lock().map(drop))
        },
    ];
    for call in calls {
        match call.join_within(stall_for + PROMPTLY) {
            Err(e) => assert!(e.is_connection_error(), "expected a timeout, got {e:?}"),
            Ok(()) => panic!("a call succeeded while the server slept"),
        }
        let took = started.elapsed();
        assert!(
            took <= bound + slack,
            "a call took {took:?} to fail against a stalled server, bound {bound:?}"
        );
    }
    staller.join_within(stall_for + PROMPTLY);
    let awake = Instant::now();
    match waiting.join_within(PROMPTLY) {
        Ok((got, unlocked)) => {
            unlocked.expect("unlock after the stall");
            // No earlier than the stall's end: the server went to sleep
            // after the stall was sent.
            let slept = got.duration_since(stall_sent);
            assert!(
                slept >= stall_for,
                "got the lock {slept:?} into a {stall_for:?} stall"
            );
        }
        Err(e) => panic!("lock() across a stall: {}", e.report()),
    }
    assert!(awake.elapsed() < PROMPTLY);

    // Once the server is awake the same client works again.
    let guard = lock.lock().expect("lock after the stall");
    guard.unlock().expect("unlock after the stall");
    assert!(!lock.is_locked().expect("is_locked after the stall"));
}

/// Runs `call` while the server sleeps for 1.5 s: its first attempt times
/// out (the server runs it later, its reply going nowhere) and a retry
/// on a new connection runs once the server is awake.
fn during_a_stall<T>(server: &RedisServer, call: impl FnOnce() -> T) -> T {
    let (staller, _) = stall(server, Duration::from_millis(1500));
    let outcome = call();
    staller.join_within(PROMPTLY);
    outcome
}

/// Fails unless the release script ran at least twice since the stats were
/// reset: a first attempt whose reply was lost, and a retry.
fn assert_the_release_was_retried(server: &RedisServer) {
    let runs = server.scripts_run();
    assert!(
        runs >= 2,
        "the release script ran {runs} time(s): the test did not force a lost reply \
         and a retry"
    );
}

/// Two holds of `lock`, then one release whose first attempt's reply is
/// lost: the retry replays the latched reply, so exactly one hold remains.
fn a_retried_release_releases_one_hold_only<K: LockKind>(server: &RedisServer, lock: Lock<K>) {
    let lease = Duration::from_secs(60);
    // Load the scripts before the stall, so that each attempt is one EVALSHA.
    lock.lock_with_lease(lease)
        .and_then(|g| g.unlock())
        .expect("warm-up");

    let first = lock.lock_with_lease(lease).expect("first hold");
    let second = lock.lock_with_lease(lease).expect("second hold");
    assert_eq!(lock.hold_count().expect("hold_count"), 2);
    let _: () = server.cmd(&["CONFIG", "RESETSTAT"]);

    // The release is sent while the server sleeps; its first attempt times
    // out and its connection is dropped, but Redis still runs the command
    // once it wakes up, and the reply goes nowhere. A retry, on a new
    // connection, runs too.
    during_a_stall(server, || second.unlock())
        .expect("the release succeeds once the server is awake");

    assert_the_release_was_retried(server);

    assert_eq!(
        lock.hold_count().expect("hold_count"),
        1,
        "the retried release removed a second hold"
    );
    assert!(first.is_held());
    first.unlock().expect("releasing the last hold");
    assert!(!lock.is_locked().expect("is_locked"));
}

/// One hold of `lock`, released with a lost first reply: the freeing
/// release latched its reply, so the retry replays it and succeeds, where
/// finding the field gone alone would have to count as a lost lock.
fn a_retried_release_that_freed_the_lock_succeeds<K: LockKind>(
    server: &RedisServer,
    lock: Lock<K>,
) {
    let lease = Duration::from_secs(60);
    lock.lock_with_lease(lease)
        .and_then(|g| g.unlock())
        .expect("warm-up");

    let only = lock.lock_with_lease(lease).expect("the only hold");
    let warm_up: Vec<String> = server.cmd(&["KEYS", "redisson_unlock_latch:*"]);
    let _: () = server.cmd(&["CONFIG", "RESETSTAT"]);

    during_a_stall(server, || only.unlock())
        .expect("the release succeeds once the server is awake");

    assert_the_release_was_retried(server);
    assert!(!lock.is_locked().expect("is_locked"));
    let mut latches: Vec<String> = server.cmd(&["KEYS", "redisson_unlock_latch:*"]);
    latches.retain(|latch| !warm_up.contains(latch));
    assert_eq!(latches.len(), 1, "the freeing release's latch: {latches:?}");
    let ttl: i64 = server.cmd(&["PTTL", &latches[0]]);
    assert!(ttl > 0, "the latch expires on its own: PTTL {ttl}");
}

/// One test per lock kind and case, each on a server of its own (a stall
/// blocks the whole server).
macro_rules! retried_release_tests {
    ($($kind:ident: $lock:expr;)*) => {
        $(
            mod $kind {
                use super::*;

                #[test]
                fn a_retried_release_whose_reply_was_lost_releases_one_hold_only() {
                    let server = debuggable_server();
                    // Enough retries to outlast the stall.
                    let client = client(&server, 10);
                    let make: fn(&redhold::Client) -> Lock<_> = $lock;
                    a_retried_release_releases_one_hold_only(&server, make(&client));
                }

                #[test]
                fn a_retried_release_that_freed_the_lock_succeeds() {
                    let server = debuggable_server();
                    let client = client(&server, 10);
                    let make: fn(&redhold::Client) -> Lock<_> = $lock;
                    super::a_retried_release_that_freed_the_lock_succeeds(&server, make(&client));
                }
            }
        )*
    };
}

retried_release_tests! {
    plain: |client| client.lock("stalled-release");
    fenced: |client| client.fenced_lock("stalled-release");
    spin: |client| client.spin_lock("stalled-release");
    fair: |client| client.fair_lock("stalled-release");
    read: |client| client.read_write_lock("stalled-release").read();
    write: |client| client.read_write_lock("stalled-release").write();
}

/// Issue 33, defect 4: a `try_acquire` that times out on a stalled server
/// must not leave its permit taken when the server wakes and runs the
/// queued acquire. Its give-back cannot reach a stalled server on a new
/// connection (the handshake times out too): it is written right behind
/// the late acquire, on the same connection, and runs after it.
#[test]
fn a_semaphore_acquire_that_runs_after_its_caller_gave_up_is_given_back() {
    for expirable in [false, true] {
        let server = debuggable_server();
        let client = client(&server, 1);
        let name = if expirable { "stall-exp" } else { "stall-sem" };
        // Taken and given back once first, so that the server has the
        // acquire script: else the late EVALSHA would only say NOSCRIPT.
        if expirable {
            let sem = client.permit_expirable_semaphore(name);
            assert!(sem.try_set_permits(1).unwrap());
            let permit = sem.try_acquire(Duration::from_secs(600)).unwrap();
            permit.expect("a permit").release().unwrap();
        } else {
            let sem = client.semaphore(name);
            assert!(sem.try_set_permits(1).unwrap());
            sem.try_acquire()
                .unwrap()
                .expect("a permit")
                .release()
                .unwrap();
        }
        let (staller, sent) = stall(&server, Duration::from_secs(2));
        let taken = if expirable {
            client
                .permit_expirable_semaphore(name)
                .try_acquire(Duration::from_secs(600))
                .map(|p| p.map(|p| p.forget()))
        } else {
            client
                .semaphore(name)
                .try_acquire()
                .map(|p| p.map(|p| p.forget()))
        };
        assert!(taken.is_err(), "the stalled server answered: {taken:?}");
        staller.join_within(Duration::from_secs(10));
        // The queued acquire and its undo run as the server wakes.
        let woke = sent + Duration::from_secs(2);
        thread::sleep(woke.saturating_duration_since(Instant::now()));
        let back = bounded::wait_until(PROMPTLY, || server.cmd::<String>(&["GET", name]) == "1");
        assert!(
            back.is_some(),
            "{name}: the permit taken by the late acquire was not given back \
             ({} left)",
            server.cmd::<String>(&["GET", name])
        );
    }
}

/// One kind's `try_lock` with a long lease: whether it took the lock (and
/// gave it back).
type TryLock = Box<dyn Fn() -> redhold::Result<bool> + Send>;

/// Issue 33, defect 4, for every lock kind: an acquire that times out on a
/// stalled server fails its call, and the server runs it when it wakes.
/// Its undo is written behind it on the same connection, so the lock is
/// free then, not held for the lease (600 s) by a hold no guard owns.
#[test]
fn an_acquire_that_runs_after_its_caller_gave_up_is_undone_for_every_kind() {
    let server = debuggable_server();
    let mut locks: Vec<(String, TryLock)> = Vec::new();
    let mut add = |name: &str, try_it: TryLock| {
        // Taken and given back once, so that the server has the scripts.
        assert!(
            try_it().expect("a first try"),
            "{name}: busy before the stall"
        );
        locks.push((name.to_owned(), try_it));
    };
    const LEASE: Duration = Duration::from_secs(600);
    // A client per kind: each has an idle connection its acquire goes out
    // on at once (a new one would not get past its handshake).
    macro_rules! kind {
        ($name:literal, $lock:ident $(. $then:ident())?) => {{
            let lock = client(&server, 1).$lock($name)$(.$then())?;
            add(
                $name,
                Box::new(move || {
                    lock.try_lock_for_with_lease(Duration::ZERO, LEASE)
                        .map(|guard| guard.map(|g| g.unlock().expect("unlock")).is_some())
                }),
            );
        }};
    }
    kind!("late:plain", lock);
    kind!("late:fair", fair_lock);
    kind!("late:fenced", fenced_lock);
    kind!("late:spin", spin_lock);
    kind!("late:rw-r", read_write_lock.read());
    kind!("late:rw-w", read_write_lock.write());

    let (staller, sent) = stall(&server, Duration::from_secs(2));
    let tries: Vec<_> = locks
        .into_iter()
        .map(|(name, try_it)| bounded::spawn("late acquire", move || (name, try_it())))
        .collect();
    for attempt in tries {
        let (name, outcome) = attempt.join_within(Duration::from_secs(10));
        assert!(
            outcome.is_err(),
            "{name}: the stalled server answered: {outcome:?}"
        );
    }
    staller.join_within(Duration::from_secs(10));
    let woke = sent + Duration::from_secs(2);
    thread::sleep(woke.saturating_duration_since(Instant::now()));
    let names = [
        "late:plain",
        "late:fair",
        "late:fenced",
        "late:spin",
        "late:rw-r",
        "late:rw-w",
    ];
    let none_left = || {
        names
            .iter()
            .all(|name| server.cmd::<i64>(&["EXISTS", name]) == 0)
    };
    let _ = bounded::wait_until(PROMPTLY, none_left);
    let stayed: Vec<String> = names
        .into_iter()
        .filter(|name| server.cmd::<i64>(&["EXISTS", name]) == 1)
        .map(|name| format!("{name} (PTTL {} ms)", server.cmd::<i64>(&["PTTL", name])))
        .collect();
    assert!(
        stayed.is_empty(),
        "late acquires' holds stayed, of a {LEASE:?} lease: {stayed:?}"
    );
}
