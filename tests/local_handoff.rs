//! Direct hand-over between threads of one client: a release that frees a
//! lock while a thread of the same client is parked on it writes that
//! thread's field in place of its own, keeps the key alive with the
//! successor's lease, publishes nothing, and unparks the successor. Other
//! clients (other processes) still get the lock: a run of hand-overs is
//! bounded, then a release announces it.

mod bounded;
mod support;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use support::RedisServer;

/// Far above anything a loaded machine needs for one hand-over, far below
/// the holders' 30 s TTL: a waiter done within it was handed the lock.
const WAKE_LIMIT: Duration = Duration::from_secs(5);

/// How long a waiter must stay blocked to count as parked.
const STAYS_BLOCKED: Duration = Duration::from_millis(300);

/// The lock's hash as (field, holds) pairs.
fn holders(server: &RedisServer, name: &str) -> Vec<(String, i64)> {
    let mut pairs: Vec<(String, i64)> = server.cmd(&["HGETALL", name]);
    pairs.sort();
    pairs
}

/// Hands `name` from the main thread to a parked thread of the same
/// client until one hand-over is direct (the first tries can find the
/// waiter not yet parked); returns what the successor saw while holding:
/// the hash and the PTTL, and the client's stats after.
fn hand_over_directly(
    server: &RedisServer,
    client: &redhold::Client,
    name: &str,
    successor_lease: Option<Duration>,
) -> (Vec<(String, i64)>, i64) {
    for _ in 0..10 {
        let before = client.stats().direct_handoffs;
        let guard = client.lock(name).lock().unwrap();
        let lock = client.lock(name);
        let url = server.url();
        let name_owned = name.to_owned();
        let waiter = bounded::spawn("successor", move || {
            let guard = match successor_lease {
                Some(lease) => lock.lock_with_lease(lease),
                None => lock.lock(),
            }
            .expect("the successor gets the lock");
            let mut con = redis::Client::open(url).unwrap().get_connection().unwrap();
            let seen: Vec<(String, i64)> = redis::cmd("HGETALL")
                .arg(&name_owned)
                .query(&mut con)
                .unwrap();
            let pttl: i64 = redis::cmd("PTTL").arg(&name_owned).query(&mut con).unwrap();
            drop(guard);
            (seen, pttl)
        });
        waiter.assert_running_for(STAYS_BLOCKED);
        drop(guard);
        let (seen, pttl) = waiter.join_within(WAKE_LIMIT);
        if client.stats().direct_handoffs > before {
            return (seen, pttl);
        }
    }
    panic!("ten releases with a parked thread of the same client and no direct hand-over");
}

#[test]
fn a_parked_thread_is_handed_the_lock_with_its_own_field_and_lease() {
    let server = RedisServer::start();
    let client = server.client();
    // The holder keeps the 30 s watchdog TTL; the successor asks for 7 s.
    let (seen, pttl) = hand_over_directly(&server, &client, "handed", Some(Duration::from_secs(7)));
    assert_eq!(seen.len(), 1, "one holder field: {seen:?}");
    assert_eq!(seen[0].1, 1, "one hold: {seen:?}");
    assert!(seen[0].0.starts_with(&client.id().to_string()), "{seen:?}");
    assert!(
        pttl > 0 && pttl <= 7_000,
        "the successor's lease, not the holder's 30 s: {pttl}"
    );
    assert!(!server.exists("handed"), "released after");
}

#[test]
fn a_successor_without_lease_is_renewed_by_the_watchdog() {
    let server = RedisServer::start();
    let client = server.client_with_watchdog(Duration::from_millis(900));
    let holder = client.lock("renewed-successor");
    // The holder's short lease must not be what the successor inherits.
    let guard = holder.lock_with_lease(Duration::from_millis(400)).unwrap();
    let lock = client.lock("renewed-successor");
    let waiter = bounded::spawn("successor", move || {
        let guard = lock.lock().expect("the successor gets the lock");
        std::thread::sleep(Duration::from_millis(2_000));
        let held = guard.is_held();
        let count = lock.hold_count().unwrap();
        drop(guard);
        (held, count)
    });
    waiter.assert_running_for(Duration::from_millis(200));
    drop(guard);
    let (held, count) = waiter.join_within(WAKE_LIMIT);
    assert!(held, "renewed past twice the watchdog timeout");
    assert_eq!(count, 1);
    assert!(!server.exists("renewed-successor"));
}

