//! The semaphore (Redisson's `RSemaphore`) on a real Redis: its operations
//! and key layout, waiters woken through pub/sub without polling, never more
//! permits out than given under contention from two clients, interrupts,
//! shutdown, delete, bad input and names of other kinds, and a cluster.

mod bounded;
mod support;

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use redhold::{Error, Interrupt};
use support::RedisServer;

/// Generous bound for a wake-up that takes milliseconds; well below the
/// waiters' 5 s safety-net re-check, so meeting it proves a message woke
/// the waiter.
const PROMPTLY: Duration = Duration::from_secs(2);

/// Every command the server ran, but those the test itself and the
/// subscriber's keep-alive send.
fn commands_run(server: &RedisServer) -> HashMap<String, u64> {
    let mut calls = server.command_calls();
    calls.retain(|name, _| name != "info" && name != "ping");
    calls
}

#[test]
fn permits_are_set_taken_and_given_back_in_redissons_layout() {
    let server = RedisServer::start();
    let client = server.client();
    let sem = client.semaphore("pool");
    assert_eq!(sem.available_permits().unwrap(), 0, "absent: no permits");
    assert!(sem.try_acquire().unwrap().is_none());
    assert!(sem.try_set_permits(2).unwrap());
    assert!(!sem.try_set_permits(7).unwrap(), "set once only");
    // Redisson's layout: a plain string holding the count.
    assert_eq!(server.cmd::<String>(&["TYPE", "pool"]), "string");
    assert_eq!(server.cmd::<String>(&["GET", "pool"]), "2");

    let one = sem.acquire().unwrap();
    assert_eq!(one.permits(), 1);
    assert_eq!(sem.available_permits().unwrap(), 1);
    assert!(sem.try_acquire_many(2).unwrap().is_none(), "only one left");
    drop(one);
    assert_eq!(sem.available_permits().unwrap(), 2);

    let two = sem.try_acquire_many(2).unwrap().expect("two available");
    assert_eq!(server.cmd::<String>(&["GET", "pool"]), "0");
    two.forget();
    assert_eq!(sem.available_permits().unwrap(), 0, "forgotten: kept taken");
    sem.release(2).unwrap();
    assert_eq!(sem.available_permits().unwrap(), 2);

    let explicit = sem.acquire().unwrap();
    explicit.release().unwrap();
    assert_eq!(sem.available_permits().unwrap(), 2);

    assert_eq!(sem.drain_permits().unwrap(), 2);
    assert_eq!(sem.available_permits().unwrap(), 0);
    assert_eq!(sem.drain_permits().unwrap(), 0);
    sem.set_permits(5).unwrap();
    sem.add_permits(-2).unwrap();
    assert_eq!(sem.available_permits().unwrap(), 3);
    assert!(matches!(
        sem.add_permits(-4),
        Err(Error::InvalidArgument { .. })
    ));
    assert_eq!(sem.available_permits().unwrap(), 3, "nothing taken");
    sem.add_permits(2).unwrap();
    assert_eq!(server.cmd::<String>(&["GET", "pool"]), "5");
    // Nothing but the count (and short-lived request latches) in Redis.
    let keys: Vec<String> = server.cmd(&["KEYS", "*"]);
    assert!(
        keys.iter()
            .all(|k| k == "pool" || k.starts_with("redisson_unlock_latch:{pool}:")),
        "{keys:?}"
    );
}

#[test]
fn a_parked_acquirer_is_woken_by_a_release_without_polling() {
    let server = RedisServer::start();
    let waiter_client = server.client();
    let sem = waiter_client.semaphore("gate");
    // Loads the release script, so that no NOSCRIPT round counts below.
    sem.release(1).unwrap();
    assert_eq!(sem.drain_permits().unwrap(), 1);
    let waiter = {
        let sem = sem.clone();
        bounded::spawn("acquirer", move || {
            let permit = sem.acquire_many(2).map(|p| p.permits());
            (permit, Instant::now())
        })
    };
    waiter.assert_parked_for(Duration::from_millis(300));
    assert_eq!(waiter_client.stats().parked_waiters, 1);

    // Parked means parked: not one command while it waits.
    let before = commands_run(&server);
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(commands_run(&server), before, "the waiter polled");

    // Released by another client: the message says "2" (permits now
    // available), which must wake it, not the safety net's re-check.
    let scripts_before = server.scripts_run();
    let released = Instant::now();
    server.client().semaphore("gate").release(2).unwrap();
    let (permit, woke) = waiter.join_within(PROMPTLY * 2);
    assert_eq!(permit.unwrap(), 2);
    assert!(
        woke.duration_since(released) < PROMPTLY,
        "woken after {:?}",
        woke.duration_since(released)
    );
    // The release, the waiter's one attempt, and its permit's release.
    assert_eq!(server.scripts_run() - scripts_before, 3);
    assert_eq!(waiter_client.stats().parked_waiters, 0);
    assert_eq!(sem.available_permits().unwrap(), 2);
}

