//! The semaphore against the same limits as the lock (issue 24): an
//! uncontended `acquire()` + drop of its `Permit` alternated with the raw
//! acquire + release script pair in one loop (as `interleaved`), and a
//! release waking a thread of another client parked in `acquire()` against
//! the raw release + publish + acquire bound of the same run.

use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use redhold::Client;

use crate::interleaved::{with_raw_pairs, Interleaved};
use crate::json::Json;
use crate::rounds::Latencies;
use crate::stats::{p50, p99, ratio};
use crate::table::Table;

/// What the semaphore rows need.
pub(crate) struct Semaphores {
    /// `acquire()` + drop of the permit, interleaved with the raw pair.
    pub(crate) pair: Interleaved,
    /// From `release(1)` to the parked waiter's return from `acquire()`.
    pub(crate) handoff: Vec<Duration>,
}

/// Measures both, `n` samples each.
pub(crate) fn measure(
    url: &str,
    client: &Client,
    other: &Client,
    prefix: &str,
    n: usize,
) -> Semaphores {
    let solo = client.semaphore(format!("{prefix}:lib:semaphore"));
    solo.set_permits(1).expect("set_permits");
    let pair = with_raw_pairs(url, prefix, n, || {
        let t0 = Instant::now();
        drop(solo.acquire().expect("acquire()"));
        t0.elapsed()
    });
    Semaphores {
        pair,
        handoff: handoff(client, other, prefix, n),
    }
}

/// A thread of `other` parks in `acquire()` on a semaphore without
/// permits; this thread waits until it is parked, releases one permit and
/// times how long the waiter takes to return with it.
fn handoff(client: &Client, other: &Client, prefix: &str, n: usize) -> Vec<Duration> {
    let name = format!("{prefix}:lib:semaphore-handoff");
    client.semaphore(&name).set_permits(0).expect("set_permits");
    let releaser = client.semaphore(&name);
    let waiter = other.semaphore(&name);
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let (got_tx, got_rx) = mpsc::channel::<Instant>();
    let thread = thread::spawn(move || {
        while go_rx.recv().is_ok() {
            let permit = waiter.acquire().expect("acquire()");
            let at = Instant::now();
            // Taken, not given back: the next round starts from none.
            permit.forget();
            if got_tx.send(at).is_err() {
                return;
            }
        }
    });
    let mut out = Vec::with_capacity(n);
    for i in 0..n + n / 10 {
        go_tx.send(()).expect("the waiter thread ended");
        let parked = Instant::now();
        while other.stats().parked_waiters == 0 {
            assert!(parked.elapsed() < Duration::from_secs(10), "never parked");
            thread::yield_now();
        }
        // Parked for a moment, as a waiter usually is.
        thread::sleep(Duration::from_micros(200));
        let t0 = Instant::now();
        releaser.release(1).expect("release");
        let got = got_rx
            .recv_timeout(Duration::from_secs(10))
            .expect("the waiter never got the permit");
        if i >= n / 10 {
            out.push(got.saturating_duration_since(t0));
        }
    }
    drop(go_tx);
    let _ = thread.join();
    out
}

/// Target: like the lock's uncontended pair and warm hand-off.
const MAX_PAIR_RATIO: f64 = 1.15;
const MAX_HANDOFF_RATIO: f64 = 1.5;

/// The two rows.
pub(crate) fn rows(t: &mut Table, lat: &Latencies, s: &Semaphores) {
    t.lat_row(
        "semaphore acquire()+drop, interleaved",
        &s.pair.lib,
        p50(&s.pair.raw),
        "raw pair, same loop",
        &format!("p50 <= {MAX_PAIR_RATIO:.2}x"),
        s.pair.p50_ratio() <= MAX_PAIR_RATIO,
    );
    let bound = lat.handoff_bound();
    t.lat_row(
        "semaphore release -> parked waiter",
        &s.handoff,
        bound,
        "rel+pub+acq",
        &format!("p50 <= {MAX_HANDOFF_RATIO:.1}x, p99 <= 2 ms"),
        ratio(p50(&s.handoff), bound) <= MAX_HANDOFF_RATIO
            && p99(&s.handoff) <= Duration::from_millis(2),
    );
}

/// `lib_semaphore_*` figures.
pub(crate) fn to_json(j: &mut Json, s: &Semaphores) {
    j.lat("raw_pair_semaphore_interleaved", &s.pair.raw);
    j.lat("lib_semaphore_pair_interleaved", &s.pair.lib);
    j.num("lib_semaphore_pair_p50_over_raw_p50", s.pair.p50_ratio());
    j.lat("lib_semaphore_release_to_waiter", &s.handoff);
}