#[test]
fn a_direct_hand_over_publishes_nothing() {
    let server = RedisServer::start();
    let client = server.client();
    let mut listener = server.connection();
    let mut pubsub = listener.as_pubsub();
    pubsub.subscribe("redisson_lock__channel:{quiet}").unwrap();
    pubsub
        .set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    // Warm up: the parked thread's client subscribes too; drain anything.
    let before = client.stats().direct_handoffs;
    let guard = client.lock("quiet").lock().unwrap();
    let lock = client.lock("quiet");
    let waiter = bounded::spawn("successor", move || {
        let guard = lock.lock().expect("the successor gets the lock");
        // Holds on until the main thread has listened a while.
        std::thread::sleep(Duration::from_millis(600));
        drop(guard);
    });
    waiter.assert_running_for(STAYS_BLOCKED);
    drop(guard);
    let mut heard = Vec::new();
    let started = std::time::Instant::now();
    while started.elapsed() < Duration::from_millis(400) {
        if let Ok(msg) = pubsub.get_message() {
            heard.push(msg.get_payload::<String>().unwrap());
        }
    }
    waiter.join_within(WAKE_LIMIT);
    if client.stats().direct_handoffs > before {
        assert!(heard.is_empty(), "a direct hand-over announced: {heard:?}");
    }
}

#[test]
fn only_the_last_release_of_a_reentrant_hold_hands_over() {
    let server = RedisServer::start();
    let client = server.client();
    let outer = client.lock("nested").lock().unwrap();
    let inner = client.lock("nested").lock().unwrap();
    let lock = client.lock("nested");
    let waiter = bounded::spawn("successor", move || {
        let guard = lock.lock().expect("the successor gets the lock");
        drop(guard);
    });
    waiter.assert_running_for(STAYS_BLOCKED);
    drop(inner);
    waiter.assert_running_for(STAYS_BLOCKED);
    let held = holders(&server, "nested");
    assert_eq!(held.len(), 1);
    assert_eq!(held[0].1, 1, "the outer hold stays ours: {held:?}");
    drop(outer);
    waiter.join_within(WAKE_LIMIT);
    assert!(!server.exists("nested"));
}

#[test]
fn another_client_gets_the_lock_while_local_threads_hand_it_around() {
    let server = RedisServer::start();
    let busy = server.client();
    let stop = Arc::new(AtomicBool::new(false));
    let taken = Arc::new(AtomicU64::new(0));
    let workers: Vec<_> = (0..3)
        .map(|i| {
            let lock = busy.lock("shared");
            let stop = Arc::clone(&stop);
            let taken = Arc::clone(&taken);
            bounded::spawn(&format!("local-{i}"), move || {
                while !stop.load(Ordering::Relaxed) {
                    let guard = lock.lock().expect("local lock");
                    taken.fetch_add(1, Ordering::Relaxed);
                    std::thread::sleep(Duration::from_millis(1));
                    drop(guard);
                }
            })
        })
        .collect();
    bounded::wait_until(Duration::from_secs(10), || {
        busy.stats().direct_handoffs >= 20
    })
    .expect("the local threads hand the lock to each other");

    // Without a bound on the run of hand-overs, the other client would
    // hear of the lock only when its 30 s TTL ran out.
    let other = server.client();
    let got = other
        .lock("shared")
        .try_lock_for(Duration::from_secs(10))
        .expect("try_lock_for");
    assert!(got.is_some(), "another client starved by local hand-overs");
    drop(got);
    stop.store(true, Ordering::Relaxed);
    for worker in workers {
        worker.join_within(Duration::from_secs(30));
    }
    assert!(taken.load(Ordering::Relaxed) > 0);
    assert!(!server.exists("shared"));
}

