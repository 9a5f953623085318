//! The reentrant lock's behaviour on one server: reentrancy, mutual
//! exclusion, the query methods, leaking and explicit unlock, and release on
//! panic.

mod bounded;
mod support;

use std::collections::HashMap;
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use redhold::Error;
use support::RedisServer;

/// Generous bound for anything that should take milliseconds.
const PROMPTLY: Duration = Duration::from_secs(5);

/// The lock hash as Redis has it: holder field → hold count.
fn holders(server: &RedisServer, name: &str) -> HashMap<String, String> {
    server.cmd(&["HGETALL", name])
}

/// The single holder field of `name`, checked to be the only one.
fn only_field(server: &RedisServer, name: &str) -> (String, String) {
    let all = holders(server, name);
    assert_eq!(
        all.len(),
        1,
        "expected exactly one holder of {name}: {all:?}"
    );
    all.into_iter().next().expect("one entry")
}

#[test]
fn reentrant_holds_are_counted_in_redis() {
    let server = RedisServer::start();
    let client = server.client();
    let lock = client.lock("orders:42");

    let first = lock.lock().expect("first hold");
    let (field, count) = only_field(&server, "orders:42");
    assert_eq!(count, "1");
    let prefix = format!("{}:", client.id());
    let thread_no = field
        .strip_prefix(&prefix)
        .unwrap_or_else(|| panic!("field {field:?} does not start with {prefix:?}"));
    assert!(
        thread_no.parse::<u64>().is_ok(),
        "thread part {thread_no:?} of {field:?} is not a decimal number"
    );

    let second = lock.lock().expect("second hold, same thread");
    assert_eq!(
        server.cmd::<Option<String>>(&["HGET", "orders:42", &field]),
        Some("2".to_owned())
    );
    assert_eq!(lock.hold_count().unwrap(), 2);

    // try_lock re-enters too, and a fresh handle on the same name is the same lock.
    let third = client
        .lock("orders:42")
        .try_lock()
        .expect("try_lock")
        .expect("re-entered without waiting");
    assert_eq!(
        only_field(&server, "orders:42"),
        (field.clone(), "3".into())
    );

    drop(third);
    drop(second);
    assert_eq!(
        only_field(&server, "orders:42"),
        (field.clone(), "1".into())
    );
    let ttl: i64 = server.cmd(&["PTTL", "orders:42"]);
    assert!(ttl > 0, "a partly released lock keeps its TTL, got {ttl}");

    first.unlock().expect("last release");
    assert!(
        !server.exists("orders:42"),
        "fully released lock is deleted"
    );
    assert_eq!(lock.hold_count().unwrap(), 0);
}

#[test]
fn another_thread_of_the_same_client_is_excluded() {
    let server = RedisServer::start();
    let client = server.client();
    let lock = client.lock("shared");
    let guard = lock.lock().unwrap();
    let main_field = only_field(&server, "shared").0;

    let other = lock.clone();
    let seen = bounded::spawn("other-thread", move || {
        (
            other.try_lock().map(|g| g.is_some()),
            other.is_locked(),
            other.is_held_by_current_thread(),
            other.hold_count(),
        )
    })
    .join_within(PROMPTLY);
    assert!(
        matches!(seen.0, Ok(false)),
        "try_lock from another thread: {:?}",
        seen.0
    );
    assert!(matches!(seen.1, Ok(true)), "is_locked: {:?}", seen.1);
    assert!(
        matches!(seen.2, Ok(false)),
        "is_held_by_current_thread: {:?}",
        seen.2
    );
    assert!(matches!(seen.3, Ok(0)), "hold_count: {:?}", seen.3);

    drop(guard);
    // Once released, the other thread gets it under its own field.
    let other = lock.clone();
    let other_field = {
        let server_url = server.url();
        bounded::spawn("taker", move || {
            let _g = other.lock().expect("free lock");
            let mut con = redis::Client::open(server_url)
                .and_then(|c| c.get_connection())
                .expect("raw connection");
            let all: HashMap<String, String> = redis::cmd("HGETALL")
                .arg("shared")
                .query(&mut con)
                .expect("HGETALL");
            all.into_keys().collect::<Vec<_>>()
        })
        .join_within(PROMPTLY)
    };
    assert_eq!(other_field.len(), 1);
    assert_ne!(
        other_field[0], main_field,
        "threads must have distinct fields"
    );
    assert!(!server.exists("shared"));
}

