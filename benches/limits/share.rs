//! Two clients on one lock: `SHARE_CLIENTS` `Client`s (each its own UUID,
//! connections and subscriber) x `THREADS_PER_CLIENT` threads, all looping
//! `lock()` + drop on one name. Neither client should starve the other: a
//! client whose own threads hand the lock to each other locally must still
//! let the other client's waiters in. Reports each client's share of the
//! acquisitions and the handoffs (the lock changing threads) per second.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use redhold::Client;

use crate::json::Json;
use crate::table::Table;

const SHARE_CLIENTS: usize = 2;
const THREADS_PER_CLIENT: usize = 4;
const SHARE_SECS: f64 = 2.5;
/// Target: the least-served client gets at least this share.
const MIN_SHARE: f64 = 1.0 / 3.0;

pub(crate) struct Share {
    /// Acquisitions per client.
    pub(crate) per_client: Vec<u64>,
    pub(crate) handoffs_per_s: f64,
    pub(crate) acquisitions_per_s: f64,
}

impl Share {
    pub(crate) fn min_share(&self) -> f64 {
        let total: u64 = self.per_client.iter().sum();
        let min = self.per_client.iter().copied().min().unwrap_or(0);
        if total == 0 {
            0.0
        } else {
            min as f64 / total as f64
        }
    }
}

/// Opens `SHARE_CLIENTS` clients on `url` and runs their threads on one name
/// for `SHARE_SECS`.
pub(crate) fn two_clients(url: &str, prefix: &str) -> Share {
    eprintln!(
        "lib: {SHARE_CLIENTS} clients x {THREADS_PER_CLIENT} threads on one name, {SHARE_SECS} s"
    );
    let name = format!("{prefix}:lib:share");
    let clients: Vec<Client> = (0..SHARE_CLIENTS)
        .map(|_| Client::open(url).expect("redhold: Client::open"))
        .collect();
    let threads = SHARE_CLIENTS * THREADS_PER_CLIENT;
    let counts: Vec<AtomicU64> = (0..SHARE_CLIENTS).map(|_| AtomicU64::new(0)).collect();
    let handoffs = AtomicU64::new(0);
    let last = AtomicUsize::new(usize::MAX);
    let stop = AtomicBool::new(false);
    let start = Barrier::new(threads + 1);
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let share = thread::scope(|s| {
        for t in 0..threads {
            let c = t / THREADS_PER_CLIENT;
            let lock = clients[c].lock(name.as_str());
            let (counts, handoffs, last, stop, start, done_tx) =
                (&counts, &handoffs, &last, &stop, &start, done_tx.clone());
            s.spawn(move || {
                start.wait();
                while !stop.load(Ordering::Relaxed) {
                    let g = lock.lock().expect("lock()");
                    counts[c].fetch_add(1, Ordering::Relaxed);
                    if last.swap(t, Ordering::Relaxed) != t {
                        handoffs.fetch_add(1, Ordering::Relaxed);
                    }
                    drop(g);
                }
                let _ = done_tx.send(());
            });
        }
        start.wait();
        let t0 = Instant::now();
        thread::sleep(Duration::from_secs_f64(SHARE_SECS));
        let per_client: Vec<u64> = counts.iter().map(|c| c.load(Ordering::Relaxed)).collect();
        let h = handoffs.load(Ordering::Relaxed);
        let secs = t0.elapsed().as_secs_f64();
        stop.store(true, Ordering::Relaxed);
        for _ in 0..threads {
            done_rx
                .recv_timeout(Duration::from_secs(30))
                .expect("two-client threads did not finish within 30 s of stop (lost wake-up?)");
        }
        Share {
            acquisitions_per_s: per_client.iter().sum::<u64>() as f64 / secs,
            per_client,
            // The first acquisition (from nobody) is not a handoff.
            handoffs_per_s: h.saturating_sub(1) as f64 / secs,
        }
    });
    for c in &clients {
        let _ = c.shutdown();
    }
    share
}

pub(crate) fn rows(t: &mut Table, s: &Share) {
    t.plain_row(
        "2 clients x 4 threads, 1 name: min share",
        &format!("{:.2}", s.min_share()),
        "",
        "",
        ">= 0.33",
        s.min_share() >= MIN_SHARE,
    );
    t.info_row(
        "  (same run: handoffs/s)",
        &format!("{:.0}", s.handoffs_per_s),
        &format!("info: acquisitions per client {:?}", s.per_client),
    );
}

pub(crate) fn to_json(j: &mut Json, s: &Share) {
    j.raw(
        "lib_two_clients_acquisitions",
        &format!("{:?}", s.per_client),
    );
    j.num("lib_two_clients_min_share", s.min_share());
    j.num("lib_two_clients_handoffs_per_s", s.handoffs_per_s);
    j.num("lib_two_clients_acquisitions_per_s", s.acquisitions_per_s);
}
