//! `cargo bench --bench limits`: redhold measured against the limits of a
//! Redis round trip, both measured in the same run on the same server.
//!
//! 1. Raw limits with the `redis` crate alone (sync API): an acquire-shaped
//!    EVALSHA, a release-shaped EVALSHA, PUBLISH -> delivery to a subscriber
//!    blocked in `get_message` on another thread, a hand-rolled "ideal"
//!    handoff, and 16 threads each on its own connection doing
//!    acquire+release pairs.
//! 2. The library: uncontended `lock()` + drop, reentrant `lock()`, warm and
//!    cold handoff, 16 threads x 16 names, 8 threads on one name (fairness),
//!    64 parked threads (CPU), watchdog with 10,000 held locks (round trips per
//!    renewal pass) and the RSS those locks add.
//!
//! Prints one table (operation, library p50 / p99, raw p50, ratio, target,
//! met?) and, as the very last line on stdout, one JSON object with every
//! figure. Progress goes to stderr. Also writes
//! `target/redhold-limits/handoff-latency.csv` (samples for the chart, see
//! `benches/plot_handoff.py`) and `target/redhold-limits/limits.json`.
//!
//! Uses `REDIS_URL` if set, else starts a private `redis-server`.
//! Environment knobs: `LIMITS_SAMPLES` (latency samples per figure, default
//! 5000).

mod common;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Barrier, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use common::{percentile, run_prefix, BenchServer};
use redhold::Client;

/// Acquire shape (Redisson `tryLockInnerAsync`): take if free or already ours,
/// else return the PTTL.
const ACQUIRE_LUA: &str = "\
if (redis.call('exists', KEYS[1]) == 0) or (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then \
  redis.call('hincrby', KEYS[1], ARGV[2], 1); \
  redis.call('pexpire', KEYS[1], ARGV[1]); \
  return nil; \
end; \
return redis.call('pttl', KEYS[1]);";

/// Release shape (Redisson `unlockInnerAsync`): decrement our hold; at zero
/// delete and publish the unlock message.
const RELEASE_LUA: &str = "\
if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then return nil; end; \
local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); \
if (counter > 0) then redis.call('pexpire', KEYS[1], ARGV[2]); return 0; \
else redis.call('del', KEYS[1]); redis.call('publish', KEYS[2], ARGV[1]); return 1; end; \
return nil;";

