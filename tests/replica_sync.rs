//! `sync_replicas` on a real master and replica: acquires and releases reach
//! the replica before they return, renewals keep working, and with the
//! replica frozen an acquire fails with `Error::ReplicasNotSynced` and leaves
//! no lock behind.

mod bounded;
#[path = "support/fault_proxy.rs"]
#[allow(dead_code)] // this binary arms one kind of fault
mod fault_proxy;
mod support;

use std::time::{Duration, Instant};

use fault_proxy::{Action, FaultProxy, Matcher, Rule};
use redhold::{Client, Error};
use support::replica::{start_pair, wait_for_acks, wait_for_replica};
use support::RedisServer;

/// How long the client waits for the replica's acknowledgement.
const SYNC_TIMEOUT: Duration = Duration::from_millis(500);

/// Generous bound for a call that waits [`SYNC_TIMEOUT`] at most a few times.
const PROMPTLY: Duration = Duration::from_secs(5);

fn syncing_client(master: &RedisServer) -> Client {
    master
        .builder()
        .sync_replicas(1, SYNC_TIMEOUT)
        .response_timeout(Duration::from_secs(2))
        .build()
        .unwrap_or_else(|e| panic!("client with sync_replicas: {e}"))
}

#[test]
fn acquire_and_release_reach_the_replica_before_returning() {
    let (master, replica) = start_pair();
    let client = syncing_client(&master);

    let guard = client.lock("synced").lock().expect("acquire");
    // WAIT returned, so the replica has it already: no polling.
    assert!(
        replica.exists("synced"),
        "the acquire is not on the replica"
    );
    let again = client.lock("synced").lock().expect("reentrant acquire");
    drop(again);
    guard.unlock().expect("release");
    assert!(
        !replica.exists("synced"),
        "the release is not on the replica"
    );

    // Other kinds go through the same path.
    let fair = client
        .fair_lock("synced-fair")
        .lock()
        .expect("fair acquire");
    assert!(replica.exists("synced-fair"));
    fair.unlock().expect("fair release");
    let write = client
        .read_write_lock("synced-rw")
        .write()
        .lock()
        .expect("write acquire");
    assert!(replica.exists("synced-rw"));
    write.unlock().expect("write release");
    assert!(!replica.exists("synced-rw"));
}

#[test]
fn renewals_with_sync_replicas_keep_the_lock() {
    let (master, replica) = start_pair();
    let watchdog = Duration::from_secs(1);
    let client = master
        .builder()
        .sync_replicas(1, SYNC_TIMEOUT)
        .response_timeout(Duration::from_secs(2))
        .watchdog_timeout(watchdog)
        .build()
        .expect("client");
    let guard = client.lock("renewed").lock().expect("acquire");
    std::thread::sleep(watchdog * 3);
    assert!(guard.is_held(), "the watchdog lost the lock");
    let ttl: i64 = replica.cmd(&["PTTL", "renewed"]);
    assert!(ttl > 0, "PTTL on the replica: {ttl}");
    guard.unlock().expect("release");
}

