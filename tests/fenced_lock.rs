//! The fenced lock on real redis-server processes: tokens strictly increase
//! across threads, clients and reentries; a fenced and a plain lock on the
//! same name exclude (and wake) each other; mutual exclusion under
//! contention; and the token key of `docs/wire-format.md`.

mod bounded;
mod support;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use support::contention::count_under_locks;
use support::RedisServer;

/// Generous bound for anything that should take milliseconds.
const PROMPTLY: Duration = Duration::from_secs(5);

fn token_key(name: &str) -> String {
    format!("redisson_lock_token:{{{name}}}")
}

#[test]
fn tokens_strictly_increase_across_threads_clients_and_reentries() {
    let server = RedisServer::start();
    let clients = [server.client(), server.client()];
    let name = "fenced:tokens";
    const THREADS_PER_CLIENT: usize = 4;
    const ITERATIONS: usize = 10;
    // Tokens in the order they were handed out: pushed while holding.
    let seen = Arc::new(Mutex::new(Vec::new()));
    let workers: Vec<_> = (0..2 * THREADS_PER_CLIENT)
        .map(|i| {
            let lock = clients[i % 2].fenced_lock(name);
            let seen = Arc::clone(&seen);
            bounded::spawn(&format!("fenced-{i}"), move || {
                for _ in 0..ITERATIONS {
                    let outer = lock.lock().expect("lock");
                    seen.lock().unwrap().push(outer.token());
                    let inner = lock.lock().expect("reentry");
                    seen.lock().unwrap().push(inner.token());
                    let tried = lock.try_lock().expect("try_lock").expect("reentry");
                    seen.lock().unwrap().push(tried.token());
                    drop(tried);
                    drop(inner);
                    outer.unlock().expect("release");
                }
            })
        })
        .collect();
    for worker in workers {
        worker.join_within(Duration::from_secs(30));
    }
    let tokens = seen.lock().unwrap().clone();
    let n = 2 * THREADS_PER_CLIENT * ITERATIONS * 3;
    assert_eq!(tokens.len(), n);
    for pair in tokens.windows(2) {
        assert!(
            pair[0] < pair[1],
            "token {} came after {}",
            pair[1],
            pair[0]
        );
    }
    // The counter has counted every acquire and never expires.
    let counter: u64 = server.cmd(&["GET", &token_key(name)]);
    assert_eq!(counter, *tokens.last().expect("tokens"));
    assert_eq!(counter, n as u64, "one token per acquire, starting at 1");
    assert_eq!(server.cmd::<i64>(&["PTTL", &token_key(name)]), -1);
    assert!(!server.exists(name));
}

#[test]
fn every_acquire_method_hands_out_a_token() {
    let server = RedisServer::start();
    let client = server.client();
    let name = "fenced:methods";
    // A counter left by earlier holders (say, Redisson clients) is continued.
    server.cmd::<()>(&["SET", &token_key(name), "1000"]);
    let lock = client.fenced_lock(name);
    let a = lock.lock().expect("lock");
    assert_eq!(a.token(), 1001);
    let b = lock
        .lock_with_lease(Duration::from_secs(10))
        .expect("lock_with_lease");
    let c = lock
        .try_lock_for(Duration::from_millis(100))
        .expect("try_lock_for")
        .expect("reentry");
    let d = lock
        .try_lock_for_with_lease(Duration::from_millis(100), Duration::from_secs(10))
        .expect("try_lock_for_with_lease")
        .expect("reentry");
    let e = lock
        .lock_interruptibly(&redhold::Interrupt::new())
        .expect("lock_interruptibly");
    assert_eq!(
        [b.token(), c.token(), d.token(), e.token()],
        [1002, 1003, 1004, 1005]
    );
    assert_eq!(lock.hold_count().unwrap(), 5);
    drop((e, d, c, b));
    a.unlock().expect("release");

    // The counter outlives the lock, force_unlock included.
    let f = lock.lock().expect("lock again");
    assert!(lock.force_unlock().unwrap());
    assert!(matches!(f.unlock(), Err(redhold::Error::LockLost { .. })));
    let other = server.client().fenced_lock(name);
    let g = bounded::spawn("later", move || other.lock().map(|g| g.token()))
        .join_within(PROMPTLY)
        .expect("lock on another client");
    assert_eq!(g, 1007);
}

