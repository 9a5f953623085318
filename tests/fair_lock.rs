//! The fair lock on real redis-server processes: waiters get the lock in
//! arrival order across threads and clients, a waiter that gives up or dies
//! does not stall the ones behind it, mutual exclusion under contention, and
//! the Redis layout (hash, queue list, deadline sorted set, one channel per
//! waiter) of `docs/wire-format.md`.

mod bounded;
mod support;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use redhold::Client;
use support::contention::count_under_locks;
use support::RedisServer;

/// Generous bound for anything that should take milliseconds.
const PROMPTLY: Duration = Duration::from_secs(5);
/// The default fair wait timeout (Redisson's), in ms.
const DEFAULT_WAIT_MS: i64 = 300_000;

fn queue_key(name: &str) -> String {
    format!("redisson_lock_queue:{{{name}}}")
}

fn timeout_key(name: &str) -> String {
    format!("redisson_lock_timeout:{{{name}}}")
}

/// The queue as Redis has it: waiting fields, head first.
fn queue(server: &RedisServer, name: &str) -> Vec<String> {
    server.cmd(&["LRANGE", &queue_key(name), "0", "-1"])
}

fn queue_len(server: &RedisServer, name: &str) -> usize {
    server.cmd(&["LLEN", &queue_key(name)])
}

/// The deadline set as Redis has it: waiting field → deadline (ms since the epoch).
fn deadlines(server: &RedisServer, name: &str) -> HashMap<String, i64> {
    let flat: Vec<String> = server.cmd(&["ZRANGE", &timeout_key(name), "0", "-1", "WITHSCORES"]);
    flat.chunks(2)
        .map(|pair| {
            let score: f64 = pair[1].parse().expect("a numeric deadline");
            (pair[0].clone(), score as i64)
        })
        .collect()
}

/// How many connections listen on `channel`.
fn subscribers(server: &RedisServer, channel: &str) -> i64 {
    let reply: (String, i64) = server.cmd(&["PUBSUB", "NUMSUB", channel]);
    reply.1
}

/// The channel on which the waiter `field` of lock `name` is woken.
fn waiter_channel(name: &str, field: &str) -> String {
    format!("redisson_lock__channel:{{{name}}}:{field}")
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_millis() as i64
}

#[track_caller]
fn wait_for_queue_len(server: &RedisServer, name: &str, len: usize) {
    let reached = bounded::wait_until(PROMPTLY, || queue_len(server, name) == len);
    assert!(
        reached.is_some(),
        "the queue of {name} did not reach length {len}: {:?}",
        queue(server, name)
    );
}

#[test]
fn waiters_on_two_clients_get_the_lock_in_arrival_order() {
    let server = RedisServer::start();
    let clients = [server.client(), server.client()];
    let name = "fair:order";
    let holder = clients[0].fair_lock(name).lock().expect("free lock");
    let holder_ttl: i64 = server.cmd(&["PTTL", name]);

    let order = Arc::new(Mutex::new(Vec::new()));
    let mut waiters = Vec::new();
    for i in 0..6 {
        let lock = clients[i % 2].fair_lock(name);
        let order = Arc::clone(&order);
        waiters.push(bounded::spawn(&format!("waiter-{i}"), move || {
            let guard = lock.lock().expect("lock() in the queue");
            order.lock().unwrap().push(i);
            // Long enough for a queue-jumper to show up if there were one.
            thread::sleep(Duration::from_millis(20));
            guard.unlock().expect("release");
        }));
        // Start the next one only once this one is visibly queued.
        wait_for_queue_len(&server, name, i + 1);
    }

    // The queue holds the six fields in arrival order, alternating clients,
    // and each deadline is the one before plus the wait timeout.
    let fields = queue(&server, name);
    for (i, field) in fields.iter().enumerate() {
        let client_id = clients[i % 2].id().to_string();
        assert!(
            field.starts_with(&format!("{client_id}:")),
            "waiter {i} should be {client_id}:<thread>, the queue is {fields:?}"
        );
    }
    let deadline = deadlines(&server, name);
    assert_eq!(deadline.len(), 6, "one deadline per waiter: {deadline:?}");
    let first = deadline[&fields[0]];
    let expected_first = now_ms() + holder_ttl + DEFAULT_WAIT_MS;
    assert!(
        (first - expected_first).abs() < 5_000,
        "the head's deadline {first} should be about lock TTL + wait timeout from now ({expected_first})"
    );
    for pair in fields.windows(2) {
        assert_eq!(
            deadline[&pair[1]] - deadline[&pair[0]],
            DEFAULT_WAIT_MS,
            "consecutive deadlines differ by the wait timeout: {deadline:?}"
        );
    }
    // Each waiter listens on its own channel; nobody on the plain lock channel.
    for field in &fields {
        let channel = waiter_channel(name, field);
        let subscribed = bounded::wait_until(PROMPTLY, || subscribers(&server, &channel) == 1);
        assert!(subscribed.is_some(), "nobody listens on {channel}");
    }
    assert_eq!(
        subscribers(&server, &format!("redisson_lock__channel:{{{name}}}")),
        0
    );
    assert!(order.lock().unwrap().is_empty(), "nobody got it yet");

    holder.unlock().expect("holder release");
    for waiter in waiters {
        waiter.join_within(Duration::from_secs(10));
    }
    assert_eq!(*order.lock().unwrap(), vec![0, 1, 2, 3, 4, 5]);
    assert!(!server.exists(name));
    assert!(!server.exists(&queue_key(name)), "the queue is empty");
    assert!(!server.exists(&timeout_key(name)), "the deadlines are gone");
}

