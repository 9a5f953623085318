//! Locks through Redis Sentinel (a master, one replica, three sentinels, all
//! real processes): they work, and after the master is killed the same
//! clients, never rebuilt, work against the promoted replica within 10 s of
//! the failover, wake-ups included. A waiter parked in `lock()` rides out
//! the failover, the watchdog renews through it, and a hold the promoted
//! replica never received is reported lost. A stopped sentinel costs a
//! client no more than its timeouts: it moves on to the next sentinel.
//! After a failover away from a master that serves on, a client whose first
//! sentinel is stale locks on the master the others announced, not on the
//! old one, and follows their `+switch-master` though no connection of it
//! fails (it watches every sentinel).
#![cfg(feature = "sentinel")]

mod bounded;
// The failover checker's forwarder: it can shut one sentinel out of one
// server. This binary uses part of it.
#[allow(dead_code)]
#[path = "model/failover/link.rs"]
mod link;
mod support;

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use link::{Link, FRONT_HOST};
use redhold::{Client, Error, LossCause};
use support::replica::wait_for_replica;
#[cfg(feature = "tls")]
use support::sentinel::TlsSentinelSetup;
use support::sentinel::{Sentinel, SentinelSetup, MASTER_NAME};
use support::RedisServer;

/// Generous bound for anything that should take milliseconds; far below the
/// 30 s watchdog timeout, so meeting it proves a wake-up, not an expiry.
const PROMPTLY: Duration = Duration::from_secs(5);

/// How long the sentinels may take to promote the replica (about 2.6 s here).
const FAILOVER_LIMIT: Duration = Duration::from_secs(30);

/// How soon after the failover the clients must work again.
const RECOVERY_LIMIT: Duration = Duration::from_secs(10);

fn client(setup: &SentinelSetup) -> Client {
    Client::builder()
        .sentinel(setup.sentinel_urls(), MASTER_NAME)
        .connect_timeout(Duration::from_secs(1))
        .response_timeout(Duration::from_secs(1))
        .build()
        .unwrap_or_else(|e| panic!("sentinel client for {:?}: {e}", setup.sentinel_urls()))
}

/// Holds `name` on `holder`, blocks a waiter on `waiter`, releases, and
/// checks that the waiter gets it promptly.
fn waiter_is_woken(holder: &Client, waiter: &Client, name: &str) {
    let guard = holder.lock(name).lock().expect("holder");
    let lock = waiter.lock(name);
    let blocked = bounded::spawn("waiter", move || {
        let guard = lock.lock().map_err(|e| e.to_string())?;
        guard.unlock().map_err(|e| e.to_string())
    });
    blocked.assert_running_for(Duration::from_millis(300));
    let released = Instant::now();
    guard.unlock().expect("release");
    blocked
        .join_within(PROMPTLY)
        .unwrap_or_else(|e| panic!("waiter on {name}: {e}"));
    let took = released.elapsed();
    assert!(took < PROMPTLY, "{name}: woken {took:?} after the release");
}