#[test]
fn query_methods_follow_the_lock_state() {
    let server = RedisServer::start();
    let client = server.client();
    let lock = client.lock("query");

    assert!(!lock.is_locked().unwrap());
    assert!(!lock.is_held_by_current_thread().unwrap());
    assert_eq!(lock.hold_count().unwrap(), 0);
    assert_eq!(lock.remaining_lease().unwrap(), None);
    assert_eq!(lock.name(), "query");

    let guard = lock.lock_with_lease(Duration::from_secs(10)).unwrap();
    assert!(guard.is_held());
    assert_eq!(guard.lock().name(), "query");
    assert!(lock.is_locked().unwrap());
    assert!(lock.is_held_by_current_thread().unwrap());
    assert_eq!(lock.hold_count().unwrap(), 1);
    let left = lock.remaining_lease().unwrap().expect("locked, so Some");
    assert!(
        left <= Duration::from_secs(10) && left > Duration::from_secs(5),
        "remaining lease {left:?} for a 10 s lease"
    );

    // Another client sees it locked, but not held by its thread.
    let other = server.client().lock("query");
    assert!(other.is_locked().unwrap());
    assert!(!other.is_held_by_current_thread().unwrap());
    assert_eq!(other.hold_count().unwrap(), 0);
    assert!(other.remaining_lease().unwrap().is_some());

    drop(guard);
    assert!(!lock.is_locked().unwrap());
    assert_eq!(lock.remaining_lease().unwrap(), None);

    // Without a lease, the TTL is the watchdog timeout.
    let guard = lock.lock().unwrap();
    let left = lock.remaining_lease().unwrap().expect("locked");
    assert!(
        left <= client.watchdog_timeout() && left > Duration::from_secs(20),
        "remaining lease {left:?} under a 30 s watchdog"
    );
    drop(guard);
}

#[test]
fn guard_can_own_a_temporary_lock_handle() {
    let server = RedisServer::start();
    let client = server.client();
    // The `Lock` is a temporary here: the guard must keep what it needs.
    let guard = client.lock("temporary").lock().unwrap();
    assert!(server.exists("temporary"));
    drop(client);
    guard
        .unlock()
        .expect("release through the guard's own handle");
    assert!(!server.exists("temporary"));
}

#[test]
fn eight_threads_on_two_clients_exclude_each_other() {
    const THREADS: usize = 8;
    const ROUNDS: usize = 25;
    let server = RedisServer::start();
    let clients = [server.client(), server.client()];
    server.cmd::<()>(&["SET", "counter", "0"]);
    let inside = Arc::new(AtomicUsize::new(0));

    let workers: Vec<_> = (0..THREADS)
        .map(|i| {
            let lock = clients[i % 2].lock("counter-lock");
            let mut con = server.connection();
            let inside = Arc::clone(&inside);
            bounded::spawn(&format!("worker-{i}"), move || {
                for _ in 0..ROUNDS {
                    let guard = lock.lock().expect("lock");
                    assert_eq!(
                        inside.fetch_add(1, Ordering::SeqCst),
                        0,
                        "two threads inside the critical section"
                    );
                    let n: u64 = redis::cmd("GET").arg("counter").query(&mut con).unwrap();
                    // Widen the window in which a broken lock would lose updates.
                    thread::yield_now();
                    redis::cmd("SET")
                        .arg("counter")
                        .arg(n + 1)
                        .query::<()>(&mut con)
                        .unwrap();
                    inside.fetch_sub(1, Ordering::SeqCst);
                    guard.unlock().expect("release");
                }
            })
        })
        .collect();
    for worker in workers {
        worker.join_within(Duration::from_secs(60));
    }
    let total: u64 = server.cmd(&["GET", "counter"]);
    assert_eq!(total, (THREADS * ROUNDS) as u64);
    assert!(!server.exists("counter-lock"));
}

#[test]
fn unlock_without_a_hold_is_not_held() {
    let server = RedisServer::start();
    let client = server.client();
    let lock = client.lock("nobody");

    match lock.unlock() {
        Err(Error::NotHeld { lock }) => assert_eq!(lock, "nobody"),
        other => panic!("unlock of a free lock: expected NotHeld, got {other:?}"),
    }

    // Held by someone else: still NotHeld, and their hold is untouched.
    let other = server.client().lock("nobody");
    let theirs = other.lock().unwrap();
    let before = holders(&server, "nobody");
    let err = lock.unlock().expect_err("we hold nothing");
    assert!(matches!(err, Error::NotHeld { .. }), "{err:?}");
    assert!(err.to_string().contains("nobody"), "{err}");
    assert_eq!(holders(&server, "nobody"), before);
    drop(theirs);
}

#[test]
fn leaked_hold_stays_renewed_until_unlock() {
    let server = RedisServer::start();
    let client = server.client_with_watchdog(Duration::from_secs(1));
    let lock = client.lock("leaky");

    lock.lock().unwrap().leak();
    assert_eq!(lock.hold_count().unwrap(), 1);
    // Past the 1 s watchdog timeout: only renewal keeps it alive.
    thread::sleep(Duration::from_millis(1500));
    assert!(lock.is_locked().unwrap(), "a leaked hold is still renewed");

    lock.unlock().expect("explicit unlock of the leaked hold");
    assert!(!server.exists("leaky"));
    assert!(matches!(lock.unlock(), Err(Error::NotHeld { .. })));

    // A leaked leased hold can be released the same way.
    lock.lock_with_lease(Duration::from_secs(10))
        .unwrap()
        .leak();
    assert!(server.exists("leaky"));
    lock.unlock()
        .expect("explicit unlock of the leaked leased hold");
    assert!(!server.exists("leaky"));
}

