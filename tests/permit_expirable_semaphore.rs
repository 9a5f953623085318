//! The permit-expirable semaphore (Redisson's `RPermitExpirableSemaphore`)
//! on a real Redis: ids and leases in Redisson's layout, a permit whose
//! lease ends goes back by itself (and a waiter gets it at the lease's end,
//! not at the safety net's re-check), release by id, lease updates (one
//! cut short wakes another client's waiter at the new end), a
//! waiter woken by a release without polling, bad input, a cluster.

mod bounded;
mod support;

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use redhold::Error;
use support::RedisServer;

/// Generous bound for a wake-up that takes milliseconds; below the
/// waiters' 5 s safety-net re-check.
const PROMPTLY: Duration = Duration::from_secs(2);

const MINUTE: Duration = Duration::from_secs(60);

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

#[test]
fn permits_have_ids_and_leases_in_redissons_layout() {
    let server = RedisServer::start();
    let client = server.client();
    let sem = client.permit_expirable_semaphore("render");
    assert!(sem.try_set_permits(2).unwrap());
    assert!(!sem.try_set_permits(9).unwrap());
    let before = now_ms();
    let permit = sem.acquire(MINUTE).unwrap();
    let id = permit.id();
    assert_eq!(id.len(), 32);
    assert!(id
        .bytes()
        .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()));
    assert_eq!(sem.available_permits().unwrap(), 1);
    // The count, and a sorted set "{name}:timeout" of raw 16-byte ids
    // scored by lease end (ms since the epoch).
    assert_eq!(server.cmd::<String>(&["GET", "render"]), "1");
    let members: Vec<(Vec<u8>, f64)> =
        server.cmd(&["ZRANGE", "{render}:timeout", "0", "-1", "WITHSCORES"]);
    assert_eq!(members.len(), 1);
    let hex: String = members[0].0.iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(hex, id);
    let ends = members[0].1 as i64;
    assert!(
        ends >= before + 60_000 && ends <= now_ms() + 60_000,
        "{ends}"
    );

    assert!(permit.update_lease(Duration::from_secs(120)).unwrap());
    let members: Vec<(Vec<u8>, f64)> =
        server.cmd(&["ZRANGE", "{render}:timeout", "0", "-1", "WITHSCORES"]);
    assert!(members[0].1 as i64 >= before + 120_000, "lease updated");
    assert!(sem.release(&id).unwrap(), "out, lease not ended");
    assert!(!sem.release(&id).unwrap(), "released already");
    assert_eq!(sem.available_permits().unwrap(), 2);
    permit.forget();
    assert_eq!(sem.available_permits().unwrap(), 2, "nothing given twice");
    let second = sem.acquire(MINUTE).unwrap();
    assert!(second.release().unwrap());
    assert_eq!(server.cmd::<i64>(&["ZCARD", "{render}:timeout"]), 0);
}

#[test]
fn an_ended_lease_gives_the_permit_back_and_wakes_a_waiter_at_its_end() {
    let server = RedisServer::start();
    let client = server.client();
    let sem = client.permit_expirable_semaphore("short");
    sem.try_set_permits(1).unwrap();
    let taken = Instant::now();
    let short = sem.acquire(Duration::from_millis(600)).unwrap();
    let short_id = short.id();
    short.forget(); // a holder that died: nobody releases
    let waiter = {
        let sem = sem.clone();
        bounded::spawn("waiter", move || {
            let permit = sem.acquire(MINUTE).map(|p| {
                let id = p.id();
                p.forget(); // kept taken for the check below
                id
            });
            (permit, Instant::now())
        })
    };
    let (permit, got) = waiter.join_within(Duration::from_secs(4));
    permit.unwrap();
    let after = got.duration_since(taken);
    assert!(
        after >= Duration::from_millis(590),
        "before the lease ended: {after:?}"
    );
    assert!(after < PROMPTLY, "not at the lease's end but {after:?}");
    assert!(
        !sem.release(&short_id).unwrap(),
        "the ended permit is not out any more"
    );
    assert_eq!(
        sem.available_permits().unwrap(),
        0,
        "the waiter holds the only one"
    );
}

#[test]
fn a_parked_acquirer_is_woken_by_a_release_by_id() {
    let server = RedisServer::start();
    let client = server.client();
    let sem = client.permit_expirable_semaphore("gate");
    sem.try_set_permits(1).unwrap();
    let held = sem.acquire(MINUTE).unwrap();
    let id = held.id();
    held.forget();
    let waiter = {
        let sem = client.permit_expirable_semaphore("gate");
        bounded::spawn("waiter", move || {
            (sem.acquire(MINUTE).map(|p| p.id()), Instant::now())
        })
    };
    waiter.assert_parked_for(Duration::from_millis(300));
    assert_eq!(client.stats().parked_waiters, 1);
    let scripts = server.scripts_run();
    std::thread::sleep(Duration::from_millis(700));
    assert_eq!(server.scripts_run(), scripts, "the waiter polled");
    let released = Instant::now();
    // Released by id from another client, as a Java service would.
    assert!(server
        .client()
        .permit_expirable_semaphore("gate")
        .release(&id)
        .unwrap());
    let (permit, woke) = waiter.join_within(PROMPTLY * 2);
    permit.unwrap();
    assert!(woke.duration_since(released) < PROMPTLY);
}

