//! What a run reports: every figure as a JSON key (in a fixed order), and
//! the lines printed on stdout above and below the table.

use std::thread;
use std::time::Instant;

use crate::contention::{Fairness, RAW_THREADS};
use crate::handoff::Cold;
use crate::idle::{self, LongIdle};
use crate::interleaved;
use crate::json::Json;
use crate::parked::Parked;
use crate::peers::{self, Peers};
use crate::rounds::{Latencies, Throughput};
use crate::server::{redact, server_version};
use crate::share::{self, Share};
use crate::stats::{fmt_us, p50};
use crate::table::Table;
use crate::watchdog::Watchdog;

/// Everything one run measured.
pub(crate) struct Figures {
    pub(crate) lat: Latencies,
    pub(crate) long_idle: LongIdle,
    pub(crate) tput: Throughput,
    pub(crate) cold: Cold,
    pub(crate) fair: Fairness,
    pub(crate) share: Share,
    pub(crate) parked: Parked,
    pub(crate) wd: Watchdog,
    pub(crate) peers: Peers,
    pub(crate) semaphores: crate::synchronizers::Semaphores,
    pub(crate) async_face: crate::async_face::AsyncFace,
}

/// The first keys: the server and the run's settings.
pub(crate) fn run_info(j: &mut Json, url: &str, samples: usize) {
    j.str("redis_url", &redact(url));
    j.num("samples", samples as f64);
    j.num(
        "nproc",
        thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1) as f64,
    );
    if let Some(v) = server_version(url) {
        j.str("redis_version", &v);
    }
}

/// The measured figures: raw limits and bounds, then the library's.
pub(crate) fn figures(j: &mut Json, f: &Figures) {
    let (lat, cold, fair, parked) = (&f.lat, &f.cold, &f.fair, &f.parked);
    j.lat("raw_acquire", &lat.raw_acq);
    j.lat("raw_release", &lat.raw_rel);
    j.lat("raw_acquire_release_pair", &lat.raw_pair);
    j.lat("raw_publish_delivery", &lat.raw_pub);
    j.lat("raw_handoff_direct", &lat.raw_handoff);
    j.lat("raw_handoff_direct_release_call", &lat.raw_handoff_rel);
    j.num("raw_pairs_per_s_16_threads", f.tput.raw_pairs_s);
    j.us("bound_uncontended_p50_us", lat.uncontended_bound());
    j.us("bound_warm_handoff_p50_us", lat.handoff_bound());

    j.lat("lib_uncontended", &lat.lib_unc);
    j.num(
        "raw_acquire_release_server_us_per_evalsha",
        lat.raw_server.per_call(),
    );
    j.num(
        "lib_uncontended_server_us_per_evalsha",
        lat.lib_server.per_call(),
    );
    j.lat("lib_uncontended_lock_only", &lat.lib_unc_acq);
    j.lat("lib_uncontended_drop_only", &lat.lib_unc_rel);
    interleaved::to_json(j, &lat.inter);
    j.lat("lib_reentrant", &lat.lib_re);
    j.lat("lib_warm_handoff", &lat.lib_warm);
    j.lat("lib_warm_handoff_guard_drop", &lat.lib_warm_drop);
    idle::to_json(j, lat, &f.long_idle);
    j.lat(
        "lib_cold_handoff_release_to_acquired",
        &cold.release_to_acquired,
    );
    j.lat("lib_cold_handoff_call_to_acquired", &cold.call_to_acquired);
    j.num(
        "lib_cold_handoff_subscribe_wait_timeouts",
        cold.timeouts as f64,
    );
    j.num("lib_pairs_per_s_16_threads_16_names", f.tput.lib_pairs_s);
    j.raw("lib_fairness_acquisitions", &format!("{:?}", fair.counts));
    j.num("lib_fairness_min_over_max", fair.min_over_max());
    j.num("lib_fairness_handoffs_per_s", fair.handoffs_per_s);
    j.num("lib_fairness_acquisitions_per_s", fair.total_per_s());
    share::to_json(j, &f.share);
    j.num("lib_parked_cpu_pct_of_core_ticks", parked.pct_ticks);
    if let Some(p) = parked.pct_schedstat {
        j.num("lib_parked_cpu_pct_of_core_schedstat", p);
    }
    j.num(
        "lib_parked_threads_acquired_after",
        parked.acquired_after as f64,
    );
    f.wd.to_json(j);
    crate::synchronizers::to_json(j, &f.semaphores);
    crate::async_face::to_json(j, &f.async_face);
    peers::to_json(j, &f.peers);
    crate::peers_async::to_json(j, &f.peers);
}