/// Takes `name` on the calling thread, with the plain or the fenced lock:
/// the guard, and its token (0 for the plain lock).
type Take = fn(&redhold::Client, &str) -> (Box<dyn std::any::Any>, u64);

fn take_plain(client: &redhold::Client, name: &str) -> (Box<dyn std::any::Any>, u64) {
    (Box::new(client.lock(name).lock().expect("plain lock")), 0)
}

fn take_fenced(client: &redhold::Client, name: &str) -> (Box<dyn std::any::Any>, u64) {
    let guard = client.fenced_lock(name).lock().expect("fenced lock");
    let token = guard.token();
    (Box::new(guard), token)
}

/// What one direct hand-over from a holder to a parked thread showed.
#[derive(Debug)]
struct Handed {
    /// The holder's token (0 for the plain lock).
    holder_token: u64,
    /// The successor's token (0 for the plain lock).
    successor_token: u64,
    /// The fencing-token counter while the successor held the lock.
    counter: Option<u64>,
    /// Scripts run from the release to the successor's own release, both
    /// included.
    scripts: u64,
}

/// Hands `name` from a hold taken with `hold` on the main thread to a
/// thread of the same client parked in `wait`, until one hand-over is
/// direct (the first tries can find the waiter not yet parked).
fn hand_over_between(server: &RedisServer, hold: Take, wait: Take, name: &str) -> Handed {
    let client = server.client();
    let counter_key = format!("redisson_lock_token:{{{name}}}");
    // Load the scripts first, so that each call below is one EVALSHA.
    drop(hold(&client, name));
    drop(wait(&client, name));
    for _ in 0..10 {
        let before = client.stats().direct_handoffs;
        let (guard, holder_token) = hold(&client, name);
        let (successor_client, name_owned, url) = (client.clone(), name.to_owned(), server.url());
        let counter_key = counter_key.clone();
        let waiter = bounded::spawn("successor", move || {
            let (guard, token) = wait(&successor_client, &name_owned);
            let mut con = redis::Client::open(url).unwrap().get_connection().unwrap();
            let counter: Option<u64> = redis::cmd("GET").arg(&counter_key).query(&mut con).unwrap();
            drop(guard);
            (token, counter)
        });
        waiter.assert_running_for(STAYS_BLOCKED);
        let _: () = server.cmd(&["CONFIG", "RESETSTAT"]);
        drop(guard);
        let (successor_token, counter) = waiter.join_within(WAKE_LIMIT);
        if client.stats().direct_handoffs > before {
            return Handed {
                holder_token,
                successor_token,
                counter,
                scripts: server.scripts_run(),
            };
        }
    }
    panic!("ten releases with a parked thread of the same client and no direct hand-over");
}

#[test]
fn a_parked_fenced_waiter_is_handed_the_lock_with_the_next_token() {
    let server = RedisServer::start();
    let handed = hand_over_between(&server, take_fenced, take_fenced, "fenced-handed");
    assert!(
        handed.successor_token > handed.holder_token,
        "tokens must grow across a hand-over: {handed:?}"
    );
    assert_eq!(
        handed.counter,
        Some(handed.successor_token),
        "the successor's token is the counter's latest: {handed:?}"
    );
    // The release that handed the lock over and the successor's release:
    // the successor made no acquire of its own (which would also have drawn
    // a token, hiding a hand-over without one).
    assert_eq!(handed.scripts, 2, "{handed:?}");
    assert!(!server.exists("fenced-handed"));
}

#[test]
fn a_plain_release_draws_the_token_of_a_fenced_successor() {
    let server = RedisServer::start();
    let handed = hand_over_between(&server, take_plain, take_fenced, "mixed-to-fenced");
    assert!(handed.successor_token > 0, "{handed:?}");
    assert_eq!(handed.counter, Some(handed.successor_token), "{handed:?}");
    assert_eq!(handed.scripts, 2, "{handed:?}");
}