#[test]
fn acquire_fails_cleanly_while_the_replica_is_frozen() {
    let (master, replica) = start_pair();
    let client = syncing_client(&master);
    // Without sync_replicas nothing waits for the replica.
    let plain = master.client();

    replica.freeze();
    let result = {
        let client = client.clone();
        bounded::spawn("acquire", move || {
            let started = Instant::now();
            let outcome = client.lock("unsynced").lock().map(|guard| guard.leak());
            (outcome, started.elapsed())
        })
        .join_within(PROMPTLY)
    };
    let fair_result = {
        let client = client.clone();
        bounded::spawn("fair acquire", move || {
            client
                .fair_lock("unsynced-fair")
                .lock()
                .map(|guard| guard.leak())
        })
        .join_within(PROMPTLY)
    };
    let plain_works = plain.lock("not-waiting").lock().map(|g| g.unlock());
    replica.thaw();

    let (outcome, took) = result;
    match outcome {
        Err(Error::ReplicasNotSynced {
            ref lock,
            wanted,
            acknowledged,
        }) => {
            assert_eq!(lock, "unsynced");
            assert_eq!(wanted, 1);
            assert_eq!(acknowledged, 0);
        }
        other => panic!("expected ReplicasNotSynced, got {other:?}"),
    }
    let message = outcome.unwrap_err().to_string();
    assert!(
        message.contains("unsynced"),
        "message names no lock: {message}"
    );
    assert!(
        took >= SYNC_TIMEOUT,
        "gave up after {took:?}, before the {SYNC_TIMEOUT:?} allowed"
    );
    // The acquire was undone on the master.
    assert!(
        !master.exists("unsynced"),
        "the failed acquire left its lock"
    );

    match fair_result {
        Err(Error::ReplicasNotSynced { ref lock, .. }) => assert_eq!(lock, "unsynced-fair"),
        other => panic!("fair lock: expected ReplicasNotSynced, got {other:?}"),
    }
    for key in [
        "unsynced-fair",
        "redisson_lock_queue:{unsynced-fair}",
        "redisson_lock_timeout:{unsynced-fair}",
    ] {
        assert!(!master.exists(key), "the failed fair acquire left {key}");
    }

    assert!(
        matches!(plain_works, Ok(Ok(()))),
        "a client without sync_replicas: {plain_works:?}"
    );

    // Once the replica is back and acknowledging, the same client acquires again.
    wait_for_replica(&master, &replica, PROMPTLY);
    wait_for_acks(&master, PROMPTLY);
    let guard = client.lock("unsynced").lock().expect("acquire after thaw");
    assert!(replica.exists("unsynced"));
    guard.unlock().expect("release");
}

/// Found by the exhaustive model (its defect 8, `model/`): an acquire
/// runs, and the connection is cut before its `WAIT`'s reply; the pool
/// runs the whole write again, so Redis counts two holds of the thread;
/// that `WAIT` counts no replica (frozen), and the call fails with
/// `ReplicasNotSynced`. Both holds must go: no guard stands for either.
/// The undo gave back one hold only (a plain release), and the first
/// stayed with no guard until the watchdog timeout; it now releases,
/// "only above the guards' holds", until Redis counts no more.
#[test]
fn an_acquire_run_twice_by_the_pool_is_undone_whole_when_unreplicated() {
    let (master, replica) = start_pair();
    let proxy = FaultProxy::start(master.port());
    let client = redhold::Client::builder()
        .url(proxy.url())
        .sync_replicas(1, SYNC_TIMEOUT)
        .response_timeout(Duration::from_secs(2))
        .build()
        .expect("client through the proxy");
    let name = "unsynced-twice";
    // Scripts loaded and the path warm before the fault.
    client
        .lock("warm")
        .lock()
        .expect("a first hold")
        .unlock()
        .expect("its release");
    replica.freeze();
    let cut = proxy.arming().arm(Rule {
        matcher: Matcher {
            commands: vec!["WAIT".into()],
            ..Matcher::default()
        },
        action: Action::LoseReply,
    });
    let outcome = {
        let client = client.clone();
        bounded::spawn("acquire", move || {
            client
                .lock(name)
                .try_lock()
                .map(|guard| guard.map(|g| g.leak()))
        })
        .join_within(PROMPTLY)
    };
    let held = master.cmd::<Vec<(String, String)>>(&["HGETALL", name]);
    replica.thaw();
    assert!(
        cut.wait_fired(Duration::from_secs(1)),
        "the first WAIT's reply was not cut"
    );
    assert!(
        matches!(outcome, Err(Error::ReplicasNotSynced { .. })),
        "expected ReplicasNotSynced, got {outcome:?}"
    );
    assert!(
        held.is_empty(),
        "the failed acquire, run twice by the pool, left holds no guard stands for: {held:?}"
    );
}