#[test]
fn a_waiter_that_times_out_leaves_the_queue_without_stalling_it() {
    let server = RedisServer::start();
    let (a, b) = (server.client(), server.client());
    let name = "fair:timeout";
    let holder = a.fair_lock(name).lock().expect("free lock");

    let lock = a.fair_lock(name);
    let quitter = bounded::spawn("quitter", move || {
        lock.try_lock_for(Duration::from_secs(3))
            .map(|g| g.is_some())
    });
    wait_for_queue_len(&server, name, 1);
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut patient = Vec::new();
    for (i, client) in [(1, &b), (2, &a)] {
        let lock = client.fair_lock(name);
        let order = Arc::clone(&order);
        patient.push(bounded::spawn(&format!("patient-{i}"), move || {
            let guard = lock.lock().expect("lock() in the queue");
            order.lock().unwrap().push(i);
            guard.unlock().expect("release");
        }));
        wait_for_queue_len(&server, name, i + 1);
    }
    let before = queue(&server, name);
    let deadline_before = deadlines(&server, name);

    assert!(
        matches!(quitter.join_within(PROMPTLY), Ok(false)),
        "try_lock_for must time out while the lock is held"
    );
    // It left the queue and the set; the ones behind it moved up one place.
    assert_eq!(queue(&server, name), before[1..].to_vec());
    let deadline_after = deadlines(&server, name);
    assert!(
        !deadline_after.contains_key(&before[0]),
        "the quitter's deadline is gone: {deadline_after:?}"
    );
    for field in &before[1..] {
        assert_eq!(
            deadline_after[field],
            deadline_before[field] - DEFAULT_WAIT_MS,
            "deadlines behind the quitter move up by the wait timeout"
        );
    }

    let released = Instant::now();
    holder.unlock().expect("holder release");
    for waiter in patient {
        waiter.join_within(PROMPTLY);
    }
    assert!(
        released.elapsed() < PROMPTLY,
        "the queue behind the quitter moved on at once"
    );
    assert_eq!(*order.lock().unwrap(), vec![1, 2]);
    assert!(!server.exists(&queue_key(name)));
    assert!(!server.exists(&timeout_key(name)));
}

#[test]
fn a_dead_waiter_is_dropped_once_its_deadline_passes() {
    let server = RedisServer::start();
    let client = server.client();
    let name = "fair:ghost";
    // A waiter of a process that died: queued at the head, never coming back.
    let ghost = "00000000-0000-4000-8000-000000000000:1";
    let ghost_deadline = now_ms() + 1_000;
    server.cmd::<i64>(&["RPUSH", &queue_key(name), ghost]);
    server.cmd::<i64>(&[
        "ZADD",
        &timeout_key(name),
        &ghost_deadline.to_string(),
        ghost,
    ]);

    // The lock is free, but a try does not jump the queue.
    let lock = client.fair_lock(name);
    let jumped = bounded::spawn("jumper", move || lock.try_lock().map(|g| g.is_some()))
        .join_within(PROMPTLY);
    assert!(matches!(jumped, Ok(false)), "try_lock jumped the queue");
    assert_eq!(queue(&server, name), vec![ghost.to_owned()]);

    let scripts_before = server.scripts_run();
    let lock = client.fair_lock(name);
    let waiter = bounded::spawn("behind-the-ghost", move || {
        let guard = lock.lock().expect("lock() behind a dead waiter");
        let got_at = now_ms();
        guard.unlock().expect("release");
        got_at
    });
    wait_for_queue_len(&server, name, 2);
    assert!(
        !server.exists(name),
        "nobody holds it while the ghost heads"
    );
    let got_at = waiter.join_within(PROMPTLY);
    assert!(
        got_at >= ghost_deadline,
        "got it {} ms before the ghost's deadline",
        ghost_deadline - got_at
    );
    // Told to wait for the head's deadline, it does not poll meanwhile.
    let scripts = server.scripts_run() - scripts_before;
    assert!(
        scripts < 50,
        "{scripts} scripts ran while one waiter waited 1 s for a dead head"
    );
    assert!(!server.exists(&queue_key(name)), "the ghost was dropped");
    assert!(!server.exists(&timeout_key(name)));
}

