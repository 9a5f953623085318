//! The watchdog and memory with 10,000 held locks.
//!
//! One client (watchdog timeout 3 s, so a renewal pass every 1 s) holds
//! 10,000 locks while the server's counters are polled about every
//! millisecond for ~3.3 periods: how many round trips a renewal pass takes
//! (renewals go in batches, not one round trip per lock), how long the pass
//! is against its period, and how much RSS the held locks add. Measured
//! first, while the heap is still small, so the RSS delta is not hidden by
//! memory freed (but kept) by later phases.

use std::thread;
use std::time::{Duration, Instant};

use redhold::Client;

use crate::json::Json;
use crate::proc::vm_rss_bytes;
use crate::server::{info_field, raw_conn};

pub(crate) const HELD_LOCKS: usize = 10_000;
const WATCHDOG_TIMEOUT: Duration = Duration::from_secs(3);
const DEFAULT_WATCHDOG_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Default)]
pub(crate) struct Watchdog {
    rss_before: u64,
    rss_held: u64,
    rss_after_pass: u64,
    pub(crate) acquire_all: Duration,
    pub(crate) release_all: Duration,
    passes_seen: usize,
    pub(crate) calls_per_pass: Option<f64>,
    reads_per_pass: Option<f64>,
    pub(crate) server_ms_per_pass: Option<f64>,
    pub(crate) pass_duration: Option<Duration>,
    pub(crate) period: Option<Duration>,
    calls_in_window: u64,
    window: Duration,
    lost: usize,
}

impl Watchdog {
    pub(crate) fn rss_delta_mib(&self) -> f64 {
        self.rss_held
            .max(self.rss_after_pass)
            .saturating_sub(self.rss_before) as f64
            / (1024.0 * 1024.0)
    }
    /// Round trips per pass: server read events attributable to the library
    /// (our polling subtracted); falls back to the EVALSHA/EVAL count.
    pub(crate) fn round_trips_per_pass(&self) -> Option<f64> {
        self.reads_per_pass.or(self.calls_per_pass)
    }
    pub(crate) fn round_trips_text(&self) -> String {
        self.round_trips_per_pass()
            .map(|r| format!("{r:.0}"))
            .unwrap_or_else(|| "n/a".into())
    }
    pub(crate) fn pass_pct(&self) -> Option<f64> {
        let period = self.period.unwrap_or(WATCHDOG_TIMEOUT / 3);
        self.pass_duration
            .map(|d| d.as_secs_f64() / period.as_secs_f64() * 100.0)
    }
    /// The same pass against the default 30 s timeout's 10 s period.
    pub(crate) fn pass_pct_default(&self) -> Option<f64> {
        self.pass_duration
            .map(|d| d.as_secs_f64() / (DEFAULT_WATCHDOG_TIMEOUT / 3).as_secs_f64() * 100.0)
    }
    pub(crate) fn pass_pct_text(&self) -> String {
        self.pass_pct()
            .map(|p| format!("{p:.2} %"))
            .unwrap_or_else(|| "n/a".into())
    }
    pub(crate) fn to_json(&self, j: &mut Json) {
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

pub(crate) fn measure(url: &str, prefix: &str) -> Watchdog {
    eprintln!("lib: {HELD_LOCKS} held locks: RSS and watchdog round trips");
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
