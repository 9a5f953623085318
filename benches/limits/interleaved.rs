//! Uncontended `lock()` + drop against the raw acquire + release pair, in
//! one loop on one thread, iteration by iteration.
//!
//! `raw::acquire_release` and `uncontended::lock_drop` are separate loops.
//! On a small VM a loopback round trip costs what the scheduler makes it
//! cost (about 27 µs with the client on `redis-server`'s vCPU, 110-155 µs
//! on the other one, whose every reply wakes a halted vCPU), and two loops
//! can land on different vCPUs: their ratio then measures placement. Here
//! each iteration runs one raw pair (acquire EVALSHA + release EVALSHA on
//! the loop's own raw connection, as `raw::acquire_release`) and one library
//! pair (`lock()` + drop of the guard), so both see the same placement and
//! load. Which pair goes first alternates from one iteration to the next,
//! so neither always follows the other's round trip. Besides both sample
//! sets it keeps each iteration's lib / raw ratio; their median is a fair
//! figure too.

use std::time::{Duration, Instant};

use redhold::Client;

use crate::json::Json;
use crate::raw::RawLock;
use crate::server::raw_conn;
use crate::stats::{p50, ratio};
use crate::table::Table;

/// The samples of the interleaved loop; `raw[i]`, `lib[i]` and `ratio[i]`
/// are from the same iteration.
#[derive(Default)]
pub(crate) struct Interleaved {
    /// Raw acquire + release EVALSHA pair.
    pub(crate) raw: Vec<Duration>,
    /// Library `lock()` + guard drop.
    pub(crate) lib: Vec<Duration>,
    /// `lib[i] / raw[i]`.
    pub(crate) ratio: Vec<f64>,
}

impl Interleaved {
    pub(crate) fn extend(&mut self, other: Interleaved) {
        self.raw.extend(other.raw);
        self.lib.extend(other.lib);
        self.ratio.extend(other.ratio);
    }
    /// Library p50 over raw p50.
    pub(crate) fn p50_ratio(&self) -> f64 {
        ratio(p50(&self.lib), p50(&self.raw))
    }
    /// The median of the per-iteration ratios; NaN when there are none.
    pub(crate) fn median_ratio(&self) -> f64 {
        let mut r = self.ratio.clone();
        if r.is_empty() {
            return f64::NAN;
        }
        r.sort_by(f64::total_cmp);
        let m = r.len() / 2;
        if r.len() % 2 == 1 {
            r[m]
        } else {
            (r[m - 1] + r[m]) / 2.0
        }
    }
}

/// `n` iterations (after `n / 10` of warm-up), each a raw pair and a
/// library pair in alternating order.
pub(crate) fn pairs(url: &str, client: &Client, prefix: &str, n: usize) -> Interleaved {
    let lock = client.lock(format!("{prefix}:lib:interleaved"));
    with_raw_pairs(url, prefix, n, || {
        let t0 = Instant::now();
        drop(lock.lock().expect("lock()"));
        t0.elapsed()
    })
}

/// `n` iterations (after `n / 10` of warm-up), each a raw pair and one
/// timed `lib_pair` in alternating order.
pub(crate) fn with_raw_pairs(
    url: &str,
    prefix: &str,
    n: usize,
    mut lib_pair: impl FnMut() -> Duration,
) -> Interleaved {
    let mut con = raw_conn(url);
    let raw = RawLock::new(format!("{prefix}:raw:interleaved"), "raw-client:1".into());
    let mut raw_pair = || {
        let t0 = Instant::now();
        assert_eq!(raw.try_acquire(&mut con), None, "raw acquire failed");
        assert_eq!(raw.release(&mut con), Some(1), "raw release failed");
        t0.elapsed()
    };
    let mut out = Interleaved {
        raw: Vec::with_capacity(n),
        lib: Vec::with_capacity(n),
        ratio: Vec::with_capacity(n),
    };
    for i in 0..n + n / 10 {
        let (r, l) = if i % 2 == 0 {
            let r = raw_pair();
            (r, lib_pair())
        } else {
            let l = lib_pair();
            (raw_pair(), l)
        };
        if i >= n / 10 {
            out.raw.push(r);
            out.lib.push(l);
            out.ratio.push(ratio(l, r));
        }
    }
    out
}

/// Target (the issue's): uncontended `lock()` + drop p50 <= this x the raw
/// pair p50, both from the interleaved loop.
const MAX_RATIO: f64 = 1.10;

/// The fair uncontended row (library p50 against the raw pair p50 of the
/// same loop) and, below it, the median of the per-iteration ratios.
pub(crate) fn rows(t: &mut Table, inter: &Interleaved) {
    t.lat_row(
        "uncontended pair, interleaved",
        &inter.lib,
        p50(&inter.raw),
        "raw pair, same loop",
        &format!("p50 <= {MAX_RATIO:.2}x"),
        inter.p50_ratio() <= MAX_RATIO,
    );
    t.info_cols(
        "  (median of per-iteration lib/raw)",
        "-",
        "-",
        &format!("{:.2}", inter.median_ratio()),
        "info",
    );
}

/// `raw_pair_interleaved_*`, `lib_pair_interleaved_*` and the two ratios.
pub(crate) fn to_json(j: &mut Json, inter: &Interleaved) {
    j.lat("raw_pair_interleaved", &inter.raw);
    j.lat("lib_pair_interleaved", &inter.lib);
    j.num("lib_pair_interleaved_p50_over_raw_p50", inter.p50_ratio());
    j.num(
        "lib_pair_interleaved_median_per_iteration_ratio",
        inter.median_ratio(),
    );
}