/// The last keys: machine noise, load, the tally of targets, the runtime.
pub(crate) fn run_end(j: &mut Json, other_cpu: Option<f64>, t: &Table, started: Instant) {
    j.opt("other_processes_cpu_pct_of_machine", other_cpu);
    j.str(
        "loadavg_at_end",
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .trim(),
    );
    j.num("targets_met", t.met as f64);
    j.num("targets_total", t.total as f64);
    j.num("runtime_s", started.elapsed().as_secs_f64());
}

/// The human-readable report on stdout: the raw limits and the splits that
/// explain the library's figures, the table, the noise and the tally.
pub(crate) fn print(f: &Figures, t: &Table, other_cpu: Option<f64>, started: Instant) {
    let (lat, fair, wd) = (&f.lat, &f.fair, &f.wd);
    let raw_acq_p50 = p50(&lat.raw_acq);
    let raw_rel_p50 = p50(&lat.raw_rel);
    println!();
    println!("raw limits (redis crate alone, same server, same run):");
    println!(
        "  acquire EVALSHA p50 {}  release EVALSHA p50 {}  PUBLISH->subscriber p50 {}  hand-rolled handoff p50 {}  {} threads: {:.0} pairs/s",
        fmt_us(raw_acq_p50),
        fmt_us(raw_rel_p50),
        fmt_us(p50(&lat.raw_pub)),
        fmt_us(p50(&lat.raw_handoff)),
        RAW_THREADS,
        f.tput.raw_pairs_s
    );
    println!(
        "  watchdog: {} evalsha+eval calls/pass, {} server read events/pass, {} ms server time/pass, pass {} of observed period {}",
        wd.calls_per_pass
            .map(|c| format!("{c:.0}"))
            .unwrap_or_else(|| "n/a".into()),
        wd.round_trips_text(),
        wd.server_ms_per_pass
            .map(|c| format!("{c:.1}"))
            .unwrap_or_else(|| "n/a".into()),
        wd.pass_duration
            .map(fmt_us)
            .unwrap_or_else(|| "n/a".into()),
        wd.period.map(fmt_us).unwrap_or_else(|| "n/a".into()),
    );
    println!(
        "  library uncontended split: lock() p50 {} (raw acquire {}), guard drop p50 {} (raw release {}); server time per EVALSHA: library {:.1} µs, raw {:.1} µs",
        fmt_us(p50(&lat.lib_unc_acq)),
        fmt_us(raw_acq_p50),
        fmt_us(p50(&lat.lib_unc_rel)),
        fmt_us(raw_rel_p50),
        lat.lib_server.per_call(),
        lat.raw_server.per_call(),
    );
    println!(
        "  uncontended pair, interleaved in one loop: library p50 {}, raw acquire+release p50 {}; median per-iteration ratio {:.2}",
        fmt_us(p50(&lat.inter.lib)),
        fmt_us(p50(&lat.inter.raw)),
        lat.inter.median_ratio(),
    );
    println!(
        "  handoff split: holder's release call p50 {} (raw {}), rest until the waiter holds it p50 {} (raw {})",
        fmt_us(p50(&lat.lib_warm_drop)),
        fmt_us(p50(&lat.raw_handoff_rel)),
        fmt_us(p50(&lat.lib_warm).saturating_sub(p50(&lat.lib_warm_drop))),
        fmt_us(p50(&lat.raw_handoff).saturating_sub(p50(&lat.raw_handoff_rel))),
    );
    println!(
        "  8-thread acquisitions per thread: {:?}; 10k locks: acquire {:.2} s, release {:.2} s",
        fair.counts,
        wd.acquire_all.as_secs_f64(),
        wd.release_all.as_secs_f64()
    );
    println!();
    t.print();
    tail(&f.peers, t, other_cpu, started);
}

/// The lines under the table: peers left out, the noise, the tally.
pub(crate) fn tail(peers: &Peers, t: &Table, other_cpu: Option<f64>, started: Instant) {
    if let Some(line) = peers::not_measured(peers) {
        println!("{line}");
    }
    if let Some(p) = other_cpu {
        println!(
            "other processes used {p:.1} % of the machine's CPU during the run{}",
            if p > 5.0 {
                " -- the machine was busy; expect noisy figures"
            } else {
                ""
            }
        );
    }
    println!(
        "{}/{} targets met; runtime {:.1} s",
        t.met,
        t.total,
        started.elapsed().as_secs_f64()
    );
}
