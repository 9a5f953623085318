//! Failover safety, measured: a compact, self-contained loop (not the
//! schedule/oracle machinery) that counts two-holder incidents across
//! Sentinel failovers, with and without `sync_replicas(1, …)`.
//!
//! A master with one replica and three sentinels (`SentinelSetup`). A fault
//! thread fails the master over again and again with `DEBUG SLEEP` (the
//! sentinels promote the replica while the master sleeps, and demote the old
//! master to a replica when it wakes), so no process is restarted. Actor
//! threads, each with its own client built through Sentinel, take and
//! release plain locks on two names and record each critical section as a
//! wall-clock interval (from the acquire's return to just before the release
//! is sent, so the true hold contains it). Two intervals on one name by
//! different actors that overlap are a two-holder incident.
//!
//! Knobs: `REDHOLD_MODEL_FAILOVER=sync|nosync` (default `sync`),
//! `REDHOLD_MODEL_FAILOVER_SECS` (default 30). In `sync` mode an incident
//! fails the test; in `nosync` mode the counts are only printed (async
//! replication legitimately loses locks there).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use redhold::{Client, Error};

use crate::rng::Rng;
use crate::support::sentinel::{SentinelSetup, MASTER_NAME};

/// Names the actors contend on.
const NAMES: [&str; 2] = ["fo-a", "fo-b"];
/// Actor threads (one client each).
const ACTORS: usize = 3;
/// How long the master sleeps: longer than the sentinels' down-after (1 s)
/// plus an election, so the replica is promoted while it sleeps.
const SLEEP_SECS: &str = "4";

/// One recorded critical section.
struct Section {
    name: &'static str,
    actor: usize,
    start: Instant,
    end: Instant,
    spanned_failover: bool,
}

/// What one run counted.
#[derive(Debug, Default)]
struct Counts {
    failovers: u64,
    holds: u64,
    holds_across_failover: u64,
    incidents: u64,
    lost_reported: u64,
}

fn client(setup: &SentinelSetup, sync: bool, lost: Arc<AtomicU64>) -> Client {
    let mut b = Client::builder()
        .sentinel(setup.sentinel_urls(), MASTER_NAME)
        .connect_timeout(Duration::from_secs(1))
        .response_timeout(Duration::from_secs(1))
        .watchdog_timeout(Duration::from_secs(3))
        .on_lock_lost(move |_| {
            lost.fetch_add(1, Ordering::Relaxed);
        });
    if sync {
        b = b.sync_replicas(1, Duration::from_millis(500));
    }
    b.build().expect("sentinel client")
}

/// The port of the server that the sentinels call master, if they answer.
fn current_master(setup: &SentinelSetup) -> Option<u16> {
    setup.master_port_per_sentinels()
}

/// Whether the server on `port` is a master with an online replica.
fn has_online_replica(setup: &SentinelSetup, port: u16) -> bool {
    let server = if setup.master.port() == port {
        &setup.master
    } else {
        &setup.replica
    };
    server
        .try_cmd::<String>(&["INFO", "replication"])
        .is_ok_and(|i| i.contains("role:master") && i.contains("state=online"))
}

/// Fails the master over until `deadline`; bumps `epoch` when a master is
/// put to sleep and returns how many failovers the sentinels completed.
fn fault_loop(setup: &SentinelSetup, deadline: Instant, epoch: &AtomicU64) -> u64 {
    let mut failovers = 0;
    while Instant::now() < deadline {
        let Some(port) = current_master(setup) else {
            thread::sleep(Duration::from_millis(200));
            continue;
        };
        if !has_online_replica(setup, port) {
            thread::sleep(Duration::from_millis(200));
            continue;
        }
        thread::sleep(Duration::from_secs(1));
        let server = if setup.master.port() == port {
            &setup.master
        } else {
            &setup.replica
        };
        epoch.fetch_add(1, Ordering::SeqCst);
        // The reply comes when the sleep ends (or the test connection's own
        // timeout fires first); either way the server sleeps.
        thread::scope(|s| {
            s.spawn(|| {
                let _ = server.try_cmd::<String>(&["DEBUG", "SLEEP", SLEEP_SECS]);
            });
            let asked = Instant::now();
            while asked.elapsed() < Duration::from_secs(20) {
                if current_master(setup).is_some_and(|p| p != port) {
                    failovers += 1;
                    break;
                }
                thread::sleep(Duration::from_millis(100));
            }
        });
    }
    failovers
}