#[test]
fn delete_removes_the_permits_and_leaves_waiters_waiting() {
    let server = RedisServer::start();
    let client = server.client();
    let sem = client.semaphore("doomed");
    assert!(!sem.delete().unwrap(), "nothing to delete");
    assert!(sem.try_set_permits(1).unwrap());
    let taken = sem.try_acquire().unwrap().expect("one permit");
    let waiter = {
        let sem = server.client().semaphore("doomed");
        bounded::spawn("acquirer", move || {
            sem.try_acquire_for(Duration::from_secs(20))
                .map(|p| p.map(|p| p.permits()))
        })
    };
    waiter.assert_parked_for(Duration::from_millis(300));

    assert!(sem.delete().unwrap());
    assert!(!server.exists("doomed"), "the key is gone");
    assert!(!sem.delete().unwrap(), "deleted once");
    // As in Redisson, the waiter is not let through: no permit is there.
    waiter.assert_parked_for(Duration::from_millis(300));
    assert!(sem.try_set_permits(3).unwrap(), "settable again");
    assert_eq!(waiter.join_within(PROMPTLY).unwrap(), Some(1));
    // A permit taken before the delete still goes back.
    drop(taken);
    assert_eq!(sem.available_permits().unwrap(), 4);

    // Another kind's name: refused, untouched.
    let _guard = client.lock("held").lock().unwrap();
    assert!(matches!(
        client.semaphore("held").delete(),
        Err(Error::WrongKind { .. })
    ));
    assert!(server.exists("held"));
    assert!(matches!(
        client.semaphore("").delete(),
        Err(Error::InvalidName { .. })
    ));
}

#[test]
fn permits_are_never_exceeded_across_threads_and_clients() {
    const PERMITS: usize = 3;
    const ROUNDS: usize = 15;
    let server = RedisServer::start();
    let clients = [server.client(), server.client()];
    assert!(clients[0].semaphore("slots").try_set_permits(3).unwrap());
    let in_use = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let workers: Vec<_> = (0..8)
        .map(|i| {
            let sem = clients[i % 2].semaphore("slots");
            let (in_use, most) = (Arc::clone(&in_use), Arc::clone(&most));
            bounded::spawn("worker", move || {
                for round in 0..ROUNDS {
                    let permit = if round % 3 == 0 {
                        sem.try_acquire_for(Duration::from_secs(30))
                            .unwrap()
                            .expect("a permit within 30 s")
                    } else {
                        sem.acquire().unwrap()
                    };
                    let now = in_use.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(now, Ordering::SeqCst);
                    std::thread::sleep(Duration::from_millis(2));
                    in_use.fetch_sub(1, Ordering::SeqCst);
                    drop(permit);
                }
            })
        })
        .collect();
    for worker in workers {
        worker.join_within(Duration::from_secs(120));
    }
    let most = most.load(Ordering::SeqCst);
    assert!(most <= PERMITS, "{most} permits out of {PERMITS}");
    assert!(most >= 2, "the workers never overlapped: {most}");
    assert_eq!(
        clients[1].semaphore("slots").available_permits().unwrap(),
        PERMITS as u64,
        "every permit came back"
    );
}

#[test]
fn waits_end_on_timeout_interrupt_and_shutdown() {
    let server = RedisServer::start();
    let client = server.client();
    let sem = client.semaphore("none");
    sem.set_permits(0).unwrap();
    assert!(sem
        .try_acquire_for(Duration::from_millis(200))
        .unwrap()
        .is_none());

    let stop = Interrupt::new();
    let waiter = {
        let (sem, stop) = (sem.clone(), stop.clone());
        bounded::spawn("interruptible", move || {
            sem.acquire_interruptibly(&stop).map(|p| p.permits())
        })
    };
    waiter.assert_parked_for(Duration::from_millis(300));
    stop.trigger();
    assert!(matches!(
        waiter.join_within(PROMPTLY),
        Err(Error::Interrupted { .. })
    ));
    assert!(matches!(
        sem.acquire_interruptibly(&stop),
        Err(Error::Interrupted { .. })
    ));

    let waiter = {
        let sem = sem.clone();
        bounded::spawn("until shutdown", move || sem.acquire().map(|p| p.permits()))
    };
    waiter.assert_parked_for(Duration::from_millis(300));
    client.shutdown().unwrap();
    assert!(matches!(waiter.join_within(PROMPTLY), Err(Error::Shutdown)));
    assert_eq!(server.cmd::<String>(&["GET", "none"]), "0", "nothing taken");
}

