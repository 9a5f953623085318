//! What parked waiters cost: 64 threads blocked in `lock()` on a held lock
//! should use next to no CPU (they wait for the unlock message, they do not
//! poll), and all of them must get the lock once it is released.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use redhold::Client;

use crate::proc::{
    clock_ticks_per_s, proc_cpu_ticks, thread_schedstat_ns, total_schedstat_ns, ThreadCpu,
};

const PARKED_THREADS: usize = 64;
const PARKED_SECS: f64 = 2.0;

pub(crate) struct Parked {
    /// This process's CPU time (utime + stime ticks) while they were parked,
    /// as a percentage of one core.
    pub(crate) pct_ticks: f64,
    /// The same from the threads' schedstat (finer), where available.
    pub(crate) pct_schedstat: Option<f64>,
    pub(crate) acquired_after: usize,
}

pub(crate) fn cpu(client: &Client, prefix: &str) -> Parked {
    eprintln!("lib: {PARKED_THREADS} threads parked on a held lock, {PARKED_SECS} s");
    let lock = client.lock(format!("{prefix}:lib:parked"));
    let acquired = AtomicUsize::new(0);
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let held = lock.lock().expect("lock()");
    let result = thread::scope(|s| {
        for _ in 0..PARKED_THREADS {
            let (lock, acquired, done_tx) = (&lock, &acquired, done_tx.clone());
            s.spawn(move || {
                let g = lock.lock().expect("parked lock()");
                acquired.fetch_add(1, Ordering::Relaxed);
                drop(g);
                let _ = done_tx.send(());
            });
        }
        thread::sleep(Duration::from_millis(500)); // let them all park
        let tick0 = proc_cpu_ticks();
        let threads0 = thread_schedstat_ns();
        let t0 = Instant::now();
        thread::sleep(Duration::from_secs_f64(PARKED_SECS));
        let tick1 = proc_cpu_ticks();
        let threads1 = thread_schedstat_ns();
        let el = t0.elapsed().as_secs_f64();
        print_busiest(&threads0, &threads1, el);
        let early = acquired.load(Ordering::Relaxed);
        assert_eq!(early, 0, "a parked thread acquired a held lock");
        drop(held);
        for _ in 0..PARKED_THREADS {
            done_rx.recv_timeout(Duration::from_secs(30)).expect(
                "parked threads did not all acquire within 30 s of release (lost wake-up?)",
            );
        }
        let hz = clock_ticks_per_s();
        Parked {
            pct_ticks: (tick1 - tick0) as f64 / hz / el * 100.0,
            pct_schedstat: match (total_schedstat_ns(&threads0), total_schedstat_ns(&threads1)) {
                (Some(a), Some(b)) => Some(b.saturating_sub(a) as f64 / 1e9 / el * 100.0),
                _ => None,
            },
            acquired_after: 0,
        }
    });
    Parked {
        acquired_after: acquired.load(Ordering::Relaxed),
        ..result
    }
}

/// Names the threads that used the most CPU while the waiters were parked
/// (`over` seconds), so that a high figure shows where it went: a parked
/// waiter, or a thread an earlier section left running.
fn print_busiest(before: &[ThreadCpu], after: &[ThreadCpu], over: f64) {
    let mut used: Vec<(u64, &ThreadCpu)> = after
        .iter()
        .map(|t| {
            let start = before.iter().find(|b| b.tid == t.tid).map_or(0, |b| b.ns);
            (t.ns.saturating_sub(start), t)
        })
        .collect();
    used.sort_unstable_by_key(|(ns, _)| std::cmp::Reverse(*ns));
    let busiest: Vec<String> = used
        .iter()
        .take(4)
        .map(|(ns, t)| {
            let pct = *ns as f64 / 1e9 / over * 100.0;
            format!("{} ({}) {pct:.3} %", t.name, t.tid)
        })
        .collect();
    eprintln!(
        "lib: busiest of {} threads while parked: {}",
        after.len(),
        busiest.join(", ")
    );
}
