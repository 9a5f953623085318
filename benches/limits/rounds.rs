//! Alternating rounds: each raw limit and the library figure compared with
//! it are measured back to back, round after round, so that a change in
//! machine load during the run moves both alike.
//!
//! Latency: `ROUNDS` rounds, each of raw acquire/release, library
//! uncontended, the raw and library pairs interleaved in one loop
//! (`interleaved`, the placement-neutral comparison), library reentrant, raw publish, raw (ideal client) handoff,
//! library warm handoff on one client and across two clients (all three
//! handoffs with the waiter idle `WARM_PARK`, 1 ms), `samples / ROUNDS`
//! samples apiece. (The same handoffs with the waiter idle 20 ms: `idle`.) Throughput: `THROUGHPUT_ROUNDS`
//! rounds of raw threads then library threads.

use std::time::Duration;

use redhold::Client;

use crate::contention::{RAW_THREADS, THROUGHPUT_SECS};
use crate::handoff::WARM_PARK;
use crate::interleaved::{self, Interleaved};
use crate::server::{raw_conn, with_server_stats, EvalshaStats};
use crate::stats::p50;
use crate::{contention, handoff, raw, uncontended};

const ROUNDS: usize = 10;
const THROUGHPUT_ROUNDS: usize = 2;

/// The latency samples of all rounds together.
#[derive(Default)]
pub(crate) struct Latencies {
    pub(crate) raw_acq: Vec<Duration>,
    pub(crate) raw_rel: Vec<Duration>,
    pub(crate) raw_pair: Vec<Duration>,
    pub(crate) raw_pub: Vec<Duration>,
    pub(crate) raw_handoff: Vec<Duration>,
    pub(crate) raw_handoff_rel: Vec<Duration>,
    pub(crate) lib_unc: Vec<Duration>,
    pub(crate) lib_unc_acq: Vec<Duration>,
    pub(crate) lib_unc_rel: Vec<Duration>,
    /// Raw pair and library `lock()` + drop alternated in one loop.
    pub(crate) inter: Interleaved,
    pub(crate) lib_re: Vec<Duration>,
    pub(crate) lib_warm: Vec<Duration>,
    pub(crate) lib_warm_drop: Vec<Duration>,
    /// Warm handoff with the waiter on a second client.
    pub(crate) lib_cross: Vec<Duration>,
    /// Server-side EVALSHA calls and time during the raw acquire/release.
    pub(crate) raw_server: EvalshaStats,
    /// The same during the library's uncontended `lock()` + drop.
    pub(crate) lib_server: EvalshaStats,
}

impl Latencies {
    /// The bound for `lock()` + drop: raw acquire p50 + raw release p50.
    pub(crate) fn uncontended_bound(&self) -> Duration {
        p50(&self.raw_acq) + p50(&self.raw_rel)
    }
    /// The bound for a warm handoff: raw release + PUBLISH delivery + raw
    /// acquire, each at p50.
    pub(crate) fn handoff_bound(&self) -> Duration {
        p50(&self.raw_rel) + p50(&self.raw_pub) + p50(&self.raw_acq)
    }
}

/// Pairs per second of `RAW_THREADS` threads, averaged over the rounds.
pub(crate) struct Throughput {
    pub(crate) raw_pairs_s: f64,
    pub(crate) lib_pairs_s: f64,
}

/// `other` is a second client, the waiter's in the cross-client handoff.
pub(crate) fn latency(
    url: &str,
    client: &Client,
    other: &Client,
    prefix: &str,
    samples: usize,
) -> Latencies {
    let mut stats_con = raw_conn(url);
    let mut l = Latencies::default();
    let per_round = samples.div_ceil(ROUNDS);
    eprintln!(
        "latency: {ROUNDS} rounds x {per_round} samples of raw acquire/release, lib uncontended, \
         raw/lib pairs interleaved, lib reentrant, raw publish, raw handoff, lib warm handoff (same client, cross client)"
    );
    for round in 0..ROUNDS {
        eprint!("  round {}/{ROUNDS}\r", round + 1);
        let ((a, r, p), st) = with_server_stats(&mut stats_con, || {
            raw::acquire_release(url, prefix, per_round)
        });
        l.raw_server = l.raw_server + st;
        l.raw_acq.extend(a);
        l.raw_rel.extend(r);
        l.raw_pair.extend(p);
        let ((p, a, r), st) = with_server_stats(&mut stats_con, || {
            uncontended::lock_drop(client, prefix, per_round)
        });
        l.lib_server = l.lib_server + st;
        l.lib_unc.extend(p);
        l.lib_unc_acq.extend(a);
        l.lib_unc_rel.extend(r);
        l.inter
            .extend(interleaved::pairs(url, client, prefix, per_round));
        l.lib_re
            .extend(uncontended::reentrant(client, prefix, per_round));
        l.raw_pub
            .extend(raw::publish_delivery(url, prefix, per_round));
        let (h, r) = raw::handoff_direct(url, prefix, per_round, WARM_PARK);
        l.raw_handoff.extend(h);
        l.raw_handoff_rel.extend(r);
        let name = format!("{prefix}:lib:warm");
        let (h, d) = handoff::warm(client, client, &name, per_round, WARM_PARK);
        l.lib_warm.extend(h);
        l.lib_warm_drop.extend(d);
        let name = format!("{prefix}:lib:cross");
        let (h, _) = handoff::warm(client, other, &name, per_round, WARM_PARK);
        l.lib_cross.extend(h);
    }
    eprintln!();
    l
}

pub(crate) fn throughput(url: &str, client: &Client, prefix: &str) -> Throughput {
    eprintln!(
        "throughput: {RAW_THREADS} threads, raw (own connections) and library (one client), \
         {THROUGHPUT_ROUNDS} alternating rounds of {THROUGHPUT_SECS} s"
    );
    let (mut raw_rates, mut lib_rates) = (Vec::new(), Vec::new());
    for _ in 0..THROUGHPUT_ROUNDS {
        raw_rates.push(raw::threads(url, prefix, RAW_THREADS));
        lib_rates.push(contention::threads(client, prefix, RAW_THREADS));
    }
    Throughput {
        raw_pairs_s: raw_rates.iter().sum::<f64>() / raw_rates.len() as f64,
        lib_pairs_s: lib_rates.iter().sum::<f64>() / lib_rates.len() as f64,
    }
}
