//! The library with nobody else on the lock: `lock()` + drop of a free lock,
//! and a reentrant `lock()` while the thread already holds it.
//!
//! Each is one script round trip, so they are compared with the raw acquire
//! (+ release) EVALSHA: whatever the library adds on top of that is its own
//! overhead. `lock_drop` runs in a loop of its own, so its ratio to the raw
//! loop can measure which vCPU each loop ran on; `interleaved` measures the
//! same pair alternated with the raw pair in one loop, the fair comparison.

use std::time::{Duration, Instant};

use redhold::Client;

/// Returns (lock()+drop, lock() alone, drop alone), from the same iterations.
pub(crate) fn lock_drop(
    client: &Client,
    prefix: &str,
    n: usize,
) -> (Vec<Duration>, Vec<Duration>, Vec<Duration>) {
    let lock = client.lock(format!("{prefix}:lib:solo"));
    let (mut pair, mut acq, mut rel) = (
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    );
    for i in 0..n + n / 10 {
        let t0 = Instant::now();
        let g = lock.lock().expect("lock()");
        let t1 = Instant::now();
        drop(g);
        let t2 = Instant::now();
        if i >= n / 10 {
            pair.push(t2 - t0);
            acq.push(t1 - t0);
            rel.push(t2 - t1);
        }
    }
    (pair, acq, rel)
}

/// `lock()` (and drop) of a lock this thread already holds.
pub(crate) fn reentrant(client: &Client, prefix: &str, n: usize) -> Vec<Duration> {
    let lock = client.lock(format!("{prefix}:lib:reentrant"));
    let outer = lock.lock().expect("lock()");
    let mut out = Vec::with_capacity(n);
    for i in 0..n + n / 10 {
        let t0 = Instant::now();
        let g = lock.lock().expect("reentrant lock()");
        let el = t0.elapsed();
        drop(g);
        if i >= n / 10 {
            out.push(el);
        }
    }
    drop(outer);
    out
}