#[test]
fn the_layout_is_the_plain_lock_plus_a_token_counter() {
    let server = RedisServer::start();
    let client = server.client();
    let name = "fenced:layout";
    let lock = client.fenced_lock(name);
    let outer = lock.lock().expect("lock");
    let inner = lock.lock().expect("reentry");
    let hash: HashMap<String, String> = server.cmd(&["HGETALL", name]);
    assert_eq!(hash.len(), 1, "{hash:?}");
    let (field, count) = hash.into_iter().next().expect("one holder");
    let thread = field
        .strip_prefix(&format!("{}:", client.id()))
        .unwrap_or_else(|| panic!("field {field:?} is uuid:thread"));
    assert!(thread.parse::<u64>().is_ok(), "{field}");
    assert_eq!(count, "2");
    let ttl: i64 = server.cmd(&["PTTL", name]);
    assert!(ttl > 20_000 && ttl <= 30_000, "watchdog TTL, got {ttl}");
    assert_eq!(server.cmd::<u64>(&["GET", &token_key(name)]), 2);
    drop(inner);
    drop(outer);
    assert!(!server.exists(name));
    assert!(server.exists(&token_key(name)), "the counter stays");

    // A name with a hash tag keeps it in the helper key.
    let tagged = client.fenced_lock("{ledger}:7");
    let guard = tagged.lock().expect("lock");
    assert_eq!(guard.token(), 1);
    assert!(server.exists("redisson_lock_token:{ledger}:7"));
    drop(guard);
}

#[test]
fn fenced_and_plain_locks_on_one_name_exclude_and_wake_each_other() {
    let server = RedisServer::start();
    let (a, b) = (server.client(), server.client());
    let name = "fenced:shared";

    // Plain holder, fenced waiter: the plain release wakes it.
    let plain = a.lock(name).lock().expect("plain lock");
    let fenced = b.fenced_lock(name);
    let probe = fenced.clone();
    let tried = bounded::spawn("fenced-try", move || probe.try_lock().map(|g| g.is_some()))
        .join_within(PROMPTLY);
    assert!(
        matches!(tried, Ok(false)),
        "fenced try while plain-held: {tried:?}"
    );
    let waiter = bounded::spawn("fenced-waiter", move || {
        let guard = fenced.lock().expect("fenced lock");
        let token = guard.token();
        guard.unlock().expect("release");
        token
    });
    waiter.assert_running_for(Duration::from_millis(300));
    plain.unlock().expect("plain release");
    // The 30 s TTL means only the release message can wake it in time.
    assert_eq!(waiter.join_within(PROMPTLY), 1);

    // Fenced holder, plain waiter: the fenced release wakes it.
    let fenced = a.fenced_lock(name).lock().expect("fenced lock");
    assert_eq!(fenced.token(), 2);
    let plain = b.lock(name);
    let probe = plain.clone();
    let tried = bounded::spawn("plain-try", move || probe.try_lock().map(|g| g.is_some()))
        .join_within(PROMPTLY);
    assert!(
        matches!(tried, Ok(false)),
        "plain try while fenced-held: {tried:?}"
    );
    let waiter = bounded::spawn("plain-waiter", move || {
        let guard = plain.lock()?;
        guard.unlock()
    });
    waiter.assert_running_for(Duration::from_millis(300));
    fenced.unlock().expect("fenced release");
    waiter
        .join_within(PROMPTLY)
        .expect("plain lock after the fenced one");
    assert!(!server.exists(name));
    // A plain acquire does not count.
    assert_eq!(server.cmd::<u64>(&["GET", &token_key(name)]), 2);
}

#[test]
fn mutual_exclusion_under_contention() {
    let server = RedisServer::start();
    let clients = [server.client(), server.client()];
    let name = "fenced:counter";
    // Four threads on each of two clients.
    let locks = (0..8).map(|i| clients[i % 2].fenced_lock(name)).collect();
    let total = count_under_locks(
        &server,
        locks,
        "fenced:counter:value",
        25,
        Duration::from_secs(30),
    );
    assert_eq!(total, 8 * 25);
    assert!(!server.exists(name));
}
