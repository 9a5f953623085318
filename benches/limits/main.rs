//! `cargo bench --bench limits`: redhold measured against the limits of a
//! Redis round trip, both measured in the same run on the same server.
//!
//! 1. Raw limits with the `redis` crate alone (sync API), in `raw`: an
//!    acquire-shaped EVALSHA, a release-shaped EVALSHA, PUBLISH -> delivery
//!    to a subscriber blocked in `get_message` on another thread, a
//!    hand-rolled "ideal client" handoff (waiter idle 1 ms and 20 ms), and
//!    16 threads each on its own connection doing acquire+release pairs.
//! 2. The library: uncontended `lock()` + drop, reentrant `lock()`
//!    (`uncontended`), uncontended `lock()` + drop and the raw acquire +
//!    release pair alternated iteration by iteration in one loop on one
//!    thread (`interleaved`: the placement-neutral comparison), warm and
//!    cold handoff (`handoff`), the handoff with the waiter idle 1 ms and
//!    20 ms on the same client and on a second client, against the ideal
//!    client (`idle`), 16 threads x 16 names and 8 threads on one name
//!    (`contention`), two clients x 4 threads on one name: each client's
//!    share and handoffs/s (`share`), 64 parked threads (CPU, `parked`),
//!    watchdog with 10,000 held locks (round trips per renewal pass) and
//!    the RSS those locks add (`watchdog`); the semaphore's uncontended
//!    pair and its release to a parked waiter (`synchronizers`).
//! 3. The async face (`async_face`): uncontended acquire + release,
//!    same-client and cross-client hand-over and 1,000 callers on one name,
//!    on tokio multi-thread, tokio current-thread and a plain `block_on`
//!    (`executors`), each against the blocking API in the same rounds
//!    (`async_pairs`, `async_handoff`, `crowd`).
//! 4. Peers: the uncontended lock + unlock pair of redhold (blocking and
//!    async), raw, rslock, rlock (sync and async) and redis-lock, and the
//!    async locks' cross-client hand-over, from the `peers` binary of
//!    `benches/peers` run as a subprocess on the same server (`peers`,
//!    `peers_async`; left out, with the reason, when it cannot be built or
//!    run).
//!
//! The raw limits and the library figures compared with them are measured
//! in alternating rounds (`rounds`, `idle`; the peers binary alternates its
//! own). Alternating rounds even out load, not placement: on a 2-vCPU VM
//! that halts an idle vCPU, a round trip costs about 27 µs with the client
//! thread on `redis-server`'s vCPU and 110-155 µs on the other, and two
//! loops may land differently. So the uncontended pair is also measured
//! interleaved (`interleaved`), and that row, not the own-loop one, is the
//! one to read against the target.
//!
//! Prints one table (operation, library p50 / p99, raw p50, ratio, target,
//! met?; `targets`) and, as the very last line on stdout, one JSON object
//! with every figure (`report`). Progress goes to stderr. Also writes
//! `target/redhold-limits/handoff-latency.csv` (samples for the chart, see
//! `benches/plot_handoff.py`; one series per curve, the idle-waiter curves
//! among them) and `target/redhold-limits/limits.json` (`artifacts`).
//!
//! Uses `REDIS_URL` if set, else starts a private `redis-server`.
//! Environment knobs: `LIMITS_SAMPLES` (latency samples per figure, default
//! 5000; the 20 ms idle curves take a tenth, 50 to 400), `LIMITS_PEERS_BIN`
//! (the peers binary to run instead of building it), `LIMITS_ONLY=async`
//! (only steps 3 and 4: the async face, its table rows and JSON keys).

#[path = "../common/mod.rs"]
mod common;

mod artifacts;
mod async_face;
mod async_handoff;
mod async_pairs;
mod contention;
mod crowd;
mod executors;
mod handoff;
mod idle;
mod interleaved;
mod json;
mod noise;
mod parked;
mod peers;
mod peers_async;
mod proc;
mod raw;
#[path = "../common/raw_lua.rs"]
mod raw_lua;
mod report;
mod rounds;
mod server;
mod share;
mod stats;
mod synchronizers;
mod table;
mod targets;
mod uncontended;
mod watchdog;

use std::time::Instant;

use common::{run_prefix, BenchServer};
use json::Json;
use noise::Noise;
use redhold::Client;
use report::Figures;

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
    let noise = Noise::start(server::pid(&server));
    let prefix = run_prefix("limits");
    let mut j = Json::default();
    report::run_info(&mut j, &url, samples);
    if std::env::var("LIMITS_ONLY").is_ok_and(|v| v == "async") {
        async_only(&mut j, &url, &prefix, samples, noise, started);
        drop(server);
        println!("{}", j.finish());
        return;
    }

    // Memory and watchdog first, while the heap is still small.
    let wd = watchdog::measure(&url, &prefix);
    // Raw limits and the library's figures, in alternating rounds.
    let client = Client::open(url.as_str()).expect("redhold: Client::open");
    // A second client (own UUID, own subscriber): another process's view.
    let other = Client::open(url.as_str()).expect("redhold: Client::open (second)");
    let lat = rounds::latency(&url, &client, &other, &prefix, samples);
    let long_idle = idle::long(&url, &client, &other, &prefix, samples);
    let tput = rounds::throughput(&url, &client, &prefix);
    // The library alone.
    let cold = handoff::cold(&client, &url, &prefix, samples);
    let fair = contention::fairness(&client, &prefix);
    let share = share::two_clients(&url, &prefix);
    let parked = parked::cpu(&client, &prefix);
    let semaphores = synchronizers::measure(&url, &client, &other, &prefix, samples / 2);
    let async_face = async_face::measure(&url, &client, &other, &prefix, samples);
    let _ = other.shutdown();
    let _ = client.shutdown();
    // Other lock crates side by side (a subprocess, `benches/peers`).
    let peers = peers::measure(&url, samples);
    if let Some(line) = peers::not_measured(&peers) {
        eprintln!("{line}");
    }
    let figures = Figures {
        lat,
        long_idle,
        tput,
        cold,
        fair,
        share,
        parked,
        wd,
        peers,
        semaphores,
        async_face,
    };

    // The table, the JSON object and the files; the JSON line comes last.
    report::figures(&mut j, &figures);
    let table = targets::table(&figures);
    let other_cpu = noise.finish();
    report::run_end(&mut j, other_cpu, &table, started);
    artifacts::write(&figures, &j);
    report::print(&figures, &table, other_cpu, started);
    drop(server);
    println!("{}", j.finish());
}

/// `LIMITS_ONLY=async`: the async face and the peers, their rows and keys.
fn async_only(
    j: &mut Json,
    url: &str,
    prefix: &str,
    samples: usize,
    noise: Noise,
    started: Instant,
) {
    let client = Client::open(url).expect("redhold: Client::open");
    let other = Client::open(url).expect("redhold: Client::open (second)");
    let face = async_face::measure(url, &client, &other, prefix, samples);
    let _ = other.shutdown();
    let _ = client.shutdown();
    let peers = peers::measure(url, samples);
    async_face::to_json(j, &face);
    peers::to_json(j, &peers);
    peers_async::to_json(j, &peers);
    let mut t = table::Table::default();
    async_face::rows(&mut t, &face);
    peers_async::rows(&mut t, &peers);
    let other_cpu = noise.finish();
    report::run_end(j, other_cpu, &t, started);
    println!();
    t.print();
    report::tail(&peers, &t, other_cpu, started);
}