const LEASE_MS: u64 = 30_000;
const RAW_THREADS: usize = 16;
const THROUGHPUT_SECS: f64 = 1.0;
const THROUGHPUT_ROUNDS: usize = 2;
const ROUNDS: usize = 10;
const FAIRNESS_THREADS: usize = 8;
const FAIRNESS_SECS: f64 = 5.0;
const PARKED_THREADS: usize = 64;
const PARKED_SECS: f64 = 2.0;
const HELD_LOCKS: usize = 10_000;
const WATCHDOG_TIMEOUT: Duration = Duration::from_secs(3);
const DEFAULT_WATCHDOG_TIMEOUT: Duration = Duration::from_secs(30);
const WARM_PARK: Duration = Duration::from_millis(1);

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` does not. Only
    // run the (slow, timing-only) measurement under `cargo bench`.
    if !std::env::args().any(|a| a == "--bench") {
        println!("limits: timing-only bench; run it with `cargo bench --bench limits` (skipped)");
        return;
    }
    let samples: usize = std::env::var("LIMITS_SAMPLES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5000);
    let started = Instant::now();
    let server = BenchServer::from_env_or_spawn();
    let url = server.url.clone();
    // The server's own CPU is not "other" load: find its pid (ours, or the
    // one a local REDIS_URL server reports).
    let noise = Noise::start(server.pid().or_else(|| local_server_pid(&url)));
    let prefix = run_prefix("limits");
    let mut j = Json::default();
    j.str("redis_url", &redact(&url));
    j.num("samples", samples as f64);
    j.num(
        "nproc",
        thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1) as f64,
    );
    if let Some(v) = server_version(&url) {
        j.str("redis_version", &v);
    }

    // Memory and watchdog first: the heap is still small, so the RSS delta
    // is not hidden by memory freed (but kept) by later phases.
    eprintln!("lib: {HELD_LOCKS} held locks: RSS and watchdog round trips");
    let wd = lib_watchdog_memory(&url, &prefix);

    // Latency figures: the raw limit and the library figure compared with
    // it are measured in alternating rounds, so that a change in machine
    // load during the run moves both alike.
    let client = Client::open(url.as_str()).expect("redhold: Client::open");
    let mut stats_con = raw_conn(&url);
    let (mut raw_acq, mut raw_rel, mut raw_pair) = (Vec::new(), Vec::new(), Vec::new());
    let (mut raw_pub, mut raw_handoff) = (Vec::new(), Vec::new());
    let (mut lib_unc, mut lib_unc_acq, mut lib_unc_rel) = (Vec::new(), Vec::new(), Vec::new());
    let (mut lib_re, mut lib_warm) = (Vec::new(), Vec::new());
    let (mut raw_handoff_rel, mut lib_warm_drop) = (Vec::new(), Vec::new());
    let (mut raw_server, mut lib_server) = (EvalshaStats::ZERO, EvalshaStats::ZERO);
    let per_round = samples.div_ceil(ROUNDS);
    eprintln!(
        "latency: {ROUNDS} rounds x {per_round} samples of raw acquire/release, lib uncontended, \
         lib reentrant, raw publish, raw handoff, lib warm handoff"
    );
    for round in 0..ROUNDS {
        eprint!("  round {}/{ROUNDS}\r", round + 1);
        let ((a, r, p), st) = with_server_stats(&mut stats_con, || {
            raw_acquire_release(&url, &prefix, per_round)
        });
        raw_server = raw_server + st;
        raw_acq.extend(a);
        raw_rel.extend(r);
        raw_pair.extend(p);
        let ((p, a, r), st) = with_server_stats(&mut stats_con, || {
            lib_uncontended(&client, &prefix, per_round)
        });
        lib_server = lib_server + st;
        lib_unc.extend(p);
        lib_unc_acq.extend(a);
        lib_unc_rel.extend(r);
        lib_re.extend(lib_reentrant(&client, &prefix, per_round));
        raw_pub.extend(raw_publish_delivery(&url, &prefix, per_round));
        let (h, r) = raw_handoff_direct(&url, &prefix, per_round);
        raw_handoff.extend(h);
        raw_handoff_rel.extend(r);
        let (h, d) = lib_warm_handoff(&client, &prefix, per_round);
        lib_warm.extend(h);
        lib_warm_drop.extend(d);
    }
    eprintln!();
    let raw_server_us = raw_server.per_call();
    let lib_server_us = lib_server.per_call();

    eprintln!(
        "throughput: {RAW_THREADS} threads, raw (own connections) and library (one client), \
         {THROUGHPUT_ROUNDS} alternating rounds of {THROUGHPUT_SECS} s"
    );
    let (mut raw_rates, mut lib_rates) = (Vec::new(), Vec::new());
    for _ in 0..THROUGHPUT_ROUNDS {
        raw_rates.push(raw_threads(&url, &prefix, RAW_THREADS));
        lib_rates.push(lib_threads(&client, &prefix, RAW_THREADS));
    }
    let raw_pairs_s = raw_rates.iter().sum::<f64>() / raw_rates.len() as f64;
    let lib_pairs_s = lib_rates.iter().sum::<f64>() / lib_rates.len() as f64;

    let raw_acq_p50 = p50(&raw_acq);
    let raw_rel_p50 = p50(&raw_rel);
    let raw_pub_p50 = p50(&raw_pub);
    let uncontended_bound = raw_acq_p50 + raw_rel_p50;
    let handoff_bound = raw_rel_p50 + raw_pub_p50 + raw_acq_p50;
    j.lat("raw_acquire", &raw_acq);
    j.lat("raw_release", &raw_rel);
    j.lat("raw_acquire_release_pair", &raw_pair);
    j.lat("raw_publish_delivery", &raw_pub);
    j.lat("raw_handoff_direct", &raw_handoff);
    j.lat("raw_handoff_direct_release_call", &raw_handoff_rel);
    j.num("raw_pairs_per_s_16_threads", raw_pairs_s);
    j.us("bound_uncontended_p50_us", uncontended_bound);
    j.us("bound_warm_handoff_p50_us", handoff_bound);

    let cold_n = samples.min(3000);
    eprintln!("lib: cold handoff x {cold_n} (fresh name each)");
    let cold = lib_cold_handoff(&client, &url, &prefix, cold_n);
    eprintln!("lib: {FAIRNESS_THREADS} threads on one name, {FAIRNESS_SECS} s");
    let fair = lib_fairness(&client, &prefix);
    eprintln!("lib: {PARKED_THREADS} threads parked on a held lock, {PARKED_SECS} s");
    let parked = lib_parked_cpu(&client, &prefix);
    let _ = client.shutdown();

    j.lat("lib_uncontended", &lib_unc);
    j.num("raw_acquire_release_server_us_per_evalsha", raw_server_us);
    j.num("lib_uncontended_server_us_per_evalsha", lib_server_us);
    j.lat("lib_uncontended_lock_only", &lib_unc_acq);
    j.lat("lib_uncontended_drop_only", &lib_unc_rel);
    j.lat("lib_reentrant", &lib_re);
    j.lat("lib_warm_handoff", &lib_warm);
    j.lat("lib_warm_handoff_guard_drop", &lib_warm_drop);
    j.lat(
        "lib_cold_handoff_release_to_acquired",
        &cold.release_to_acquired,
    );
    j.lat("lib_cold_handoff_call_to_acquired", &cold.call_to_acquired);
    j.num(
        "lib_cold_handoff_subscribe_wait_timeouts",
        cold.timeouts as f64,
    );
    j.num("lib_pairs_per_s_16_threads_16_names", lib_pairs_s);
    j.raw("lib_fairness_acquisitions", &format!("{:?}", fair.counts));
    j.num("lib_fairness_min_over_max", fair.min_over_max());
    j.num("lib_fairness_handoffs_per_s", fair.handoffs_per_s);
    j.num("lib_fairness_acquisitions_per_s", fair.total_per_s());
    j.num("lib_parked_cpu_pct_of_core_ticks", parked.pct_ticks);
    if let Some(p) = parked.pct_schedstat {
        j.num("lib_parked_cpu_pct_of_core_schedstat", p);
    }
    j.num(
        "lib_parked_threads_acquired_after",
        parked.acquired_after as f64,
    );
    wd.to_json(&mut j);

    // ----------------------------------------------------------- table ----
    let warm_target_p50 = handoff_bound.mul_f64(1.5);
    let handoff_target_per_s = 0.5 / handoff_bound.as_secs_f64();
    let parked_pct = parked.pct_schedstat.unwrap_or(parked.pct_ticks);
    let mut t = Table::default();
    t.lat_row(
        "uncontended lock()+drop",
        &lib_unc,
        uncontended_bound,
        "raw acq+rel",
        "p50 <= 1.15x",
        ratio(p50(&lib_unc), uncontended_bound) <= 1.15,
    );
    t.lat_row(
        "reentrant lock() while held",
        &lib_re,
        raw_acq_p50,
        "raw acq",
        "p50 <= 1.15x",
        ratio(p50(&lib_re), raw_acq_p50) <= 1.15,
    );
    t.lat_row(
        "warm handoff (parked waiter)",
        &lib_warm,
        handoff_bound,
        "rel+pub+acq",
        "p50 <= 1.5x, p99 <= 2 ms",
        p50(&lib_warm) <= warm_target_p50 && p99(&lib_warm) <= Duration::from_millis(2),
    );
    t.lat_row(
        "  (vs hand-rolled raw handoff)",
        &lib_warm,
        p50(&raw_handoff),
        "raw handoff",
        "info",
        true,
    );
    t.lat_row(
        "cold handoff: release->acquired",
        &cold.release_to_acquired,
        Duration::ZERO,
        "",
        "p50 <= 1 ms",
        p50(&cold.release_to_acquired) <= Duration::from_millis(1),
    );
    t.lat_row(
        "cold: waiter lock() call->acquired",
        &cold.call_to_acquired,
        Duration::ZERO,
        "",
        "p50 <= 1 ms",
        p50(&cold.call_to_acquired) <= Duration::from_millis(1),
    );
    t.rate_row(
        "16 threads x 16 names (pairs/s)",
        lib_pairs_s,
        raw_pairs_s,
        ">= 0.7x raw",
        lib_pairs_s >= 0.7 * raw_pairs_s,
    );
    t.plain_row(
        "8 threads, 1 name: min/max acq",
        &format!("{:.2}", fair.min_over_max()),
        "",
        "",
        ">= 0.5",
        fair.min_over_max() >= 0.5,
    );
    t.plain_row(
        "8 threads, 1 name: handoffs/s",
        &format!("{:.0}", fair.handoffs_per_s),
        &format!("{handoff_target_per_s:.0} (0.5/bound)"),
        &format!("{:.2}", fair.handoffs_per_s / handoff_target_per_s),
        ">= 0.5/bound",
        fair.handoffs_per_s >= handoff_target_per_s,
    );
    t.plain_row(
        "64 parked threads: CPU % of core",
        &format!("{parked_pct:.2} %"),
        "",
        "",
        "< 1 %",
        parked_pct < 1.0,
    );
    t.plain_row(
        "watchdog 10k locks: RTs / pass",
        &wd.round_trips_text(),
        "",
        "",
        "<= 110",
        wd.round_trips_per_pass().is_some_and(|r| r <= 110.0),
    );
    t.plain_row(
        "watchdog 10k locks: pass / period",
        &wd.pass_pct_text(),
        "",
        "",
        "< 2 %",
        wd.pass_pct().is_some_and(|p| p < 2.0),
    );
    let default_pct = wd.pass_pct_default();
    t.info_row(
        "  (same pass, default 30 s timeout)",
        &default_pct
            .map(|p| format!("{p:.2} %"))
            .unwrap_or_else(|| "n/a".into()),
        &format!(
            "info: {}",
            if default_pct.is_some_and(|p| p < 2.0) {
                "< 2 %"
            } else {
                ">= 2 %"
            }
        ),
    );
    t.plain_row(
        "memory: 10k held locks, RSS",
        &format!("{:.2} MiB", wd.rss_delta_mib()),
        "",
        "",
        "< 8 MiB",
        wd.rss_delta_mib() < 8.0,
    );
    let other_cpu = noise.finish();
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

    // ------------------------------------------------------- artifacts ----
    write_artifacts(
        &raw_acq,
        &raw_rel,
        &raw_pub,
        &raw_handoff,
        &lib_warm,
        &cold,
        &j,
    );

    println!();
    println!("raw limits (redis crate alone, same server, same run):");
    println!(
        "  acquire EVALSHA p50 {}  release EVALSHA p50 {}  PUBLISH->subscriber p50 {}  hand-rolled handoff p50 {}  {} threads: {:.0} pairs/s",
        fmt_us(raw_acq_p50),
        fmt_us(raw_rel_p50),
        fmt_us(raw_pub_p50),
        fmt_us(p50(&raw_handoff)),
        RAW_THREADS,
        raw_pairs_s
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
        fmt_us(p50(&lib_unc_acq)),
        fmt_us(raw_acq_p50),
        fmt_us(p50(&lib_unc_rel)),
        fmt_us(raw_rel_p50),
        lib_server_us,
        raw_server_us,
    );
    println!(
        "  handoff split: holder's release call p50 {} (raw {}), rest until the waiter holds it p50 {} (raw {})",
        fmt_us(p50(&lib_warm_drop)),
        fmt_us(p50(&raw_handoff_rel)),
        fmt_us(p50(&lib_warm).saturating_sub(p50(&lib_warm_drop))),
        fmt_us(p50(&raw_handoff).saturating_sub(p50(&raw_handoff_rel))),
    );
    println!(
        "  8-thread acquisitions per thread: {:?}; 10k locks: acquire {:.2} s, release {:.2} s",
        fair.counts,
        wd.acquire_all.as_secs_f64(),
        wd.release_all.as_secs_f64()
    );
    println!();
    t.print();
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
    drop(server);
    println!("{}", j.finish());
}

// =====================================================================
// raw limits
// =====================================================================

fn raw_conn(url: &str) -> redis::Connection {
    redis::Client::open(url)
        .and_then(|c| c.get_connection())
        .unwrap_or_else(|e| panic!("redis: cannot connect to {}: {e}", redact(url)))
}

fn channel_of(name: &str) -> String {
    if name.contains('{') {
        format!("redisson_lock__channel:{name}")
    } else {
        format!("redisson_lock__channel:{{{name}}}")
    }
}

struct RawLock {
    key: String,
    chan: String,
    field: String,
    acquire: redis::Script,
    release: redis::Script,
}

impl RawLock {
    fn new(key: String, field: String) -> RawLock {
        RawLock {
            chan: channel_of(&key),
            key,
            field,
            acquire: redis::Script::new(ACQUIRE_LUA),
            release: redis::Script::new(RELEASE_LUA),
        }
    }
    /// `None` = acquired, `Some(pttl)` = held by someone else.
    fn try_acquire(&self, con: &mut redis::Connection) -> Option<i64> {
        self.acquire
            .key(&self.key)
            .arg(LEASE_MS)
            .arg(&self.field)
            .invoke(con)
            .expect("raw acquire EVALSHA")
    }
    fn release(&self, con: &mut redis::Connection) -> Option<i64> {
        self.release
            .key(&self.key)
            .key(&self.chan)
            .arg(0)
            .arg(LEASE_MS)
            .arg(&self.field)
            .invoke(con)
            .expect("raw release EVALSHA")
    }
}

fn raw_acquire_release(
    url: &str,
    prefix: &str,
    n: usize,
) -> (Vec<Duration>, Vec<Duration>, Vec<Duration>) {
    let mut con = raw_conn(url);
    let l = RawLock::new(format!("{prefix}:raw:solo"), "raw-client:1".into());
    let (mut acq, mut rel, mut pair) = (
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    );
    for i in 0..n + n / 10 {
        let t0 = Instant::now();
        let r = l.try_acquire(&mut con);
        let t1 = Instant::now();
        assert_eq!(r, None, "raw acquire of a free lock failed");
        let r = l.release(&mut con);
        let t2 = Instant::now();
        assert_eq!(r, Some(1), "raw release did not delete");
        if i >= n / 10 {
            acq.push(t1 - t0);
            rel.push(t2 - t1);
            pair.push(t2 - t0);
        }
    }
    (acq, rel, pair)
}

fn raw_publish_delivery(url: &str, prefix: &str, n: usize) -> Vec<Duration> {
    let chan = format!("{prefix}:raw:pubsub");
    let (ready_tx, ready_rx) = mpsc::channel::<()>();
    let (got_tx, got_rx) = mpsc::channel::<Instant>();
    let sub = {
        let url = url.to_string();
        let chan = chan.clone();
        thread::spawn(move || {
            let mut con = raw_conn(&url);
            let mut ps = con.as_pubsub();
            ps.subscribe(&chan).expect("SUBSCRIBE");
            ready_tx.send(()).unwrap();
            loop {
                let msg = ps.get_message().expect("get_message");
                let now = Instant::now();
                if msg.get_payload_bytes() == b"stop" {
                    break;
                }
                got_tx.send(now).unwrap();
            }
        })
    };
    ready_rx.recv().unwrap();
    let mut con = raw_conn(url);
    let mut out = Vec::with_capacity(n);
    for i in 0..n + n / 10 {
        let t0 = Instant::now();
        let receivers: i64 = redis::cmd("PUBLISH")
            .arg(&chan)
            .arg("0")
            .query(&mut con)
            .expect("PUBLISH");
        debug_assert_eq!(receivers, 1);
        let t1 = got_rx.recv().unwrap();
        if i >= n / 10 {
            out.push(t1 - t0);
        }
    }
    let _: i64 = redis::cmd("PUBLISH")
        .arg(&chan)
        .arg("stop")
        .query(&mut con)
        .unwrap();
    sub.join().unwrap();
    out
}

/// The best a client could do with this protocol: the waiter is subscribed
/// and blocked in `get_message`; the holder runs the release script (which
/// publishes); the waiter wakes and runs the acquire script. Measured from
/// just before the release to the waiter's acquire reply.
/// Returns (handoff latencies, the holder's release call durations).
fn raw_handoff_direct(url: &str, prefix: &str, n: usize) -> (Vec<Duration>, Vec<Duration>) {
    let key = format!("{prefix}:raw:handoff");
    let (go_tx, go_rx) = mpsc::channel::<bool>();
    let (done_tx, done_rx) = mpsc::channel::<Instant>();
    let (ready_tx, ready_rx) = mpsc::channel::<()>();
    let waiter = {
        let url = url.to_string();
        let key = key.clone();
        thread::spawn(move || {
            let l = RawLock::new(key, "raw-client:2".into());
            let mut cmd = raw_conn(&url);
            let mut subcon = raw_conn(&url);
            let mut ps = subcon.as_pubsub();
            ps.subscribe(&l.chan).expect("SUBSCRIBE");
            ready_tx.send(()).unwrap();
            while go_rx.recv().unwrap() {
                // Contend: first attempt fails, then wait for the unlock message.
                while l.try_acquire(&mut cmd).is_some() {
                    let _ = ps.get_message().expect("get_message");
                }
                let acquired = Instant::now();
                assert_eq!(l.release(&mut cmd), Some(1));
                // Swallow the notification of our own release.
                let _ = ps.get_message().expect("get_message");
                done_tx.send(acquired).unwrap();
            }
        })
    };
    ready_rx.recv().unwrap();
    let l = RawLock::new(key, "raw-client:1".into());
    let mut con = raw_conn(url);
    let mut out = Vec::with_capacity(n);
    let mut release_calls = Vec::with_capacity(n);
    for i in 0..n + n / 10 {
        assert_eq!(l.try_acquire(&mut con), None);
        go_tx.send(true).unwrap();
        thread::sleep(WARM_PARK);
        let t0 = Instant::now();
        assert_eq!(l.release(&mut con), Some(1));
        let released = t0.elapsed();
        let acquired = done_rx.recv().unwrap();
        if i >= n / 10 {
            out.push(acquired.saturating_duration_since(t0));
            release_calls.push(released);
        }
    }
    go_tx.send(false).unwrap();
    waiter.join().unwrap();
    (out, release_calls)
}

fn raw_threads(url: &str, prefix: &str, threads: usize) -> f64 {
    run_for_throughput(threads, |i, stop, count| {
        let mut con = raw_conn(url);
        let l = RawLock::new(format!("{prefix}:raw:mt:{i}"), format!("raw-client:{i}"));
        while !stop.load(Ordering::Relaxed) {
            assert_eq!(l.try_acquire(&mut con), None);
            assert_eq!(l.release(&mut con), Some(1));
            count.fetch_add(1, Ordering::Relaxed);
        }
    })
}

/// Runs `threads` workers until told to stop; returns completed pairs per
/// second over a `THROUGHPUT_SECS` window that starts after a short warm-up.
fn run_for_throughput<F>(threads: usize, worker: F) -> f64
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

// =====================================================================
// library
// =====================================================================

/// Returns (lock()+drop, lock() alone, drop alone), from the same iterations.
fn lib_uncontended(
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

fn lib_reentrant(client: &Client, prefix: &str, n: usize) -> Vec<Duration> {
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

/// Waiter already parked in `lock()`; the holder stores `Instant::now()` in a
/// shared slot just before dropping its guard; the sample is the time from
/// that instant until the waiter's `lock()` returns.
/// Returns (handoff latencies, the holder's guard-drop durations).
fn lib_warm_handoff(client: &Client, prefix: &str, n: usize) -> (Vec<Duration>, Vec<Duration>) {
    let name = format!("{prefix}:lib:warm");
    let released_at: Arc<Mutex<Option<Instant>>> = Arc::new(Mutex::new(None));
    let (go_tx, go_rx) = mpsc::channel::<bool>();
    let (done_tx, done_rx) = mpsc::channel::<Duration>();
    let waiter = {
        let lock = client.lock(name.clone());
        let released_at = released_at.clone();
        thread::spawn(move || {
            while go_rx.recv().unwrap() {
                let g = lock.lock().expect("waiter lock()");
                let now = Instant::now();
                let t0 = released_at
                    .lock()
                    .unwrap()
                    .take()
                    .expect("waiter acquired while the holder still held the lock");
                drop(g);
                done_tx.send(now - t0).unwrap();
            }
        })
    };
    let lock = client.lock(name);
    let mut out = Vec::with_capacity(n);
    let mut drops = Vec::with_capacity(n);
    for i in 0..n + n / 10 {
        let g = lock.lock().expect("holder lock()");
        go_tx.send(true).unwrap();
        thread::sleep(WARM_PARK); // let the waiter fail, subscribe and park
        let t0 = Instant::now();
        *released_at.lock().unwrap() = Some(t0);
        drop(g);
        let dropped = t0.elapsed();
        let lat = done_rx.recv().unwrap();
        if i >= n / 10 {
            out.push(lat);
            drops.push(dropped);
        }
    }
    go_tx.send(false).unwrap();
    waiter.join().unwrap();
    (out, drops)
}

struct Cold {
    release_to_acquired: Vec<Duration>,
    call_to_acquired: Vec<Duration>,
    timeouts: usize,
}

/// A fresh lock name each iteration, so the waiter's channel is not yet
/// subscribed. The holder takes the lock, the waiter calls `lock()`, the
/// holder releases as soon as the waiter's SUBSCRIBE is visible on the server
/// (`PUBSUB NUMSUB`, polled; capped at 20 ms). Records release -> acquired
/// and the waiter's `lock()` call -> acquired (which includes the SUBSCRIBE).
fn lib_cold_handoff(client: &Client, url: &str, prefix: &str, n: usize) -> Cold {
    let released_at: Arc<Mutex<Option<Instant>>> = Arc::new(Mutex::new(None));
    let (go_tx, go_rx) = mpsc::channel::<Option<String>>();
    let (done_tx, done_rx) = mpsc::channel::<(Duration, Duration)>();
    let waiter = {
        let client = client.clone();
        let released_at = released_at.clone();
        thread::spawn(move || {
            while let Some(name) = go_rx.recv().unwrap() {
                let lock = client.lock(name);
                let called = Instant::now();
                let g = lock.lock().expect("waiter lock()");
                let now = Instant::now();
                let t0 = released_at
                    .lock()
                    .unwrap()
                    .take()
                    .expect("waiter acquired while the holder still held the lock");
                drop(g);
                done_tx.send((now - t0, now - called)).unwrap();
            }
        })
    };
    let mut con = raw_conn(url);
    let mut out = Cold {
        release_to_acquired: Vec::with_capacity(n),
        call_to_acquired: Vec::with_capacity(n),
        timeouts: 0,
    };
    let warm = n / 10;
    for i in 0..n + warm {
        let name = format!("{prefix}:lib:cold:{i}");
        let chan = channel_of(&name);
        let lock = client.lock(name.clone());
        let g = lock.lock().expect("holder lock()");
        go_tx.send(Some(name)).unwrap();
        let deadline = Instant::now() + Duration::from_millis(20);
        loop {
            let (_, subs): (String, i64) = redis::cmd("PUBSUB")
                .arg("NUMSUB")
                .arg(&chan)
                .query::<(String, i64)>(&mut con)
                .expect("PUBSUB NUMSUB");
            if subs > 0 {
                break;
            }
            if Instant::now() > deadline {
                if i >= warm {
                    out.timeouts += 1;
                }
                break;
            }
        }
        *released_at.lock().unwrap() = Some(Instant::now());
        drop(g);
        let (rel, call) = done_rx.recv().unwrap();
        if i >= warm {
            out.release_to_acquired.push(rel);
            out.call_to_acquired.push(call);
        }
    }
    go_tx.send(None).unwrap();
    waiter.join().unwrap();
    out
}

fn lib_threads(client: &Client, prefix: &str, threads: usize) -> f64 {
    run_for_throughput(threads, |i, stop, count| {
        let lock = client.lock(format!("{prefix}:lib:mt:{i}"));
        while !stop.load(Ordering::Relaxed) {
            let g = lock.lock().expect("lock()");
            drop(g);
            count.fetch_add(1, Ordering::Relaxed);
        }
    })
}

struct Fairness {
    counts: Vec<u64>,
    handoffs_per_s: f64,
    secs: f64,
}

impl Fairness {
    fn min_over_max(&self) -> f64 {
        let max = self.counts.iter().copied().max().unwrap_or(0);
        let min = self.counts.iter().copied().min().unwrap_or(0);
        if max == 0 {
            0.0
        } else {
            min as f64 / max as f64
        }
    }
    fn total_per_s(&self) -> f64 {
        self.counts.iter().sum::<u64>() as f64 / self.secs
    }
}

fn lib_fairness(client: &Client, prefix: &str) -> Fairness {
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

struct Parked {
    pct_ticks: f64,
    pct_schedstat: Option<f64>,
    acquired_after: usize,
}

fn lib_parked_cpu(client: &Client, prefix: &str) -> Parked {
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
        let ns0 = proc_schedstat_ns();
        let t0 = Instant::now();
        thread::sleep(Duration::from_secs_f64(PARKED_SECS));
        let tick1 = proc_cpu_ticks();
        let ns1 = proc_schedstat_ns();
        let el = t0.elapsed().as_secs_f64();
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
            pct_schedstat: match (ns0, ns1) {
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

/// How busy the rest of the machine was during the run: CPU time of all
/// processes (from `/proc/stat`) minus this process and the private
/// `redis-server`, as a share of all cores.
struct Noise {
    redis_pid: Option<u32>,
    t0: Instant,
    busy0: u64,
    own0: u64,
}

impl Noise {
    fn start(redis_pid: Option<u32>) -> Noise {
        Noise {
            redis_pid,
            t0: Instant::now(),
            busy0: machine_busy_ticks().unwrap_or(0),
            own0: proc_cpu_ticks() + redis_pid.map(pid_cpu_ticks).unwrap_or(0),
        }
    }
    /// Percent of the machine (all cores) used by other processes; `None`
    /// when `/proc/stat` cannot be read.
    fn finish(&self) -> Option<f64> {
        let busy = machine_busy_ticks()?;
        let own = proc_cpu_ticks() + self.redis_pid.map(pid_cpu_ticks).unwrap_or(0);
        let cores = thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1) as f64;
        let total = self.t0.elapsed().as_secs_f64() * clock_ticks_per_s() * cores;
        let other = busy.saturating_sub(self.busy0) as f64 - own.saturating_sub(self.own0) as f64;
        Some((other.max(0.0) / total * 100.0).min(100.0))
    }
}

/// Busy ticks of all CPUs together (`/proc/stat` "cpu" line, minus idle and
/// iowait).
fn machine_busy_ticks() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal (guest time is already
    // inside user/nice)
    let sum: u64 = v.iter().take(8).sum();
    Some(sum - v.get(3).copied().unwrap_or(0) - v.get(4).copied().unwrap_or(0))
}

/// utime + stime of this process, in clock ticks.
fn proc_cpu_ticks() -> u64 {
    stat_cpu_ticks("/proc/self/stat")
}

fn pid_cpu_ticks(pid: u32) -> u64 {
    stat_cpu_ticks(&format!("/proc/{pid}/stat"))
}

fn stat_cpu_ticks(path: &str) -> u64 {
    let stat = std::fs::read_to_string(path).unwrap_or_default();
    // Fields after the ")" that ends the command name: state is field 3, so
    // utime (14) and stime (15) are at indices 11 and 12.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    let get = |i: usize| f.get(i).and_then(|s| s.parse::<u64>().ok()).unwrap_or(0);
    get(11) + get(12)
}

/// Sum over this process's threads of nanoseconds spent on a CPU.
fn proc_schedstat_ns() -> Option<u64> {
    let mut total = 0u64;
    for entry in std::fs::read_dir("/proc/self/task").ok()? {
        let path = entry.ok()?.path().join("schedstat");
        if let Ok(s) = std::fs::read_to_string(path) {
            total += s.split_whitespace().next()?.parse::<u64>().ok()?;
        }
    }
    Some(total)
}

fn clock_ticks_per_s() -> f64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse::<f64>().ok())
        .unwrap_or(100.0)
}

fn vm_rss_bytes() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    s.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map(|kb| kb * 1024)
        .unwrap_or(0)
}

#[derive(Default)]
struct Watchdog {
    rss_before: u64,
    rss_held: u64,
    rss_after_pass: u64,
    acquire_all: Duration,
    release_all: Duration,
    passes_seen: usize,
    calls_per_pass: Option<f64>,
    reads_per_pass: Option<f64>,
    server_ms_per_pass: Option<f64>,
    pass_duration: Option<Duration>,
    period: Option<Duration>,
    calls_in_window: u64,
    window: Duration,
    lost: usize,
}

impl Watchdog {
    fn rss_delta_mib(&self) -> f64 {
        self.rss_held
            .max(self.rss_after_pass)
            .saturating_sub(self.rss_before) as f64
            / (1024.0 * 1024.0)
    }
    /// Round trips per pass: server read events attributable to the library
    /// (our polling subtracted); falls back to the EVALSHA/EVAL count.
    fn round_trips_per_pass(&self) -> Option<f64> {
        self.reads_per_pass.or(self.calls_per_pass)
    }
    fn round_trips_text(&self) -> String {
        self.round_trips_per_pass()
            .map(|r| format!("{r:.0}"))
            .unwrap_or_else(|| "n/a".into())
    }
    fn pass_pct(&self) -> Option<f64> {
        let period = self.period.unwrap_or(WATCHDOG_TIMEOUT / 3);
        self.pass_duration
            .map(|d| d.as_secs_f64() / period.as_secs_f64() * 100.0)
    }
    /// The same pass against the default 30 s timeout's 10 s period.
    fn pass_pct_default(&self) -> Option<f64> {
        self.pass_duration
            .map(|d| d.as_secs_f64() / (DEFAULT_WATCHDOG_TIMEOUT / 3).as_secs_f64() * 100.0)
    }
    fn pass_pct_text(&self) -> String {
        self.pass_pct()
            .map(|p| format!("{p:.2} %"))
            .unwrap_or_else(|| "n/a".into())
    }
    fn to_json(&self, j: &mut Json) {
        j.num("lib_held_locks", HELD_LOCKS as f64);
        j.num("lib_rss_before_bytes", self.rss_before as f64);
        j.num("lib_rss_held_bytes", self.rss_held as f64);
        j.num("lib_rss_after_pass_bytes", self.rss_after_pass as f64);
        j.num("lib_rss_delta_mib", self.rss_delta_mib());
        j.num("lib_acquire_10k_s", self.acquire_all.as_secs_f64());
        j.num("lib_release_10k_s", self.release_all.as_secs_f64());
        j.num("watchdog_timeout_ms", WATCHDOG_TIMEOUT.as_millis() as f64);
        j.num("watchdog_window_s", self.window.as_secs_f64());
        j.num(
            "watchdog_evalsha_eval_calls_in_window",
            self.calls_in_window as f64,
        );
        j.num("watchdog_passes_seen", self.passes_seen as f64);
        j.num("watchdog_locks_lost", self.lost as f64);
        j.opt("watchdog_calls_per_pass", self.calls_per_pass);
        j.opt("watchdog_read_events_per_pass", self.reads_per_pass);
        j.opt("watchdog_round_trips_per_pass", self.round_trips_per_pass());
        j.opt(
            "watchdog_pass_duration_ms",
            self.pass_duration.map(|d| d.as_secs_f64() * 1e3),
        );
        j.opt(
            "watchdog_period_observed_ms",
            self.period.map(|d| d.as_secs_f64() * 1e3),
        );
        j.opt("watchdog_pass_pct_of_period", self.pass_pct());
        j.opt("watchdog_server_ms_per_pass", self.server_ms_per_pass);
        j.opt(
            "watchdog_pass_pct_of_default_period",
            self.pass_pct_default(),
        );
    }
}

/// One poll of the server: (time, evalsha+eval calls, total reads processed).
#[derive(Clone, Copy)]
struct Poll {
    t: Instant,
    calls: u64,
    usec: u64,
    reads: u64,
}

fn poll_stats(con: &mut redis::Connection) -> Poll {
    let (cmdstats, stats): (String, String) = redis::pipe()
        .cmd("INFO")
        .arg("commandstats")
        .cmd("INFO")
        .arg("stats")
        .query(con)
        .expect("INFO");
    let t = Instant::now();
    let calls = ["cmdstat_evalsha:", "cmdstat_eval:"]
        .iter()
        .map(|p| info_field(&cmdstats, p, "calls="))
        .sum();
    let usec = ["cmdstat_evalsha:", "cmdstat_eval:"]
        .iter()
        .map(|p| info_field(&cmdstats, p, "usec="))
        .sum();
    let reads = info_field(&stats, "total_reads_processed:", "");
    Poll {
        t,
        calls,
        usec,
        reads,
    }
}

/// Server-side EVALSHA counters (`INFO commandstats`).
#[derive(Clone, Copy)]
struct EvalshaStats {
    calls: u64,
    usec: u64,
}

impl EvalshaStats {
    const ZERO: EvalshaStats = EvalshaStats { calls: 0, usec: 0 };
    /// Mean server time per EVALSHA, in µs.
    fn per_call(self) -> f64 {
        if self.calls == 0 {
            f64::NAN
        } else {
            self.usec as f64 / self.calls as f64
        }
    }
}

impl std::ops::Add for EvalshaStats {
    type Output = EvalshaStats;
    fn add(self, o: EvalshaStats) -> EvalshaStats {
        EvalshaStats {
            calls: self.calls + o.calls,
            usec: self.usec + o.usec,
        }
    }
}

/// Runs `f` and returns the server's EVALSHA calls and time during it.
fn with_server_stats<T>(con: &mut redis::Connection, f: impl FnOnce() -> T) -> (T, EvalshaStats) {
    let before = evalsha_server_usec(con);
    let out = f();
    let after = evalsha_server_usec(con);
    (
        out,
        EvalshaStats {
            calls: after.calls.saturating_sub(before.calls),
            usec: after.usec.saturating_sub(before.usec),
        },
    )
}

fn evalsha_server_usec(con: &mut redis::Connection) -> EvalshaStats {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(con)
        .expect("INFO commandstats");
    EvalshaStats {
        calls: info_field(&info, "cmdstat_evalsha:", "calls="),
        usec: info_field(&info, "cmdstat_evalsha:", "usec="),
    }
}

fn info_field(info: &str, line_prefix: &str, key: &str) -> u64 {
    info.lines()
        .find_map(|l| l.strip_prefix(line_prefix))
        .and_then(|rest| {
            if key.is_empty() {
                Some(rest.trim())
            } else {
                rest.split(',').find_map(|kv| kv.strip_prefix(key))
            }
        })
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

fn lib_watchdog_memory(url: &str, prefix: &str) -> Watchdog {
    let client = Client::builder()
        .url(url)
        .watchdog_timeout(WATCHDOG_TIMEOUT)
        .build()
        .expect("redhold: ClientBuilder::build");
    let mut wd = Watchdog::default();
    let mut con = raw_conn(url);

    // Warm up: one lock, so connections and threads exist before we measure.
    drop(
        client
            .lock(format!("{prefix}:lib:wd:warm"))
            .lock()
            .expect("lock()"),
    );

    // Calibrate: server read events caused by one poll when nothing else runs.
    let c0 = poll_stats(&mut con);
    let mut c1 = c0;
    for _ in 0..50 {
        c1 = poll_stats(&mut con);
    }
    let reads_per_poll = ((c1.reads - c0.reads) as f64 / 50.0).round().max(1.0) as u64;

    wd.rss_before = vm_rss_bytes();
    let locks: Vec<_> = (0..HELD_LOCKS)
        .map(|i| client.lock(format!("{prefix}:lib:wd:{i}")))
        .collect();
    let t0 = Instant::now();
    let guards: Vec<_> = locks.iter().map(|l| l.lock().expect("lock()")).collect();
    wd.acquire_all = t0.elapsed();
    wd.rss_held = vm_rss_bytes();

    // Watch ~3.3 renewal periods, polling every ~1 ms.
    let window = WATCHDOG_TIMEOUT.mul_f64(1.1);
    let mut polls = Vec::with_capacity(4000);
    let start = Instant::now();
    while start.elapsed() < window {
        polls.push(poll_stats(&mut con));
        thread::sleep(Duration::from_millis(1));
    }
    wd.window = start.elapsed();
    wd.rss_after_pass = vm_rss_bytes();
    wd.calls_in_window = polls.last().unwrap().calls - polls[0].calls;
    analyse_passes(&polls, reads_per_poll, &mut wd);

    wd.lost = guards.iter().filter(|g| !g.is_held()).count();
    if wd.lost > 0 {
        eprintln!(
            "limits: WARNING: {} of {HELD_LOCKS} held locks were lost during the watchdog phase",
            wd.lost
        );
    }
    let t0 = Instant::now();
    drop(guards);
    wd.release_all = t0.elapsed();
    drop(locks);
    let _ = client.shutdown();
    wd
}

/// Splits the poll series into bursts of renewal activity (EVALSHA/EVAL calls
/// going up; a gap of 200 ms or more ends a burst) and keeps the bursts that
/// are fully inside the window.
fn analyse_passes(polls: &[Poll], reads_per_poll: u64, wd: &mut Watchdog) {
    // (first index with activity, last index with activity)
    let mut bursts: Vec<(usize, usize)> = Vec::new();
    for i in 1..polls.len() {
        if polls[i].calls > polls[i - 1].calls {
            match bursts.last_mut() {
                Some((_, last)) if polls[i].t - polls[*last].t < Duration::from_millis(200) => {
                    *last = i
                }
                _ => bursts.push((i, i)),
            }
        }
    }
    // Drop bursts touching either end of the window (maybe incomplete).
    let complete: Vec<(usize, usize)> = bursts
        .into_iter()
        .filter(|&(a, b)| a > 1 && b + 1 < polls.len())
        .collect();
    wd.passes_seen = complete.len();
    if complete.is_empty() {
        return;
    }
    let mut calls = Vec::new();
    let mut usecs = Vec::new();
    let mut reads = Vec::new();
    let mut durs = Vec::new();
    for &(a, b) in &complete {
        let before = polls[a - 1];
        let end = polls[b];
        calls.push((end.calls - before.calls) as f64);
        usecs.push((end.usec - before.usec) as f64);
        let polls_in = (b - a + 1) as u64 * reads_per_poll;
        reads.push(
            end.reads
                .saturating_sub(before.reads)
                .saturating_sub(polls_in) as f64,
        );
        // Upper bound: from the last quiet poll to the last busy one.
        durs.push(end.t - before.t);
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(|a, b| a.partial_cmp(b).unwrap());
        v[v.len() / 2]
    };
    wd.calls_per_pass = Some(median(&mut calls));
    wd.server_ms_per_pass = Some(median(&mut usecs) / 1e3);
    wd.reads_per_pass = Some(median(&mut reads));
    durs.sort();
    wd.pass_duration = Some(durs[durs.len() / 2]);
    if complete.len() >= 2 {
        let mut gaps: Vec<Duration> = complete
            .windows(2)
            .map(|w| polls[w[1].0].t - polls[w[0].0].t)
            .collect();
        gaps.sort();
        wd.period = Some(gaps[gaps.len() / 2]);
    }
}

// =====================================================================
// output
// =====================================================================

fn sorted(v: &[Duration]) -> Vec<Duration> {
    let mut s = v.to_vec();
    s.sort();
    s
}
fn p50(v: &[Duration]) -> Duration {
    percentile(&sorted(v), 0.50)
}
fn p99(v: &[Duration]) -> Duration {
    percentile(&sorted(v), 0.99)
}
fn ratio(a: Duration, b: Duration) -> f64 {
    if b.is_zero() {
        f64::NAN
    } else {
        a.as_secs_f64() / b.as_secs_f64()
    }
}
fn fmt_us(d: Duration) -> String {
    let us = d.as_secs_f64() * 1e6;
    if us >= 10_000.0 {
        format!("{:.1} ms", us / 1e3)
    } else {
        format!("{us:.0} µs")
    }
}

#[derive(Default)]
struct Table {
    rows: Vec<[String; 7]>,
    met: usize,
    total: usize,
}

impl Table {
    fn push(&mut self, row: [String; 7], ok: bool, counts: bool) {
        if counts {
            self.total += 1;
            if ok {
                self.met += 1;
            }
        }
        self.rows.push(row);
    }
    fn lat_row(
        &mut self,
        op: &str,
        lib: &[Duration],
        raw: Duration,
        raw_label: &str,
        target: &str,
        ok: bool,
    ) {
        let s = sorted(lib);
        let (p50, p99) = (percentile(&s, 0.5), percentile(&s, 0.99));
        let info = target == "info";
        self.push(
            [
                op.to_string(),
                format!("{} / {}", fmt_us(p50), fmt_us(p99)),
                if raw.is_zero() {
                    "-".into()
                } else {
                    format!("{} ({raw_label})", fmt_us(raw))
                },
                if raw.is_zero() {
                    "-".into()
                } else {
                    format!("{:.2}", ratio(p50, raw))
                },
                if info { "-".into() } else { target.into() },
                if info { "-".into() } else { yes_no(ok) },
                String::new(),
            ],
            ok,
            !info,
        );
    }
    fn rate_row(&mut self, op: &str, lib: f64, raw: f64, target: &str, ok: bool) {
        self.push(
            [
                op.to_string(),
                format!("{lib:.0}"),
                format!("{raw:.0}"),
                format!("{:.2}", lib / raw),
                target.into(),
                yes_no(ok),
                String::new(),
            ],
            ok,
            true,
        );
    }
    fn plain_row(&mut self, op: &str, lib: &str, raw: &str, ratio: &str, target: &str, ok: bool) {
        self.push(
            [
                op.to_string(),
                lib.to_string(),
                if raw.is_empty() {
                    "-".into()
                } else {
                    raw.into()
                },
                if ratio.is_empty() {
                    "-".into()
                } else {
                    ratio.into()
                },
                target.into(),
                yes_no(ok),
                String::new(),
            ],
            ok,
            true,
        );
    }
    /// A row that does not count towards the met/total tally.
    fn info_row(&mut self, op: &str, lib: &str, note: &str) {
        self.push(
            [
                op.to_string(),
                lib.to_string(),
                "-".into(),
                "-".into(),
                note.into(),
                "-".into(),
                String::new(),
            ],
            true,
            false,
        );
    }
    fn print(&self) {
        let header = [
            "operation",
            "library p50 / p99",
            "raw p50 (bound)",
            "ratio",
            "target",
            "met?",
        ];
        let mut w = [0usize; 6];
        for (i, h) in header.iter().enumerate() {
            w[i] = h.chars().count();
        }
        for r in &self.rows {
            for i in 0..6 {
                w[i] = w[i].max(r[i].chars().count());
            }
        }
        let line = |cells: [&str; 6]| {
            let mut s = String::from("|");
            for i in 0..6 {
                let pad = w[i] - cells[i].chars().count();
                let _ = write!(s, " {}{} |", cells[i], " ".repeat(pad));
            }
            println!("{s}");
        };
        line(header);
        let dashes: Vec<String> = w.iter().map(|n| "-".repeat(*n)).collect();
        line([
            &dashes[0], &dashes[1], &dashes[2], &dashes[3], &dashes[4], &dashes[5],
        ]);
        for r in &self.rows {
            line([&r[0], &r[1], &r[2], &r[3], &r[4], &r[5]]);
        }
    }
}

fn yes_no(ok: bool) -> String {
    if ok { "yes" } else { "NO" }.to_string()
}

/// A flat JSON object written by hand (no serde in this crate).
#[derive(Default)]
struct Json {
    fields: BTreeMap<String, String>,
    order: Vec<String>,
}

impl Json {
    fn raw(&mut self, k: &str, v: &str) {
        if self.fields.insert(k.to_string(), v.to_string()).is_none() {
            self.order.push(k.to_string());
        }
    }
    fn num(&mut self, k: &str, v: f64) {
        let s = if v.is_finite() {
            if v.fract() == 0.0 && v.abs() < 1e15 {
                format!("{v:.0}")
            } else {
                format!("{v:.3}")
            }
        } else {
            "null".into()
        };
        self.raw(k, &s);
    }
    fn opt(&mut self, k: &str, v: Option<f64>) {
        match v {
            Some(v) => self.num(k, v),
            None => self.raw(k, "null"),
        }
    }
    fn us(&mut self, k: &str, d: Duration) {
        self.num(k, d.as_secs_f64() * 1e6);
    }
    fn str(&mut self, k: &str, v: &str) {
        let mut s = String::from("\"");
        for c in v.chars() {
            match c {
                '"' => s.push_str("\\\""),
                '\\' => s.push_str("\\\\"),
                c if (c as u32) < 0x20 => {
                    let _ = write!(s, "\\u{:04x}", c as u32);
                }
                c => s.push(c),
            }
        }
        s.push('"');
        self.raw(k, &s);
    }
    /// `<k>_p50_us`, `<k>_p90_us`, `<k>_p99_us`, `<k>_max_us`, `<k>_mean_us`, `<k>_n`.
    fn lat(&mut self, k: &str, v: &[Duration]) {
        let s = sorted(v);
        self.us(&format!("{k}_p50_us"), percentile(&s, 0.50));
        self.us(&format!("{k}_p90_us"), percentile(&s, 0.90));
        self.us(&format!("{k}_p99_us"), percentile(&s, 0.99));
        self.us(
            &format!("{k}_max_us"),
            s.last().copied().unwrap_or_default(),
        );
        let mean = if s.is_empty() {
            Duration::ZERO
        } else {
            s.iter().sum::<Duration>() / s.len() as u32
        };
        self.us(&format!("{k}_mean_us"), mean);
        self.num(&format!("{k}_n"), s.len() as f64);
    }
    fn finish(&self) -> String {
        let parts: Vec<String> = self
            .order
            .iter()
            .map(|k| format!("\"{k}\":{}", self.fields[k]))
            .collect();
        format!("{{{}}}", parts.join(","))
    }
}

fn redact(url: &str) -> String {
    // Hide a password in redis://user:pass@host/ URLs.
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s => format!("{}://***@{}", &url[..s], &url[at + 1..]),
        _ => url.to_string(),
    }
}

/// The pid of a server on this machine (from `INFO server`), if the URL
/// points at loopback and that pid is visible here.
fn local_server_pid(url: &str) -> Option<u32> {
    if !["127.0.0.1", "localhost", "[::1]"]
        .iter()
        .any(|h| url.contains(h))
    {
        return None;
    }
    let mut con = redis::Client::open(url).ok()?.get_connection().ok()?;
    let info: String = redis::cmd("INFO").arg("server").query(&mut con).ok()?;
    let pid: u32 = info
        .lines()
        .find_map(|l| l.strip_prefix("process_id:"))?
        .trim()
        .parse()
        .ok()?;
    std::path::Path::new(&format!("/proc/{pid}/stat"))
        .exists()
        .then_some(pid)
}

fn server_version(url: &str) -> Option<String> {
    let mut con = redis::Client::open(url).ok()?.get_connection().ok()?;
    let info: String = redis::cmd("INFO").arg("server").query(&mut con).ok()?;
    info.lines()
        .find_map(|l| l.strip_prefix("redis_version:"))
        .map(|v| v.trim().to_string())
}

fn target_dir() -> std::path::PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target"))
        .join("redhold-limits")
}

fn write_artifacts(
    raw_acq: &[Duration],
    raw_rel: &[Duration],
    raw_pub: &[Duration],
    raw_handoff: &[Duration],
    lib_warm: &[Duration],
    cold: &Cold,
    j: &Json,
) {
    let dir = target_dir();
    if let Err(e) = std::fs::create_dir_all(&dir) {
        eprintln!("limits: cannot create {}: {e}", dir.display());
        return;
    }
    let mut csv = String::from("series,micros\n");
    let mut series = |name: &str, v: &mut dyn Iterator<Item = Duration>| {
        for d in v {
            let _ = writeln!(csv, "{name},{:.3}", d.as_secs_f64() * 1e6);
        }
    };
    series("library_warm_handoff", &mut lib_warm.iter().copied());
    series("raw_handoff", &mut raw_handoff.iter().copied());
    // Per-sample sum of the three raw legs (in measurement order, so the legs
    // are independent draws): a distribution for the composed bound.
    let n = raw_acq.len().min(raw_rel.len()).min(raw_pub.len());
    series(
        "raw_bound_sum",
        &mut (0..n).map(|i| raw_rel[i] + raw_pub[i] + raw_acq[i]),
    );
    series(
        "library_cold_handoff",
        &mut cold.release_to_acquired.iter().copied(),
    );
    let csv_path = dir.join("handoff-latency.csv");
    match std::fs::write(&csv_path, csv) {
        Ok(()) => eprintln!("limits: wrote {}", csv_path.display()),
        Err(e) => eprintln!("limits: cannot write {}: {e}", csv_path.display()),
    }
    let json_path = dir.join("limits.json");
    if let Err(e) = std::fs::write(&json_path, j.finish() + "\n") {
        eprintln!("limits: cannot write {}: {e}", json_path.display());
    }
}