#[test]
fn a_waiter_rides_out_a_server_restart() {
    let mut server = RedisServer::start();
    let client = server
        .builder()
        .response_timeout(Duration::from_millis(500))
        .outage_tolerance(Some(Duration::from_secs(20)))
        .build()
        .unwrap();
    let sem = client.semaphore("restart");
    sem.set_permits(0).unwrap();
    let waiter = {
        let sem = sem.clone();
        bounded::spawn("across a restart", move || {
            sem.acquire().map(|p| {
                p.forget();
                Instant::now()
            })
        })
    };
    waiter.assert_parked_for(Duration::from_millis(300));
    server.stop();
    std::thread::sleep(Duration::from_millis(500));
    server.start_again();
    // The restarted server has no data: permits are set again by someone.
    let released = Instant::now();
    server.client().semaphore("restart").set_permits(1).unwrap();
    let got = waiter
        .join_within(Duration::from_secs(20))
        .unwrap_or_else(|e| panic!("the waiter failed across the restart: {}", e.report()));
    // Woken by the message once resubscribed, or at its next look (at most
    // the outage's pause or the 5 s safety net).
    assert!(got.duration_since(released) < Duration::from_secs(6));
    assert_eq!(sem.available_permits().unwrap(), 0, "the waiter took it");
}

#[test]
fn a_permit_may_go_back_from_another_thread_and_after_shutdown() {
    let server = RedisServer::start();
    let client = server.client();
    let sem = client.semaphore("movable");
    sem.set_permits(1).unwrap();
    let permit = sem.acquire().unwrap();
    std::thread::spawn(move || drop(permit)).join().unwrap();
    assert_eq!(sem.available_permits().unwrap(), 1);

    let permit = sem.acquire().unwrap();
    client.shutdown().unwrap();
    drop(permit);
    assert_eq!(server.cmd::<String>(&["GET", "movable"]), "1");
}

#[test]
fn bad_input_and_names_of_other_kinds_are_refused() {
    let server = RedisServer::start();
    let client = server.client();
    assert!(matches!(
        client.semaphore("").acquire(),
        Err(Error::InvalidName { .. })
    ));
    assert!(matches!(
        client.semaphore("").available_permits(),
        Err(Error::InvalidName { .. })
    ));
    let sem = client.semaphore("s");
    assert!(matches!(
        sem.acquire_many(0),
        Err(Error::InvalidArgument { .. })
    ));
    assert!(matches!(sem.release(0), Err(Error::InvalidArgument { .. })));
    let too_many = u32::try_from(i32::MAX).unwrap() + 1;
    assert!(matches!(
        sem.try_set_permits(too_many),
        Err(Error::InvalidArgument { .. })
    ));
    assert!(!server.exists("s"), "nothing written");

    // A lock's name.
    let _guard = client.lock("held").lock().unwrap();
    let on_lock = client.semaphore("held");
    for outcome in [
        on_lock.try_acquire().map(|_| ()),
        on_lock.release(1),
        on_lock.available_permits().map(drop),
        on_lock.try_set_permits(1).map(drop),
        on_lock.drain_permits().map(drop),
    ] {
        match outcome {
            Err(Error::WrongKind { expected, .. }) => assert_eq!(expected, "semaphore"),
            other => panic!("expected WrongKind, got {other:?}"),
        }
    }
    // A list, and a string that is not a count.
    server.cmd::<i64>(&["RPUSH", "list", "x"]);
    server.cmd::<String>(&["SET", "text", "hello"]);
    for name in ["list", "text"] {
        let sem = client.semaphore(name);
        assert!(
            matches!(sem.release(1), Err(Error::WrongKind { .. })),
            "{name}"
        );
        assert!(
            matches!(sem.available_permits(), Err(Error::WrongKind { .. })),
            "{name}"
        );
    }
    assert_eq!(server.cmd::<String>(&["GET", "text"]), "hello", "untouched");
    // And a lock on a semaphore's name.
    client.semaphore("sem").set_permits(1).unwrap();
    assert!(matches!(
        client.lock("sem").try_lock(),
        Err(Error::WrongKind { .. })
    ));
}

#[cfg(feature = "cluster")]
#[test]
fn on_a_cluster_permits_live_with_their_name_and_wake_over_sharded_pubsub() {
    use support::cluster::RedisCluster;
    let cluster = RedisCluster::start(3);
    let client = || {
        redhold::Client::builder()
            .cluster(cluster.urls())
            .connect_timeout(Duration::from_secs(2))
            .build()
            .unwrap()
    };
    let (waiter_client, releaser) = (client(), client());
    let mut names = cluster.names_on_each_master("sem");
    names.push("{tagged}:sem".to_owned());
    for name in names {
        let sem = waiter_client.semaphore(name.as_str());
        sem.set_permits(0).unwrap();
        let waiter = {
            let sem = sem.clone();
            bounded::spawn("cluster acquirer", move || {
                sem.acquire().map(Permit::forget)
            })
        };
        waiter.assert_parked_for(Duration::from_millis(200));
        releaser.semaphore(name.as_str()).release(1).unwrap();
        waiter.join_within(PROMPTLY).unwrap();
        assert_eq!(cluster.cmd_for_key::<String>(&name, &["GET", &name]), "0");
    }
}

#[cfg(feature = "cluster")]
use redhold::Permit;
