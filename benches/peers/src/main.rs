//! `peers <redis-url> <samples> [handoff-samples]`: the uncontended lock + unlock pair of
//! redhold next to the raw `redis` crate and other Rust Redis lock crates,
//! on the same server in the same run.
//!
//! Contenders (`contenders`, `others`): raw (acquire EVALSHA + release
//! EVALSHA on one connection, as `benches/limits/raw.rs`), redhold
//! (`lock()` + drop), redhold's async face (`lock_async` + `unlock_async`,
//! `redhold_async`), rslock 0.10 (async), rlock 0.2 (sync API, and its
//! async API: `rlock_async`) and redis-lock 0.5 (sync API); the async ones
//! each pair one `block_on` of a current-thread tokio runtime. Each takes
//! a free lock with a 30 s TTL (redhold: its watchdog lease) on a fixed name
//! of its own and releases it; measured from before the acquire call to the
//! release call's return.
//!
//! They run in `ROUNDS` alternating rounds (the starting contender rotates)
//! of `samples / ROUNDS` pairs each, after a tenth as many unmeasured ones.
//! Prints one flat JSON object on stdout: `<contender>_pair_<p50|p90|p99|
//! max|mean>_us` and `<contender>_pair_n` for each, plus `samples`,
//! `rounds` and `dbsize` (keys in the URL's database at the end).
//! Progress goes to stderr. Run by `cargo bench --bench limits`, which
//! folds the figures into its table.
//!
//! Then the async locks' cross-client hand-over (`handoff`): redhold's
//! async face, rslock and rlock's async API on a current-thread tokio
//! runtime, `<key>_handoff_<p50|...>_us`. The peers poll, so each sample
//! is tens of milliseconds: `handoff-samples` of them (third argument;
//! default `samples / 100`, 20 to 60).
//!
//! `peers --count <redis-url> [library]` counts commands instead (`count`):
//! run by benches/count_commands.py.

mod async_peers;
mod contenders;
mod count;
mod count_peers;
mod handoff;
mod others;
#[path = "../../common/raw_lua.rs"]
mod raw_lua;

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use contenders::Contender;

const ROUNDS: usize = 10;
/// The lease / TTL every contender asks for.
pub(crate) const TTL: Duration = Duration::from_secs(30);

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--count") {
        // `peers --count <redis-url> [library]`: commands per operation
        // (count.rs), run by benches/count_commands.py.
        let Some(url) = args.get(1) else {
            eprintln!("usage: peers --count <redis-url> [library]");
            std::process::exit(2);
        };
        count::run(url, args.get(2).map(String::as_str));
        return;
    }
    let (Some(url), Some(samples)) = (
        args.first(),
        args.get(1).and_then(|s| s.parse::<usize>().ok()),
    ) else {
        eprintln!("usage: peers <redis-url> <samples> [handoff-samples]   (prints one JSON line)");
        std::process::exit(2);
    };
    let prefix = format!("redhold-bench:peers:{}", std::process::id());
    let mut all = contenders::all(url, &prefix);
    let per_round = samples.div_ceil(ROUNDS).max(1);
    eprintln!(
        "peers: {ROUNDS} rounds x {per_round} uncontended pairs of {}",
        all.iter().map(|c| c.key()).collect::<Vec<_>>().join(", ")
    );
    let mut samples_of: Vec<Vec<Duration>> = all.iter().map(|_| Vec::new()).collect();
    for round in 0..ROUNDS {
        for k in 0..all.len() {
            let i = (round + k) % all.len();
            samples_of[i].extend(pairs(all[i].as_mut(), per_round));
        }
    }
    let mut out = String::from("{");
    let _ = write!(
        out,
        "\"samples\":{},\"rounds\":{ROUNDS}",
        per_round * ROUNDS
    );
    let _ = write!(out, ",\"dbsize\":{}", contenders::dbsize(url));
    for (c, v) in all.iter().zip(samples_of.iter_mut()) {
        figures(&mut out, &format!("{}_pair", c.key()), v);
    }
    for c in &mut all {
        c.finish();
    }
    let handoffs = args
        .get(2)
        .and_then(|s| s.parse::<usize>().ok())
        .unwrap_or((samples / 100).clamp(20, 60));
    handoff::measure(url, &prefix, handoffs, &mut out);
    out.push('}');
    println!("{out}");
}

/// Appends `,"<key>_<p50|p90|p99|max|mean>_us":...,"<key>_n":...` for the
/// samples `v` (sorted here) to `out`.
pub(crate) fn figures(out: &mut String, key: &str, v: &mut [Duration]) {
    v.sort();
    let mean = v.iter().sum::<Duration>() / v.len().max(1) as u32;
    let figures = [
        ("p50", pct(v, 0.50)),
        ("p90", pct(v, 0.90)),
        ("p99", pct(v, 0.99)),
        ("max", v.last().copied().unwrap_or_default()),
        ("mean", mean),
    ];
    for (name, d) in figures {
        let _ = write!(out, ",\"{key}_{name}_us\":{:.3}", d.as_secs_f64() * 1e6);
    }
    let _ = write!(out, ",\"{key}_n\":{}", v.len());
}

/// `n` measured pairs after `n / 10` unmeasured ones.
fn pairs(c: &mut dyn Contender, n: usize) -> Vec<Duration> {
    let mut out = Vec::with_capacity(n);
    for i in 0..n + n / 10 {
        let t0 = Instant::now();
        c.pair();
        let el = t0.elapsed();
        if i >= n / 10 {
            out.push(el);
        }
    }
    out
}

/// The `q`-quantile of an ascending-sorted slice (as benches/common).
fn pct(sorted: &[Duration], q: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}