#[test]
fn locks_follow_the_master_through_a_failover() {
    let mut setup = SentinelSetup::start();
    let (a, b) = (client(&setup), client(&setup));

    // Before: locks land on the master and replicate to the replica.
    let guard = a.lock("before").lock().expect("lock through sentinel");
    assert_eq!(setup.master.cmd::<i64>(&["EXISTS", "before"]), 1);
    assert!(
        b.lock("before").try_lock().expect("try_lock").is_none(),
        "a second client got a held lock"
    );
    guard.unlock().expect("unlock");
    assert_eq!(setup.master.cmd::<i64>(&["EXISTS", "before"]), 0);
    {
        let _read = a
            .read_write_lock("rw-before")
            .read()
            .lock()
            .expect("read lock");
        let _fair = a.fair_lock("fair-before").lock().expect("fair lock");
        let _fenced = a.fenced_lock("fenced-before").lock().expect("fenced lock");
    }
    waiter_is_woken(&a, &b, "wake-before");

    // The master dies; the sentinels promote the replica.
    let killed = Instant::now();
    setup.kill_master();
    let failover = setup.wait_for_failover(FAILOVER_LIMIT);
    eprintln!("failover announced {failover:?} after the kill");

    // The same clients work again within 10 s of the failover. Calls may
    // fail while they find the new master; each failure is retried.
    let recovered = {
        let (a, b) = (a.clone(), b.clone());
        bounded::spawn("recovery", move || {
            let since_failover = Instant::now();
            let mut last_errors = Vec::new();
            for c in [&a, &b] {
                loop {
                    match c.lock("after").try_lock() {
                        Ok(Some(guard)) => match guard.unlock() {
                            Ok(()) => break,
                            Err(e) => last_errors.push(format!("unlock: {e}")),
                        },
                        Ok(None) => last_errors.push("held by somebody".to_owned()),
                        Err(e) => last_errors.push(e.to_string()),
                    }
                    if since_failover.elapsed() > RECOVERY_LIMIT {
                        last_errors.reverse();
                        last_errors.truncate(5);
                        return Err(format!(
                            "no lock within {RECOVERY_LIMIT:?} of the failover; last errors: {last_errors:#?}"
                        ));
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
            Ok(since_failover.elapsed())
        })
    }
    .join_within(FAILOVER_LIMIT + RECOVERY_LIMIT)
    .unwrap_or_else(|e| panic!("{e}"));
    eprintln!(
        "clients recovered {recovered:?} after the failover ({:?} after the kill)",
        killed.elapsed()
    );

    // After: every lock kind works on the promoted replica, and wake-ups
    // (a pub/sub connection of its own) arrive from it.
    let guard = a.lock("after").lock().expect("lock after the failover");
    assert_eq!(setup.replica.cmd::<i64>(&["EXISTS", "after"]), 1);
    assert!(
        b.lock("after").try_lock().expect("try_lock").is_none(),
        "a second client got a held lock after the failover"
    );
    drop(guard);
    {
        let _read = a
            .read_write_lock("rw-after")
            .read()
            .lock()
            .expect("read lock");
        let _fair = a.fair_lock("fair-after").lock().expect("fair lock");
        let _fenced = a.fenced_lock("fenced-after").lock().expect("fenced lock");
        let _spin = a.spin_lock("spin-after").lock().expect("spin lock");
    }
    waiter_is_woken(&a, &b, "wake-after");
    waiter_is_woken(&b, &a, "wake-after-2");
}

/// The watchdog timeout of the failover tests: well above the time a
/// failover takes here (about 3 s), so that a replicated hold outlives it
/// and its loss would be a defect, not an expiry.
const FAILOVER_WATCHDOG: Duration = Duration::from_secs(20);

/// The names `on_lock_lost` was called with, in order.
type LostLocks = Arc<Mutex<Vec<String>>>;

/// A sentinel client whose watchdog timeout is [`FAILOVER_WATCHDOG`] and
/// whose lost locks land in `lost`.
fn watched_client(setup: &SentinelSetup, lost: &LostLocks) -> Client {
    let lost = Arc::clone(lost);
    Client::builder()
        .sentinel(setup.sentinel_urls(), MASTER_NAME)
        .connect_timeout(Duration::from_secs(1))
        .response_timeout(Duration::from_secs(1))
        .watchdog_timeout(FAILOVER_WATCHDOG)
        .on_lock_lost(move |name| lost.lock().unwrap().push(name.to_owned()))
        .build()
        .unwrap_or_else(|e| panic!("sentinel client for {:?}: {e}", setup.sentinel_urls()))
}

/// A thread parked in `lock()` on `name`: its result is `Ok` once it got
/// the lock and gave it back, or the error it met (with its source).
fn parked_waiter(client: &Client, name: &str) -> bounded::Bounded<Result<(), String>> {
    let lock = client.lock(name);
    let waiter = bounded::spawn(&format!("waiter on {name}"), move || {
        let guard = lock.lock().map_err(|e| e.report())?;
        guard.unlock().map_err(|e| e.report())
    });
    waiter.assert_parked_for(Duration::from_millis(300));
    waiter
}

/// The key's time to live in ms on `server` (negative: no key, or no TTL).
fn pttl(server: &support::RedisServer, key: &str) -> i64 {
    server.try_cmd(&["PTTL", key]).unwrap_or(-3)
}

#[test]
fn a_parked_waiter_and_a_watched_hold_ride_out_a_failover() {
    let mut setup = SentinelSetup::start();
    let lost = LostLocks::default();
    let a = watched_client(&setup, &lost);
    let b = client(&setup);

    let kept = a.lock("kept").lock().expect("watched hold");
    let handed = a.lock("handed").lock().expect("the holder's hold");
    let waiter = parked_waiter(&b, "handed");
    // Both holds reach the replica before the master dies, so the new
    // master has them: neither may be lost.
    for key in ["kept", "handed"] {
        assert!(
            bounded::wait_until(PROMPTLY, || setup.replica.exists(key)).is_some(),
            "{key} did not reach the replica"
        );
    }

    setup.kill_master();
    let failover = setup.wait_for_failover(FAILOVER_LIMIT);
    eprintln!("failover announced {failover:?} after the kill");

    // The waiter is still parked, not failed: the lock is A's on the new
    // master too.
    waiter.assert_parked_for(Duration::from_secs(1));

    // The watchdog renews through the new master: the TTL there goes up.
    let mut last = pttl(&setup.replica, "kept");
    assert!(
        last > 0,
        "the watched hold is gone from the new master (PTTL {last}) after a \
         {failover:?} failover; lost: {:?}",
        lost.lock().unwrap()
    );
    let renewed = bounded::wait_until(FAILOVER_WATCHDOG, || {
        let now = pttl(&setup.replica, "kept");
        let went_up = now > last;
        last = now;
        went_up
    });
    assert!(
        renewed.is_some(),
        "no renewal reached the new master within {FAILOVER_WATCHDOG:?} (PTTL {last})"
    );
    assert!(
        lost.lock().unwrap().is_empty(),
        "lost: {:?}",
        lost.lock().unwrap()
    );

    // The holder's release goes to the new master, and wakes the waiter
    // there.
    handed.unlock().expect("release on the new master");
    waiter
        .join_within(PROMPTLY + RECOVERY_LIMIT)
        .unwrap_or_else(|e| panic!("the parked waiter failed after the failover: {e}"));

    kept.unlock()
        .expect("release of the watched hold on the new master");
    assert!(
        lost.lock().unwrap().is_empty(),
        "lost: {:?}",
        lost.lock().unwrap()
    );
}

#[test]
fn a_hold_the_new_master_never_got_is_reported_lost() {
    let mut setup = SentinelSetup::start();
    let lost = LostLocks::default();
    let a = watched_client(&setup, &lost);
    let b = client(&setup);

    // The replica is cut off before the hold is taken: frozen, so that it
    // cannot reconnect, and its link closed, so that nothing the master
    // writes next sits in its socket to be read after the thaw.
    setup.replica.freeze();
    let cut: i64 = setup.master.cmd(&["CLIENT", "KILL", "TYPE", "replica"]);
    assert_eq!(cut, 1, "the replica link was not cut");
    let held = a
        .lock("unreplicated")
        .lock()
        .expect("hold on the old master");
    let waiter = parked_waiter(&b, "unreplicated");

    setup.kill_master();
    setup.replica.thaw();
    let failover = setup.wait_for_failover(FAILOVER_LIMIT);
    eprintln!("failover announced {failover:?} after the kill");

    // The new master never had A's hold: the waiter gets the lock, and A
    // is told it lost its hold instead of keeping it unawares.
    waiter
        .join_within(PROMPTLY + RECOVERY_LIMIT)
        .unwrap_or_else(|e| panic!("the parked waiter failed after the failover: {e}"));
    assert!(
        bounded::wait_until(FAILOVER_WATCHDOG + PROMPTLY, || !lost
            .lock()
            .unwrap()
            .is_empty())
        .is_some(),
        "on_lock_lost was not called for a hold the new master does not have"
    );
    assert_eq!(*lost.lock().unwrap(), ["unreplicated"]);
    assert!(!held.is_held(), "the guard still says it holds the lock");
    match held.unlock() {
        Err(Error::LockLost { lock, cause, .. }) => {
            assert_eq!(lock, "unreplicated");
            assert!(
                matches!(cause, LossCause::Vanished | LossCause::TakenOver),
                "{cause:?}"
            );
        }
        other => panic!("release of a lost hold: {other:?}, not LockLost"),
    }
}

/// A client that is leaked, not dropped, when the test fails: its drop
/// would join threads that may be stuck on the stopped sentinel (the very
/// defect under test), and the processes of the setup must still be killed.
struct ForgetOnPanic(Option<Client>);

impl std::ops::Deref for ForgetOnPanic {
    type Target = Client;
    fn deref(&self) -> &Client {
        self.0.as_ref().expect("present until dropped")
    }
}

impl Drop for ForgetOnPanic {
    fn drop(&mut self) {
        if thread::panicking() {
            std::mem::forget(self.0.take());
        }
    }
}

/// Generous bound for a call that must skip a stopped sentinel: one connect
/// or response timeout (1 s) plus a few round trips; without the timeouts it
/// would never return.
const PAST_A_STOPPED_SENTINEL: Duration = Duration::from_secs(10);

#[test]
fn a_stopped_sentinel_costs_no_more_than_the_timeouts() {
    let setup = SentinelSetup::start();
    let watchdog_timeout = Duration::from_secs(3);
    let lost = Arc::new(AtomicUsize::new(0));
    let build = {
        let urls = setup.sentinel_urls();
        let lost = Arc::clone(&lost);
        move || {
            let lost = Arc::clone(&lost);
            Client::builder()
                .sentinel(urls.clone(), MASTER_NAME)
                .connect_timeout(Duration::from_secs(1))
                .response_timeout(Duration::from_secs(1))
                .watchdog_timeout(watchdog_timeout)
                .on_lock_lost(move |_| {
                    lost.fetch_add(1, Ordering::SeqCst);
                })
                .build()
                .map_err(|e| e.to_string())
        }
    };
    let a = ForgetOnPanic(Some(build().expect("client before the stop")));
    // Leaked, so that a failing test does not hang in the guard's drop.
    a.lock("renewed")
        .lock()
        .expect("lock before the stop")
        .leak();

    // The sentinel every look-up asks first stops answering, and every idle
    // command connection dies: the next ones are looked up through the
    // sentinels (the watchdog's first).
    setup.sentinels[0].freeze();
    setup
        .master
        .cmd::<i64>(&["CLIENT", "KILL", "TYPE", "normal"]);

    // Twice the watchdog timeout: the renewals went through another sentinel.
    thread::sleep(2 * watchdog_timeout);
    assert!(
        setup.master.exists("renewed"),
        "the lock expired: the watchdog could not reach the master"
    );
    assert_eq!(lost.load(Ordering::SeqCst), 0, "on_lock_lost was called");

    // Several threads need connections at once: none queues behind another
    // that waits for the stopped sentinel.
    setup
        .master
        .cmd::<i64>(&["CLIENT", "KILL", "TYPE", "normal"]);
    let workers: Vec<_> = (0..4)
        .map(|t| {
            let a = Client::clone(&a);
            bounded::spawn(&format!("worker-{t}"), move || {
                let guard = a.lock(format!("busy-{t}")).lock()?;
                guard.unlock()
            })
        })
        .collect();
    for worker in workers {
        worker
            .join_within(PAST_A_STOPPED_SENTINEL)
            .expect("lock and unlock with a stopped sentinel");
    }

    // A client built now finds the master through the other sentinels, and
    // its wake-ups (a pub/sub connection looked up the same way) arrive.
    let b = bounded::spawn("build", build)
        .join_within(PAST_A_STOPPED_SENTINEL)
        .expect("client built while a sentinel is stopped");
    let b = ForgetOnPanic(Some(b));
    waiter_is_woken(&a, &b, "wake-with-a-stopped-sentinel");

    a.lock("renewed").unlock().expect("release after the stop");
    let closer = {
        let (a, b) = (Client::clone(&a), Client::clone(&b));
        bounded::spawn("shutdown", move || a.shutdown().and_then(|()| b.shutdown()))
    };
    closer
        .join_within(PROMPTLY)
        .expect("shutdown with a stopped sentinel");
    setup.sentinels[0].thaw();
}

/// Sentinel and master over TLS, signed by a private authority given as
/// `tls_root_cert`: the look-up and the master's connections trust it, and
/// only it (before, they trusted the platform's roots alone, so `build()`
/// failed with a certificate error).
#[cfg(feature = "tls")]
#[test]
fn a_tls_deployment_is_reached_with_the_given_root_certificate() {
    let setup = TlsSentinelSetup::start();
    let build = |root: Vec<u8>| {
        Client::builder()
            .sentinel([setup.sentinel_tls_url()], MASTER_NAME)
            .tls_root_cert(root)
            .connect_timeout(Duration::from_secs(1))
            .response_timeout(Duration::from_secs(1))
            .build()
    };
    let client =
        |root| build(root).unwrap_or_else(|e| panic!("sentinel client over TLS: {}", e.report()));
    let (a, b) = (client(setup.master.ca_pem()), client(setup.master.ca_pem()));

    let guard = a.lock("over-tls").lock().expect("lock over TLS");
    assert_eq!(setup.master.cmd(&["EXISTS", "over-tls"]), "1");
    assert!(
        b.lock("over-tls").try_lock().expect("try_lock").is_none(),
        "a second client got a held lock"
    );
    guard.unlock().expect("unlock over TLS");
    waiter_is_woken(&a, &b, "woken-over-tls");

    // An authority that signed nothing there is refused by the look-up.
    let refused = build(setup.master.untrusted_ca_pem())
        .expect_err("a client trusting another authority connected");
    let report = refused.report();
    assert!(
        report.contains("certificate"),
        "not a certificate error: {report}"
    );
}

/// The sentinels replace a master that still runs, and cannot demote it
/// (as when it is cut off from them but not from the clients): a client
/// whose connections all lead to the old master drops them when the
/// sentinels announce the new one, so its locks, its waiters' wake-ups and
/// another client's meet on the new master. Before, it stayed on the old
/// master for as long as its connections lived, and took there the locks
/// that clients on the new master took too.
#[test]
fn clients_follow_the_sentinels_away_from_a_master_that_still_runs() {
    let setup = SentinelSetup::start_with_undemotable_master();
    let (a, b) = (client(&setup), client(&setup));
    // Command and pub/sub connections to the master, used once.
    waiter_is_woken(&a, &b, "woken-before");
    waiter_is_woken(&b, &a, "woken-before-the-other-way");

    setup.sentinels[0]
        .cmd::<()>(&["SENTINEL", "FAILOVER", MASTER_NAME])
        .expect("SENTINEL FAILOVER");
    setup.wait_for_failover(FAILOVER_LIMIT);
    let info: String = setup.master.cmd(&["INFO", "replication"]);
    assert!(info.contains("role:master"), "the old master was demoted");

    let moved = Instant::now();
    loop {
        let guard = a.lock("after").lock().expect("lock after the failover");
        let on_new_master = setup.replica.exists("after");
        guard.unlock().expect("unlock after the failover");
        if on_new_master {
            break;
        }
        assert!(
            moved.elapsed() < RECOVERY_LIMIT,
            "{RECOVERY_LIMIT:?} after the failover, the client still locks on the old master"
        );
        thread::sleep(Duration::from_millis(100));
    }
    let guard = a.lock("shared").lock().expect("lock on the new master");
    assert!(setup.replica.exists("shared"));
    assert!(
        b.lock("shared").try_lock().expect("try_lock").is_none(),
        "two clients hold one lock, one on each master"
    );
    guard.unlock().expect("unlock");
    waiter_is_woken(&a, &b, "woken-after");
    waiter_is_woken(&b, &a, "woken-after-the-other-way");
}

/// A master and its replica, each known only by the address of its
/// [`Link`] (`127.0.0.2:<port>`), and three sentinels monitoring them
/// through the links: the links can shut one sentinel out of one server.
/// [`split`](Self::split) fails the master over to the replica while the
/// first sentinel stays stale.
#[derive(Debug)]
struct StaleSentinelSetup {
    /// Stopped first, so that no sentinel acts on the links' going.
    sentinels: Vec<Sentinel>,
    /// `SENTINEL MYID` of each sentinel.
    ids: Vec<String>,
    master_link: Link,
    replica_link: Link,
    master: RedisServer,
    replica: RedisServer,
}

impl StaleSentinelSetup {
    /// Starts the servers, their links and the sentinels, and waits until
    /// every sentinel knows the master, the replica (the last two see it
    /// up) and the two other sentinels.
    fn start() -> StaleSentinelSetup {
        // Diskless sync without delay: the replica is in sync at once
        // (not after 5 s). The announced address is the link's.
        let args = [
            "--repl-diskless-sync-delay",
            "0",
            "--replica-announce-ip",
            FRONT_HOST,
        ];
        let master = RedisServer::start_with_args(&args);
        let replica = RedisServer::start_with_args(&args);
        let master_link = Link::start(master.port());
        let replica_link = Link::start(replica.port());
        replica.cmd::<()>(&["REPLICAOF", FRONT_HOST, &master.port().to_string()]);
        wait_for_replica(&master, &replica, Duration::from_secs(10));
        let sentinels: Vec<Sentinel> = (0..3)
            .map(|_| Sentinel::start_monitoring(FRONT_HOST, master.port()))
            .collect();
        let ids = sentinels
            .iter()
            .map(|s| {
                s.cmd::<String>(&["SENTINEL", "MYID"])
                    .expect("SENTINEL MYID")
            })
            .collect();
        let setup = StaleSentinelSetup {
            sentinels,
            ids,
            master_link,
            replica_link,
            master,
            replica,
        };
        setup.wait_settled(Duration::from_secs(20));
        setup
    }

    fn wait_settled(&self, limit: Duration) {
        let deadline = Instant::now() + limit;
        let (master, replica) = (
            self.master.port().to_string(),
            self.replica.port().to_string(),
        );
        loop {
            let settled = self.sentinels.iter().enumerate().all(|(i, s)| {
                let knows_master = s.master_state().is_ok_and(|v| {
                    v.get("port") == Some(&master)
                        && v.get("flags").map(String::as_str) == Some("master")
                        && v.get("num-slaves").map(String::as_str) == Some("1")
                        && v.get("num-other-sentinels").map(String::as_str) == Some("2")
                });
                // The sentinels that fail the master over must see the
                // replica up; the stale one needs only to know it.
                knows_master
                    && (i == 0
                        || s.cmd::<Vec<HashMap<String, String>>>(&[
                            "SENTINEL",
                            "REPLICAS",
                            MASTER_NAME,
                        ])
                        .is_ok_and(|list| {
                            list.iter().any(|r| {
                                r.get("port") == Some(&replica)
                                    && r.get("flags").map(String::as_str) == Some("slave")
                            })
                        }))
            });
            if settled {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "sentinels did not settle within {limit:?}: {}",
                self.describe()
            );
            thread::sleep(Duration::from_millis(100));
        }
    }

    /// `redis://` URLs of the sentinels at `indexes`, in that order.
    fn urls(&self, indexes: &[usize]) -> Vec<String> {
        indexes.iter().map(|&i| self.sentinels[i].url()).collect()
    }

    /// Keeps the first sentinel stale and fails the master over to the
    /// replica while it serves on; returns once the two other sentinels
    /// name the replica and it is a master.
    ///
    /// The stale sentinel learns the new configuration by no path: the
    /// replica's link shuts it out (no `INFO` of the promoted replica, no
    /// hello on its `__sentinel__:hello`), it takes no `PUBLISH` (the
    /// others' hello messages sent to it directly), and the master's link
    /// shuts the other two out, so no hello of theirs reaches it through
    /// the master either, and they cannot demote the master. The master
    /// still answers it, so it goes on naming the master; clients reach
    /// both servers through the links as before.
    fn split(&self) {
        self.sentinels[0]
            .cmd::<()>(&["ACL", "SETUSER", "default", "-publish"])
            .expect("deny PUBLISH on the stale sentinel");
        self.replica_link.isolate_sentinel(&self.ids[0]);
        self.master_link.isolate_sentinel(&self.ids[1]);
        self.master_link.isolate_sentinel(&self.ids[2]);
        let started = Instant::now();
        let want = self.replica.port();
        loop {
            let switched = self.sentinels[1..]
                .iter()
                .all(|s| s.master_port().ok() == Some(want));
            if switched && is_master(&self.replica) {
                return;
            }
            assert!(
                started.elapsed() < FAILOVER_LIMIT,
                "no failover to the replica (:{want}) within {FAILOVER_LIMIT:?}: {}",
                self.describe()
            );
            thread::sleep(Duration::from_millis(50));
        }
    }

    /// What every process says, for a failure message.
    fn describe(&self) -> String {
        let mut text = String::new();
        for (name, server) in [("master", &self.master), ("replica", &self.replica)] {
            let info = server
                .try_cmd::<String>(&["INFO", "replication"])
                .unwrap_or_else(|e| e.to_string());
            text.push_str(&format!("\n--- {name} :{} ---\n{info}", server.port()));
        }
        for s in &self.sentinels {
            text.push_str(&format!(
                "\n--- sentinel {} ---\n{:?}",
                s.url(),
                s.master_state()
            ));
        }
        text.push_str(&format!(
            "\n--- stale sentinel's log ---\n{}",
            self.sentinels[0].log()
        ));
        text
    }
}

/// Whether `server` says it is a master.
fn is_master(server: &RedisServer) -> bool {
    server
        .try_cmd::<String>(&["INFO", "replication"])
        .is_ok_and(|info| info.contains("role:master"))
}

/// How many clients of `sentinel` are subscribed to a channel (the
/// sentinels' own connections to each other never are).
fn subscribers(sentinel: &Sentinel) -> usize {
    let list: String = sentinel.cmd(&["CLIENT", "LIST"]).expect("CLIENT LIST");
    list.lines()
        .filter(|line| !line.contains(" sub=0 "))
        .count()
}

/// Waits until `sentinel` has `count` subscribed clients.
fn wait_subscribers(sentinel: &Sentinel, count: usize) {
    let deadline = Instant::now() + PROMPTLY;
    while subscribers(sentinel) != count {
        assert!(
            Instant::now() < deadline,
            "sentinel {} has {} subscribed clients after {PROMPTLY:?}, not {count}",
            sentinel.url(),
            subscribers(sentinel)
        );
        thread::sleep(Duration::from_millis(20));
    }
}

/// A sentinel client asking the sentinels at `urls`, in that order.
fn client_of(urls: Vec<String>) -> Client {
    Client::builder()
        .sentinel(urls.clone(), MASTER_NAME)
        .connect_timeout(Duration::from_secs(1))
        .response_timeout(Duration::from_secs(1))
        .build()
        .unwrap_or_else(|e| panic!("sentinel client for {urls:?}: {e}"))
}

/// After a failover away from a master that serves on, the sentinel a
/// client's look-up asks first may not know it yet (here it never does)
/// and still name the old master, which answers `ROLE master`. The
/// client's watch, on another sentinel, heard `+switch-master`: its next
/// lock must land on the announced master, where a client that asks an
/// up-to-date sentinel meets it. Before `Sentinels::switched_to`, the
/// look-up went back to the old master, and both clients held the lock.
#[test]
fn a_stale_sentinel_does_not_send_the_client_back_to_the_old_master() {
    let setup = StaleSentinelSetup::start();
    // Look-ups ask the stale sentinel first (the one that answered last,
    // the first one to begin with); the watch starts there too.
    let a = client_of(setup.urls(&[0, 1, 2]));
    let b = client_of(setup.urls(&[2]));
    // `a` waits once, so that it has a pub/sub connection to the master.
    waiter_is_woken(&b, &a, "woken-before");
    let guard = a.lock("before").lock().expect("lock before the failover");
    assert!(
        setup.master.exists("before"),
        "the lock is not on the master"
    );
    guard.unlock().expect("unlock before the failover");

    // The client watches every sentinel; until issue 40 it watched only
    // the first, and this cut moved that watch to one that knows. The
    // watch reconnects to the stale sentinel.
    wait_subscribers(&setup.sentinels[0], 1);
    let killed: i64 = setup.sentinels[0]
        .cmd(&["CLIENT", "KILL", "TYPE", "pubsub"])
        .expect("CLIENT KILL on the stale sentinel");
    assert_eq!(killed, 1, "the stale sentinel had one watch to cut");
    wait_subscribers(&setup.sentinels[0], 1);
    wait_subscribers(&setup.sentinels[1], 1);

    let reconnects = a.stats().pubsub_reconnects;
    setup.split();
    // The watch heard `+switch-master` once its pub/sub connection moved
    // (the watch drops it right after handing the address over).
    let heard = Instant::now();
    while a.stats().pubsub_reconnects == reconnects {
        assert!(
            heard.elapsed() < PROMPTLY,
            "the client did not follow +switch-master within {PROMPTLY:?}"
        );
        thread::sleep(Duration::from_millis(20));
    }
    let stale = setup.sentinels[0].master_port();
    assert_eq!(
        stale,
        Ok(setup.master.port()),
        "the first sentinel is not stale: {}",
        setup.describe()
    );
    assert!(is_master(&setup.master), "the old master was demoted");

    let guard = a.lock("after").lock().expect("lock after the failover");
    assert!(
        !setup.master.exists("after"),
        "the lock landed on the old master, which the stale sentinel still names"
    );
    assert!(
        setup.replica.exists("after"),
        "the lock is not on the new master"
    );
    // A client that asks an up-to-date sentinel meets it there.
    let other = client_of(setup.urls(&[1, 2]));
    assert!(
        other.lock("after").try_lock().expect("try_lock").is_none(),
        "two clients hold one lock, one on each master"
    );
    guard.unlock().expect("unlock after the failover");
    assert_eq!(
        setup.sentinels[0].master_port(),
        Ok(setup.master.port()),
        "the first sentinel learned the switch during the test"
    );
}

/// Issue 40, hole 3: the watch must not listen only where the look-up
/// asks first. Here the first sentinel is stale and never learns the
/// switch; nothing moves the client's watch off it (no connection of the
/// client fails). The client must still follow `+switch-master`, heard
/// from the other sentinels, and lock on the new master. Then the stale
/// sentinel's watch connection is cut: the watch that reconnects there
/// hears it name the old master, which must not send the client back.
#[test]
fn a_stale_first_sentinel_does_not_hide_the_switch_from_the_watch() {
    let setup = StaleSentinelSetup::start();
    // Look-ups ask the stale sentinel first (the one that answered last,
    // the first one to begin with).
    let a = client_of(setup.urls(&[0, 1, 2]));
    let b = client_of(setup.urls(&[2]));
    // `a` waits once, so that it has a pub/sub connection to the master.
    waiter_is_woken(&b, &a, "woken-before");
    let guard = a.lock("before").lock().expect("lock before the failover");
    assert!(
        setup.master.exists("before"),
        "the lock is not on the master"
    );
    guard.unlock().expect("unlock before the failover");

    let reconnects = a.stats().pubsub_reconnects;
    setup.split();
    // The watch drops the pub/sub connection right after it heard the
    // switch and handed the address over.
    let heard = Instant::now();
    while a.stats().pubsub_reconnects == reconnects {
        assert!(
            heard.elapsed() < PROMPTLY,
            "the client did not follow +switch-master within {PROMPTLY:?} (its look-ups ask \
             the stale sentinel first; subscribed clients per sentinel: {:?})",
            setup.sentinels.iter().map(subscribers).collect::<Vec<_>>()
        );
        thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(
        setup.sentinels[0].master_port(),
        Ok(setup.master.port()),
        "the first sentinel is not stale: {}",
        setup.describe()
    );
    assert!(is_master(&setup.master), "the old master was demoted");
    let on_new_master = |name: &str| {
        let guard = a.lock(name).lock().expect("lock after the failover");
        let placed = (setup.master.exists(name), setup.replica.exists(name));
        guard.unlock().expect("unlock after the failover");
        assert_eq!(
            placed,
            (false, true),
            "{name}: (on the old master, on the new master)"
        );
    };
    on_new_master("after");

    // The stale sentinel names the old master to a watch that connects
    // there anew.
    let followed = a.stats().pubsub_reconnects;
    let killed: i64 = setup.sentinels[0]
        .cmd(&["CLIENT", "KILL", "TYPE", "pubsub"])
        .expect("CLIENT KILL on the stale sentinel");
    assert_eq!(killed, 1, "the stale sentinel had one watch to cut");
    wait_subscribers(&setup.sentinels[0], 1);
    // Time for a move back, if the watch made one.
    thread::sleep(Duration::from_millis(500));
    assert_eq!(
        a.stats().pubsub_reconnects,
        followed,
        "the client left the new master when the stale sentinel named the old one"
    );
    on_new_master("after-the-stale-sentinel-spoke");
    assert_eq!(
        setup.sentinels[0].master_port(),
        Ok(setup.master.port()),
        "the first sentinel learned the switch during the test"
    );
}