#[test]
fn a_fenced_release_hands_a_plain_successor_no_token() {
    let server = RedisServer::start();
    let handed = hand_over_between(&server, take_fenced, take_plain, "mixed-to-plain");
    assert_eq!(
        handed.counter,
        Some(handed.holder_token),
        "a plain successor draws no token: {handed:?}"
    );
    assert_eq!(handed.scripts, 2, "{handed:?}");
}

#[test]
fn a_thread_handed_the_lock_re_enters_at_once() {
    // After a direct hand-over, threads of the client that come for the
    // lock stand back (they would only find it held) for up to 50 ms. The
    // thread it was handed to is no newcomer: its re-entry must not wait
    // for a hand-over that nobody will make.
    let server = RedisServer::start();
    let client = server.client();
    let re_entries = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let workers: Vec<_> = (0..2)
        .map(|i| {
            let lock = client.lock("re-entered");
            let re_entries = Arc::clone(&re_entries);
            bounded::spawn(&format!("worker-{i}"), move || {
                for _ in 0..20 {
                    let outer = lock.lock().expect("lock");
                    let started = std::time::Instant::now();
                    let inner = lock.lock().expect("re-entry");
                    re_entries.lock().push(started.elapsed());
                    drop(inner);
                    std::thread::sleep(Duration::from_millis(1));
                    drop(outer);
                }
            })
        })
        .collect();
    for worker in workers {
        worker.join_within(Duration::from_secs(60));
    }
    assert!(
        client.stats().direct_handoffs > 0,
        "the threads hand the lock over"
    );
    let mut re_entries = re_entries.lock().clone();
    re_entries.sort();
    let median = re_entries[re_entries.len() / 2];
    // A re-entry is one round trip; a stand-back would last 50 ms.
    assert!(
        median < Duration::from_millis(25),
        "median re-entry {median:?}: the holder stood back for itself"
    );
    assert!(!server.exists("re-entered"));
}

/// A fenced waiter handed a plain lock whose token counter holds a
/// non-number: the hand-over would fail on drawing the token. Before the
/// fix the release script wrote the successor's field first and then
/// failed, leaving the lock held by a field no guard stood for; now the
/// counter is checked before anything is written, the lock is released
/// as if no one were parked, and the waiter's own acquire reports the
/// counter.
#[test]
fn a_hand_over_to_a_fenced_waiter_with_a_corrupt_counter_writes_nothing() {
    let server = RedisServer::start();
    let client = server.client();
    let name = "corrupt-counter";
    let counter_key = format!("redisson_lock_token:{{{name}}}");
    let holder = client.lock(name).lock().expect("plain lock");
    let successor_client = client.clone();
    let waiter = bounded::spawn("fenced successor", move || {
        successor_client
            .fenced_lock(name)
            .try_lock_for(WAKE_LIMIT)
            .map(|guard| guard.map(|g| g.token()))
    });
    waiter.assert_running_for(STAYS_BLOCKED);
    let _: () = server.cmd(&["SET", &counter_key, "not-a-number"]);

    holder.unlock().expect("the holder's release");
    let outcome = waiter.join_within(WAKE_LIMIT * 2);

    assert!(
        holders(&server, name).is_empty(),
        "the lock was left with a field no guard stands for: {:?}",
        holders(&server, name)
    );
    match outcome {
        Err(redhold::Error::Corrupt { key, found, .. }) => {
            assert_eq!(key, counter_key);
            assert!(found.contains("not-a-number"), "{found}");
        }
        other => panic!("the fenced waiter: expected Corrupt, got {other:?}"),
    }
    let counter: String = server.cmd(&["GET", &counter_key]);
    assert_eq!(counter, "not-a-number", "the counter is left alone");
    assert_eq!(client.stats().direct_handoffs, 0);
}