#[test]
fn a_dead_head_stalls_the_waiters_behind_it_only_until_its_deadline() {
    let server = RedisServer::start();
    let client = server.client();
    let name = "fair:dead-head";
    let holder = client.fair_lock(name);
    let leased = holder
        .lock_with_lease(Duration::from_millis(400))
        .expect("free lock");
    // What a waiter of a process that died leaves behind: it queued while
    // the lease had under 400 ms left, with a 300 ms fair wait timeout.
    let ghost = "00000000-0000-4000-8000-000000000000:7";
    let pttl: i64 = server.cmd(&["PTTL", name]);
    server.cmd::<i64>(&["RPUSH", &queue_key(name), ghost]);
    let ghost_deadline = now_ms() + pttl + 300;
    server.cmd::<i64>(&[
        "ZADD",
        &timeout_key(name),
        &ghost_deadline.to_string(),
        ghost,
    ]);
    // The holder re-enters without a lease: the lock now lives 30 s.
    let watched = holder.lock().expect("reentry");

    let lock = client.fair_lock(name);
    let waiter = bounded::spawn("alive", move || {
        let guard = lock.lock()?;
        guard.unlock()
    });
    wait_for_queue_len(&server, name, 2);
    // The holder leaves while the ghost still heads the queue: only the
    // ghost is woken, in vain. The live waiter must not sleep out the 30 s
    // TTL it last saw; it gets its turn once the ghost's deadline passes.
    thread::sleep(Duration::from_millis(100));
    drop(watched);
    leased.unlock().expect("holder release");
    waiter.join_within(PROMPTLY).expect("the live waiter");
    assert!(
        now_ms() >= ghost_deadline,
        "the live waiter went ahead of the ghost before its deadline"
    );
    assert!(!server.exists(&queue_key(name)));
    assert!(!server.exists(&timeout_key(name)));
}

#[test]
fn an_interrupted_waiter_leaves_the_queue() {
    let server = RedisServer::start();
    let client = server.client();
    let name = "fair:interrupt";
    let holder = client.fair_lock(name).lock().expect("free lock");
    let interrupt = redhold::Interrupt::new();
    let lock = client.fair_lock(name);
    let trigger = interrupt.clone();
    let waiter = bounded::spawn("interrupted", move || {
        lock.lock_interruptibly(&interrupt).map(drop)
    });
    wait_for_queue_len(&server, name, 1);
    trigger.trigger();
    assert!(matches!(
        waiter.join_within(PROMPTLY),
        Err(redhold::Error::Interrupted { .. })
    ));
    assert!(!server.exists(&queue_key(name)));
    assert!(!server.exists(&timeout_key(name)));
    drop(holder);
}

#[test]
fn releasing_a_vanished_lock_reports_it_and_still_wakes_the_head() {
    let server = RedisServer::start();
    let (a, b) = (server.client(), server.client());
    let name = "fair:vanished";
    let holder = a.fair_lock(name).lock().expect("free lock");
    let scripts_before = server.scripts_run();
    let lock = b.fair_lock(name);
    let waiter = bounded::spawn("head", move || {
        let guard = lock.lock()?;
        guard.unlock()
    });
    // The waiter queues, subscribes, looks once more and is told to wait
    // out the lock's TTL: two acquire scripts.
    let looked_twice = bounded::wait_until(PROMPTLY, || server.scripts_run() >= scripts_before + 2);
    assert!(looked_twice.is_some(), "the waiter did not try twice");
    assert_eq!(queue_len(&server, name), 1);
    // The lock vanishes behind everyone's back (as when it expires): nobody
    // is told, and the head waits out the 30 s TTL it last saw...
    server.cmd::<i64>(&["DEL", name]);
    waiter.assert_running_for(Duration::from_millis(200));
    // ...until the holder's release, which finds the lock gone, wakes it.
    assert!(matches!(
        holder.unlock(),
        Err(redhold::Error::LockLost { .. })
    ));
    waiter
        .join_within(PROMPTLY)
        .expect("the head takes the lock");
    assert!(!server.exists(&queue_key(name)));
}