#[test]
fn explicit_unlock_releases_one_of_several_holds() {
    let server = RedisServer::start();
    let client = server.client();
    let lock = client.lock("mixed");
    let guard = lock.lock().unwrap();
    lock.lock().unwrap().leak();
    assert_eq!(lock.hold_count().unwrap(), 2);
    lock.unlock().unwrap();
    assert_eq!(lock.hold_count().unwrap(), 1);
    guard.unlock().unwrap();
    assert!(!server.exists("mixed"));
}

#[test]
fn guard_dropped_by_a_panic_releases_the_lock() {
    let server = RedisServer::start();
    let client = server.client();
    let lock = client.lock("panicky");

    let outcome = panic::catch_unwind(AssertUnwindSafe(|| {
        let _guard = lock.lock().unwrap();
        let _again = lock.lock().unwrap();
        assert!(server.exists("panicky"));
        panic!("boom inside the critical section");
    }));
    assert!(outcome.is_err());
    assert!(!server.exists("panicky"), "unwinding released both holds");

    // Same on a thread that dies of the panic.
    let on_thread = lock.clone();
    let died = bounded::spawn("dies", move || {
        panic::catch_unwind(AssertUnwindSafe(|| {
            let _guard = on_thread.lock().unwrap();
            panic!("boom on another thread");
        }))
        .is_err()
    })
    .join_within(PROMPTLY);
    assert!(died);
    assert!(!server.exists("panicky"));
    let other = server.client().lock("panicky");
    assert!(
        other.try_lock().unwrap().is_some(),
        "free for everyone again"
    );
}

/// The commands the server ran since `CONFIG RESETSTAT` as (name, calls),
/// without the `INFO` and `CONFIG` the test sends itself. Commands a script
/// runs are counted too, so the scripts' own names show up beside EVALSHA.
fn commands_run(server: &RedisServer) -> HashMap<String, u64> {
    let info: String = server.cmd(&["INFO", "commandstats"]);
    info.lines()
        .filter_map(|l| l.strip_prefix("cmdstat_"))
        .filter_map(|l| {
            let (name, rest) = l.split_once(':')?;
            let calls = rest.split(',').find_map(|kv| kv.strip_prefix("calls="))?;
            Some((name.to_owned(), calls.parse().ok()?))
        })
        .filter(|(name, _)| name != "info" && !name.starts_with("config"))
        .collect()
}

/// One acquire and release of some lock.
type Pair<'a> = Box<dyn Fn() -> redhold::Result<()> + 'a>;

/// An uncontended acquire and release is two round trips, one script
/// each, for every kind: latching every release's reply (issue 21) is done
/// inside the release script, not by another command.
#[test]
fn an_uncontended_acquire_and_release_is_two_scripts_and_nothing_else() {
    let server = RedisServer::start();
    let client = server.client();
    let rw = client.read_write_lock("pair-rw");
    let pairs: Vec<(&str, Pair<'_>)> = vec![
        ("plain", Box::new(|| client.lock("pair").lock()?.unlock())),
        (
            "fenced",
            Box::new(|| client.fenced_lock("pair-f").lock()?.unlock()),
        ),
        (
            "spin",
            Box::new(|| client.spin_lock("pair-s").lock()?.unlock()),
        ),
        (
            "fair",
            Box::new(|| client.fair_lock("pair-fair").lock()?.unlock()),
        ),
        ("read", Box::new(|| rw.read().lock()?.unlock())),
        ("write", Box::new(|| rw.write().lock()?.unlock())),
    ];
    // What the scripts call inside; anything else would be a round trip.
    let in_scripts = [
        "hset", "hget", "hexists", "hincrby", "hdel", "hlen", "hkeys", "pexpire", "pttl", "del",
        "exists", "set", "get", "incr", "publish", "lindex", "lpop", "zscore", "zrem", "rpush",
        "zadd", "lrange", "llen", "zrange", "type",
    ];
    for (kind, pair) in pairs {
        pair().expect("warm-up: loads the scripts");
        let _: () = server.cmd(&["CONFIG", "RESETSTAT"]);
        pair().unwrap_or_else(|e| panic!("{kind}: {e}"));
        let run = commands_run(&server);
        assert_eq!(run.get("evalsha"), Some(&2), "{kind}: {run:?}");
        let others: Vec<_> = run
            .keys()
            .filter(|name| *name != "evalsha" && !in_scripts.contains(&name.as_str()))
            .collect();
        assert!(
            others.is_empty(),
            "{kind}: commands beside the scripts: {run:?}"
        );
    }
}
