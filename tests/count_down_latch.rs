//! The count-down latch (Redisson's `RCountDownLatch`) on a real Redis: its
//! operations and key layout, waiters opened through pub/sub without
//! polling (every waiter of every client by one count-down), timeouts,
//! interrupts, delete, bad input and names of other kinds, and a cluster.

mod bounded;
mod support;

use std::collections::HashMap;
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
fn the_count_goes_down_to_zero_in_redissons_layout() {
    let server = RedisServer::start();
    let client = server.client();
    let latch = client.count_down_latch("batch");
    assert_eq!(latch.count().unwrap(), 0, "absent: open");
    assert!(latch.wait_for(Duration::ZERO).unwrap());
    assert!(latch.try_set_count(2).unwrap());
    assert!(!latch.try_set_count(5).unwrap(), "armed once only");
    assert_eq!(server.cmd::<String>(&["TYPE", "batch"]), "string");
    assert_eq!(server.cmd::<String>(&["GET", "batch"]), "2");
    assert_eq!(latch.count_down().unwrap(), 1);
    assert_eq!(latch.count().unwrap(), 1);
    assert!(!latch.wait_for(Duration::from_millis(100)).unwrap());
    assert_eq!(latch.count_down().unwrap(), 0);
    assert!(!server.exists("batch"), "deleted at zero");
    assert!(latch.wait_for(Duration::from_millis(100)).unwrap());
    latch.wait().unwrap();
    // Counting down an open latch changes nothing and creates nothing.
    assert_eq!(latch.count_down().unwrap(), 0);
    assert!(!server.exists("batch"));
    // Armed again after it opened.
    assert!(latch.try_set_count(1).unwrap());
    assert!(latch.delete().unwrap());
    assert!(!latch.delete().unwrap());
    assert_eq!(latch.count().unwrap(), 0);
}

#[test]
fn one_count_down_opens_every_waiter_of_every_client_without_polling() {
    let server = RedisServer::start();
    let clients = [server.client(), server.client()];
    let latch = clients[0].count_down_latch("start");
    assert!(latch.try_set_count(1).unwrap());
    let waiters: Vec<_> = (0..4)
        .map(|i| {
            let latch = clients[i % 2].count_down_latch("start");
            bounded::spawn("latch waiter", move || {
                latch.wait().map(|()| Instant::now())
            })
        })
        .collect();
    for waiter in &waiters {
        waiter.assert_parked_for(Duration::from_millis(100));
    }
    assert!(bounded::wait_until(PROMPTLY, || {
        clients[0].stats().parked_waiters == 2 && clients[1].stats().parked_waiters == 2
    })
    .is_some());

    let before = commands_run(&server);
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(commands_run(&server), before, "a waiter polled");

    let gets_before = server.command_calls().get("get").copied().unwrap_or(0);
    let opened = Instant::now();
    server
        .client()
        .count_down_latch("start")
        .count_down()
        .unwrap();
    for waiter in waiters {
        let woke = waiter.join_within(PROMPTLY * 2).unwrap();
        assert!(woke.duration_since(opened) < PROMPTLY);
    }
    // Each waiter looked once (one GET each); the count-down's script read
    // its request latch and the count (two more).
    let gets = server.command_calls().get("get").copied().unwrap_or(0) - gets_before;
    assert_eq!(gets, 4 + 2);
    assert_eq!(clients[0].stats().parked_waiters, 0);
}

#[test]
fn waits_end_on_timeout_interrupt_delete_and_shutdown() {
    let server = RedisServer::start();
    let client = server.client();
    let latch = client.count_down_latch("never");
    assert!(latch.try_set_count(3).unwrap());
    let started = Instant::now();
    assert!(!latch.wait_for(Duration::from_millis(200)).unwrap());
    assert!(started.elapsed() >= Duration::from_millis(200));

    let stop = Interrupt::new();
    let waiter = {
        let (latch, stop) = (latch.clone(), stop.clone());
        bounded::spawn("interruptible", move || latch.wait_interruptibly(&stop))
    };
    waiter.assert_parked_for(Duration::from_millis(300));
    stop.trigger();
    assert!(matches!(
        waiter.join_within(PROMPTLY),
        Err(Error::Interrupted { .. })
    ));

    // Deleting the latch opens it for our waiters.
    let waiter = {
        let latch = latch.clone();
        bounded::spawn("until delete", move || latch.wait())
    };
    waiter.assert_parked_for(Duration::from_millis(300));
    assert!(server.client().count_down_latch("never").delete().unwrap());
    waiter.join_within(PROMPTLY).unwrap();

    assert!(latch.try_set_count(1).unwrap());
    let waiter = {
        let latch = latch.clone();
        bounded::spawn("until shutdown", move || latch.wait())
    };
    waiter.assert_parked_for(Duration::from_millis(300));
    client.shutdown().unwrap();
    assert!(matches!(waiter.join_within(PROMPTLY), Err(Error::Shutdown)));
    assert_eq!(server.cmd::<String>(&["GET", "never"]), "1");
}

#[test]
fn bad_input_and_names_of_other_kinds_are_refused() {
    let server = RedisServer::start();
    let client = server.client();
    assert!(matches!(
        client.count_down_latch("").wait(),
        Err(Error::InvalidName { .. })
    ));
    let latch = client.count_down_latch("l");
    assert!(matches!(
        latch.try_set_count(0),
        Err(Error::InvalidArgument { .. })
    ));
    assert!(matches!(
        latch.try_set_count(u64::MAX),
        Err(Error::InvalidArgument { .. })
    ));
    assert!(!server.exists("l"));

    let _guard = client.lock("held").lock().unwrap();
    let on_lock = client.count_down_latch("held");
    for outcome in [
        on_lock.count_down().map(drop),
        on_lock.count().map(drop),
        on_lock.try_set_count(1).map(drop),
        on_lock.wait_for(Duration::from_millis(10)).map(drop),
        on_lock.delete().map(drop),
    ] {
        match outcome {
            Err(Error::WrongKind { expected, .. }) => assert_eq!(expected, "count-down latch"),
            other => panic!("expected WrongKind, got {other:?}"),
        }
    }
    server.cmd::<String>(&["SET", "text", "hello"]);
    let on_text = client.count_down_latch("text");
    assert!(matches!(on_text.count_down(), Err(Error::WrongKind { .. })));
    assert!(matches!(on_text.delete(), Err(Error::WrongKind { .. })));
    assert_eq!(server.cmd::<String>(&["GET", "text"]), "hello", "untouched");
}

#[cfg(feature = "cluster")]
#[test]
fn on_a_cluster_a_count_down_opens_waiters_over_sharded_pubsub() {
    use support::cluster::RedisCluster;
    let cluster = RedisCluster::start(3);
    let client = || {
        redhold::Client::builder()
            .cluster(cluster.urls())
            .connect_timeout(Duration::from_secs(2))
            .build()
            .unwrap()
    };
    let (waiter_client, opener) = (client(), client());
    for name in cluster.names_on_each_master("latch") {
        let latch = waiter_client.count_down_latch(name.as_str());
        assert!(latch.try_set_count(1).unwrap());
        assert_eq!(cluster.cmd_for_key::<String>(&name, &["GET", &name]), "1");
        let waiter = {
            let latch = latch.clone();
            bounded::spawn("cluster waiter", move || latch.wait())
        };
        waiter.assert_parked_for(Duration::from_millis(200));
        assert_eq!(
            opener.count_down_latch(name.as_str()).count_down().unwrap(),
            0
        );
        waiter.join_within(PROMPTLY).unwrap();
    }
}