#[test]
fn hash_tagged_names_keep_their_tag_in_the_helper_keys() {
    let server = RedisServer::start();
    let client = server.client();
    let name = "{jobs}:nightly";
    let holder = client.fair_lock(name).lock().expect("free lock");
    let lock = client.fair_lock(name);
    let waiter = bounded::spawn("tagged", move || lock.lock().map(drop));
    let queued = bounded::wait_until(PROMPTLY, || {
        server.cmd::<usize>(&["LLEN", "redisson_lock_queue:{jobs}:nightly"]) == 1
    });
    assert!(queued.is_some());
    assert_eq!(
        server.cmd::<usize>(&["ZCARD", "redisson_lock_timeout:{jobs}:nightly"]),
        1
    );
    let field: String = server.cmd(&["LINDEX", "redisson_lock_queue:{jobs}:nightly", "0"]);
    let channel = format!("redisson_lock__channel:{{jobs}}:nightly:{field}");
    assert!(bounded::wait_until(PROMPTLY, || subscribers(&server, &channel) == 1).is_some());
    drop(holder);
    waiter.join_within(PROMPTLY).expect("lock");
}

#[test]
fn a_try_without_wait_does_not_join_the_queue() {
    let server = RedisServer::start();
    let client = server.client();
    let name = "fair:try";
    let holder = client.fair_lock(name).lock().expect("free lock");
    let lock = client.fair_lock(name);
    let got =
        bounded::spawn("trier", move || lock.try_lock().map(|g| g.is_some())).join_within(PROMPTLY);
    assert!(matches!(got, Ok(false)));
    assert!(!server.exists(&queue_key(name)));
    assert!(!server.exists(&timeout_key(name)));
    drop(holder);
}

#[test]
fn the_hash_is_the_plain_lock_layout_and_reentrant() {
    let server = RedisServer::start();
    let client = server.client();
    let name = "fair:layout";
    let lock = client.fair_lock(name);
    let outer = lock.lock().expect("free lock");
    let inner = lock.lock().expect("reentry");
    let hash: HashMap<String, String> = server.cmd(&["HGETALL", name]);
    assert_eq!(hash.len(), 1, "{hash:?}");
    let (field, count) = hash.into_iter().next().expect("one holder");
    assert!(field.starts_with(&format!("{}:", client.id())), "{field}");
    assert_eq!(count, "2");
    assert_eq!(lock.hold_count().unwrap(), 2);
    assert!(lock.is_locked().unwrap());
    let ttl: i64 = server.cmd(&["PTTL", name]);
    assert!(ttl > 20_000 && ttl <= 30_000, "watchdog TTL, got {ttl} ms");
    drop(inner);
    assert_eq!(lock.hold_count().unwrap(), 1);
    outer.unlock().expect("last release");
    assert!(!lock.is_locked().unwrap());

    // force_unlock deletes it and reports whether there was one.
    let guard = lock.lock().expect("again");
    assert!(lock.force_unlock().unwrap());
    assert!(!lock.force_unlock().unwrap());
    assert!(matches!(
        guard.unlock(),
        Err(redhold::Error::LockLost { .. })
    ));
}

#[test]
fn mutual_exclusion_under_contention() {
    let server = RedisServer::start();
    let clients = [server.client(), server.client()];
    let name = "fair:counter";
    // Four threads on each of two clients.
    let locks = (0..8).map(|i| clients[i % 2].fair_lock(name)).collect();
    let total = count_under_locks(
        &server,
        locks,
        "fair:counter:value",
        25,
        Duration::from_secs(30),
    );
    assert_eq!(total, 8 * 25);
    assert!(!server.exists(name));
    assert!(!server.exists(&queue_key(name)));
    assert!(!server.exists(&timeout_key(name)));
    drop::<[Client; 2]>(clients);
}