fn actor(
    id: usize,
    client: Client,
    deadline: Instant,
    epoch: &AtomicU64,
    sections: &Mutex<Vec<Section>>,
    lost: &AtomicU64,
    seed: u64,
) {
    let mut rng = Rng::stream(seed, id as u64);
    while Instant::now() < deadline {
        let name = *rng.pick(&NAMES);
        let guard = match client.lock(name).try_lock_for(Duration::from_secs(1)) {
            Ok(Some(g)) => g,
            Ok(None) => continue,
            Err(_) => {
                thread::sleep(Duration::from_millis(50));
                continue;
            }
        };
        let at_start = epoch.load(Ordering::SeqCst);
        let start = Instant::now();
        thread::sleep(rng.millis(10, 100));
        let end = Instant::now();
        let spanned_failover = epoch.load(Ordering::SeqCst) != at_start;
        if let Err(Error::LockLost { .. }) = guard.unlock() {
            lost.fetch_add(1, Ordering::Relaxed);
        }
        sections.lock().unwrap().push(Section {
            name,
            actor: id,
            start,
            end,
            spanned_failover,
        });
    }
}

/// Overlapping sections on one name held by different actors.
fn incidents(sections: &mut [Section]) -> u64 {
    sections.sort_by_key(|s| (s.name, s.start));
    let mut count = 0;
    for (i, a) in sections.iter().enumerate() {
        for b in &sections[i + 1..] {
            if b.name != a.name || b.start >= a.end {
                break;
            }
            if b.actor != a.actor {
                count += 1;
            }
        }
    }
    count
}

fn run(sync: bool, secs: u64, seed: u64) -> Counts {
    let setup = SentinelSetup::start();
    let lost = Arc::new(AtomicU64::new(0));
    let clients: Vec<Client> = (0..ACTORS)
        .map(|_| client(&setup, sync, Arc::clone(&lost)))
        .collect();
    let epoch = AtomicU64::new(0);
    let sections = Mutex::new(Vec::new());
    let deadline = Instant::now() + Duration::from_secs(secs);
    let failovers = thread::scope(|s| {
        for (id, c) in clients.iter().enumerate() {
            let (epoch, sections, lost, c) = (&epoch, &sections, &*lost, c.clone());
            s.spawn(move || actor(id, c, deadline, epoch, sections, lost, seed));
        }
        fault_loop(&setup, deadline, &epoch)
    });
    for c in clients {
        let _ = c.shutdown();
    }
    let mut sections = sections.into_inner().unwrap();
    Counts {
        failovers,
        holds: sections.len() as u64,
        holds_across_failover: sections.iter().filter(|s| s.spanned_failover).count() as u64,
        incidents: incidents(&mut sections),
        lost_reported: lost.load(Ordering::Relaxed),
    }
}

#[test]
fn failover_safety() {
    let mode = std::env::var("REDHOLD_MODEL_FAILOVER").unwrap_or_else(|_| "sync".into());
    let sync = match mode.as_str() {
        "sync" => true,
        "nosync" => false,
        other => panic!("REDHOLD_MODEL_FAILOVER must be sync or nosync, not {other:?}"),
    };
    let secs = std::env::var("REDHOLD_MODEL_FAILOVER_SECS")
        .ok()
        .map(|s| s.parse().expect("REDHOLD_MODEL_FAILOVER_SECS: seconds"))
        .unwrap_or(30);
    let seed = std::env::var("REDHOLD_MODEL_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
            now.map_or(1, |d| d.as_nanos() as u64) ^ u64::from(std::process::id())
        });
    let counts = run(sync, secs, seed);
    eprintln!(
        "failover safety: mode {mode}, {secs} s, seed {seed}: {} failovers, {} holds, \
         {} across a failover, {} two-holder incidents, {} lost holds reported",
        counts.failovers,
        counts.holds,
        counts.holds_across_failover,
        counts.incidents,
        counts.lost_reported
    );
    assert!(counts.failovers >= 1, "no failover happened: {counts:?}");
    if sync {
        assert_eq!(
            counts.incidents, 0,
            "two holders with sync_replicas: {counts:?}"
        );
    }
}
