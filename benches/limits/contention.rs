//! The library under contention: many threads on one client.
//!
//! Throughput: 16 threads, each on its own name, doing `lock()` + drop pairs
//! (compared with 16 raw threads each on its own connection). Fairness: 8
//! threads on one name; every thread should get its turn, and the lock
//! should change hands as fast as the handoff bound allows.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use redhold::Client;

/// Threads in the throughput figure (raw and library alike).
pub(crate) const RAW_THREADS: usize = 16;
/// Length of one throughput measurement window.
pub(crate) const THROUGHPUT_SECS: f64 = 1.0;
const FAIRNESS_THREADS: usize = 8;
const FAIRNESS_SECS: f64 = 5.0;

/// Runs `threads` workers until told to stop; returns completed pairs per
/// second over a `THROUGHPUT_SECS` window that starts after a short warm-up.
pub(crate) fn run_for_throughput<F>(threads: usize, worker: F) -> f64
where
    F: Fn(usize, &AtomicBool, &AtomicU64) + Sync,
{
    let stop = AtomicBool::new(false);
    let count = AtomicU64::new(0);
    thread::scope(|s| {
        for i in 0..threads {
            let (stop, count, worker) = (&stop, &count, &worker);
            s.spawn(move || worker(i, stop, count));
        }
        thread::sleep(Duration::from_millis(300));
        let c0 = count.load(Ordering::Relaxed);
        let t0 = Instant::now();
        thread::sleep(Duration::from_secs_f64(THROUGHPUT_SECS));
        let c1 = count.load(Ordering::Relaxed);
        let el = t0.elapsed();
        stop.store(true, Ordering::Relaxed);
        (c1 - c0) as f64 / el.as_secs_f64()
    })
}

/// `threads` threads of one client, each on its own name, doing `lock()` +
/// drop pairs; returns pairs per second.
pub(crate) fn threads(client: &Client, prefix: &str, threads: usize) -> f64 {
    run_for_throughput(threads, |i, stop, count| {
        let lock = client.lock(format!("{prefix}:lib:mt:{i}"));
        while !stop.load(Ordering::Relaxed) {
            let g = lock.lock().expect("lock()");
            drop(g);
            count.fetch_add(1, Ordering::Relaxed);
        }
    })
}

pub(crate) struct Fairness {
    pub(crate) counts: Vec<u64>,
    pub(crate) handoffs_per_s: f64,
    secs: f64,
}

impl Fairness {
    pub(crate) fn min_over_max(&self) -> f64 {
        let max = self.counts.iter().copied().max().unwrap_or(0);
        let min = self.counts.iter().copied().min().unwrap_or(0);
        if max == 0 {
            0.0
        } else {
            min as f64 / max as f64
        }
    }
    pub(crate) fn total_per_s(&self) -> f64 {
        self.counts.iter().sum::<u64>() as f64 / self.secs
    }
}

/// `FAIRNESS_THREADS` threads on one name for `FAIRNESS_SECS`: acquisitions
/// per thread and handoffs (the lock changing threads) per second.
pub(crate) fn fairness(client: &Client, prefix: &str) -> Fairness {
    eprintln!("lib: {FAIRNESS_THREADS} threads on one name, {FAIRNESS_SECS} s");
    let lock = client.lock(format!("{prefix}:lib:fair"));
    let counts: Vec<AtomicU64> = (0..FAIRNESS_THREADS).map(|_| AtomicU64::new(0)).collect();
    let handoffs = AtomicU64::new(0);
    let last = AtomicUsize::new(usize::MAX);
    let stop = AtomicBool::new(false);
    let start = Barrier::new(FAIRNESS_THREADS + 1);
    let (done_tx, done_rx) = mpsc::channel::<()>();
    thread::scope(|s| {
        for i in 0..FAIRNESS_THREADS {
            let (lock, counts, handoffs, last, stop, start, done_tx) = (
                &lock,
                &counts,
                &handoffs,
                &last,
                &stop,
                &start,
                done_tx.clone(),
            );
            s.spawn(move || {
                start.wait();
                while !stop.load(Ordering::Relaxed) {
                    let g = lock.lock().expect("lock()");
                    counts[i].fetch_add(1, Ordering::Relaxed);
                    if last.swap(i, Ordering::Relaxed) != i {
                        handoffs.fetch_add(1, Ordering::Relaxed);
                    }
                    drop(g);
                }
                let _ = done_tx.send(());
            });
        }
        start.wait();
        let t0 = Instant::now();
        thread::sleep(Duration::from_secs_f64(FAIRNESS_SECS));
        let snapshot: Vec<u64> = counts.iter().map(|c| c.load(Ordering::Relaxed)).collect();
        let h = handoffs.load(Ordering::Relaxed);
        let secs = t0.elapsed().as_secs_f64();
        stop.store(true, Ordering::Relaxed);
        for _ in 0..FAIRNESS_THREADS {
            done_rx
                .recv_timeout(Duration::from_secs(30))
                .expect("fairness threads did not finish within 30 s of stop (lost wake-up?)");
        }
        Fairness {
            counts: snapshot,
            // The first acquisition (from nobody) is not a handoff.
            handoffs_per_s: h.saturating_sub(1) as f64 / secs,
            secs,
        }
    })
}