/// A lease shortened by `update_lease` must tell the waiters of every
/// client (`expirable_lease.lua` publishes when a permit's lease ends
/// sooner than before): a waiter parks until the earliest lease end it saw,
/// and nobody announces a lease's end. Client A holds the only permit with
/// a 20 s lease; client B's waiter parks on it (for the 5 s safety net's
/// re-check at most); A cuts the lease to 500 ms and forgets the permit.
/// B must get it at the new end, within [`PROMPTLY`]: without the update's
/// message it sleeps until the re-check, about 4 s after the new end.
#[test]
fn a_lease_cut_short_by_update_lease_wakes_another_clients_waiter() {
    const LONG: Duration = Duration::from_secs(20);
    const SHORT: Duration = Duration::from_millis(500);
    let server = RedisServer::start();
    let (a, b) = (server.client(), server.client());
    let sem = a.permit_expirable_semaphore("cut");
    sem.try_set_permits(1).unwrap();
    let permit = sem.acquire(LONG).unwrap();
    let waiter = {
        let sem = b.permit_expirable_semaphore("cut");
        bounded::spawn("other client's waiter", move || {
            let permit = sem.try_acquire_for(Duration::from_secs(10), MINUTE);
            (permit.map(|p| p.map(|p| p.id())), Instant::now())
        })
    };
    waiter.assert_parked_for(Duration::from_millis(300));
    assert_eq!(b.stats().parked_waiters, 1);
    let updated = Instant::now();
    assert!(permit.update_lease(SHORT).unwrap(), "the permit is out");
    permit.forget(); // it comes back only when the new lease ends
    let (got, at) = waiter.join_within(Duration::from_secs(12));
    let after = at.duration_since(updated);
    assert!(
        got.unwrap().is_some(),
        "the waiter gave up {after:?} after the lease was cut to {SHORT:?}"
    );
    assert!(
        after + Duration::from_millis(10) >= SHORT,
        "before the new lease ended: {after:?}"
    );
    assert!(
        after < SHORT + PROMPTLY,
        "the waiter got the permit {after:?} after its lease was cut from {LONG:?} to {SHORT:?}"
    );
}

#[test]
fn bad_input_and_names_of_other_kinds_are_refused() {
    let server = RedisServer::start();
    let client = server.client();
    let sem = client.permit_expirable_semaphore("s");
    assert!(matches!(
        sem.acquire(Duration::ZERO),
        Err(Error::InvalidArgument { .. })
    ));
    assert!(matches!(
        sem.release("not-an-id"),
        Err(Error::InvalidArgument { .. })
    ));
    assert!(matches!(
        sem.update_lease("00", MINUTE),
        Err(Error::InvalidArgument { .. })
    ));
    assert!(matches!(
        client.permit_expirable_semaphore("").try_acquire(MINUTE),
        Err(Error::InvalidName { .. })
    ));
    assert!(!server.exists("s"));
    let _guard = client.lock("held").lock().unwrap();
    let on_lock = client.permit_expirable_semaphore("held");
    assert!(matches!(
        on_lock.try_acquire(MINUTE),
        Err(Error::WrongKind { .. })
    ));
    assert!(matches!(
        on_lock.available_permits(),
        Err(Error::WrongKind { .. })
    ));
    assert!(matches!(
        on_lock.try_set_permits(1),
        Err(Error::WrongKind { .. })
    ));
}

#[cfg(feature = "cluster")]
#[test]
fn on_a_cluster_the_lease_set_lives_with_the_count() {
    use support::cluster::RedisCluster;
    let cluster = RedisCluster::start(3);
    let client = redhold::Client::builder()
        .cluster(cluster.urls())
        .connect_timeout(Duration::from_secs(2))
        .build()
        .unwrap();
    for name in cluster.names_on_each_master("pes") {
        let sem = client.permit_expirable_semaphore(name.as_str());
        sem.try_set_permits(1).unwrap();
        let permit = sem.acquire(MINUTE).unwrap();
        let leases = format!("{{{name}}}:timeout");
        assert_eq!(cluster.cmd_for_key::<i64>(&leases, &["ZCARD", &leases]), 1);
        let waiter = {
            let sem = sem.clone();
            bounded::spawn("cluster waiter", move || {
                sem.acquire(MINUTE).map(|p| p.id())
            })
        };
        waiter.assert_parked_for(Duration::from_millis(200));
        drop(permit);
        waiter.join_within(PROMPTLY).unwrap();
    }
}
