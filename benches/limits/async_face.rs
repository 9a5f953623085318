//! The async face (issue 42) against the blocking API, on three executors:
//! tokio multi-thread, tokio current-thread and a plain `block_on`
//! (`executors`).
//!
//! Four operations, each measured through the async API on each executor
//! and through the blocking API in the same rounds:
//!
//! - uncontended acquire + release (`async_pairs`: raw, blocking and async
//!   pairs alternated in one loop, so the raw EVALSHA pair of the same
//!   loop is the limit);
//! - same-client and cross-client warm hand-over (`async_handoff`, against
//!   `handoff::warm`; the ideal client's hand-over, `raw::handoff_direct`,
//!   in the same rounds is the limit);
//! - 1,000 callers on one name (`crowd`): the gap between successive
//!   acquisitions.
//!
//! Rounds alternate: `ROUNDS` of (raw handoff, blocking hand-overs, then
//! per executor its pairs and hand-overs), then `CROWD_ROUNDS` of (blocking
//! crowd, then each executor's). The targets (issue 42, for a quiet
//! machine): async p50 <= 1.3x the blocking p50 and async p99 <= 2x the
//! blocking p99, for every operation on every executor. They are reported,
//! not asserted. The peers' async figures are in `peers_async`.

use std::time::Duration;

use redhold::Client;

use crate::async_handoff::{self, Handoffs};
use crate::async_pairs::{self, Pairs};
use crate::crowd::{self, Crowd, CROWD};
use crate::executors::Exec;
use crate::handoff::{self, WARM_PARK};
use crate::json::Json;
use crate::raw;
use crate::stats::{fmt_us, p50, p99, ratio};
use crate::table::Table;

const ROUNDS: usize = 5;
const CROWD_ROUNDS: usize = 3;
/// Targets: async p50 <= this x blocking p50 ...
pub(crate) const MAX_P50_RATIO: f64 = 1.3;
/// ... and async p99 <= this x blocking p99.
pub(crate) const MAX_P99_RATIO: f64 = 2.0;

/// One executor's figures.
pub(crate) struct OnExec {
    pub(crate) key: &'static str,
    pub(crate) label: &'static str,
    pub(crate) pairs: Pairs,
    pub(crate) same: Handoffs,
    pub(crate) cross: Handoffs,
    pub(crate) crowd: Crowd,
}

/// Everything the async step measured.
pub(crate) struct AsyncFace {
    pub(crate) execs: Vec<OnExec>,
    pub(crate) blocking_same: Vec<Duration>,
    pub(crate) blocking_cross: Vec<Duration>,
    pub(crate) blocking_crowd: Crowd,
    /// The ideal client's hand-over (idle 1 ms), same rounds.
    pub(crate) raw_handoff: Vec<Duration>,
    pub(crate) tokio_workers: usize,
}

/// Uncontended pairs per executor, `samples / 2`; hand-overs per figure,
/// `samples / 5`; `CROWD_ROUNDS` crowds of `CROWD` each.
pub(crate) fn measure(
    url: &str,
    client: &Client,
    other: &Client,
    prefix: &str,
    samples: usize,
) -> AsyncFace {
    let execs = Exec::all();
    let pairs_per_round = (samples / 2).div_ceil(ROUNDS).max(1);
    let hand_per_round = (samples / 5).div_ceil(ROUNDS).max(1);
    eprintln!(
        "async: {ROUNDS} rounds x ({pairs_per_round} raw/blocking/async pairs, {hand_per_round} \
         hand-overs same and cross client) on {}, then {CROWD_ROUNDS} rounds of {CROWD} callers",
        execs.iter().map(Exec::label).collect::<Vec<_>>().join(", ")
    );
    let mut f = AsyncFace {
        execs: execs
            .iter()
            .map(|e| OnExec {
                key: e.key(),
                label: e.label(),
                pairs: Pairs::default(),
                same: Handoffs::default(),
                cross: Handoffs::default(),
                crowd: Crowd::default(),
            })
            .collect(),
        blocking_same: Vec::new(),
        blocking_cross: Vec::new(),
        blocking_crowd: Crowd::default(),
        raw_handoff: Vec::new(),
        tokio_workers: execs.iter().map(Exec::workers).max().unwrap_or(0),
    };
    let same = format!("{prefix}:lib:async:same");
    let cross = format!("{prefix}:lib:async:cross");
    for round in 0..ROUNDS {
        eprint!("  round {}/{ROUNDS}\r", round + 1);
        let (h, _) = raw::handoff_direct(url, prefix, hand_per_round, WARM_PARK);
        f.raw_handoff.extend(h);
        let (h, _) = handoff::warm(client, client, &same, hand_per_round, WARM_PARK);
        f.blocking_same.extend(h);
        let (h, _) = handoff::warm(client, other, &cross, hand_per_round, WARM_PARK);
        f.blocking_cross.extend(h);
        for (exec, on) in execs.iter().zip(f.execs.iter_mut()) {
            on.pairs.extend(async_pairs::measure(
                exec,
                url,
                client,
                prefix,
                pairs_per_round,
            ));
            let name = format!("{same}:{}", exec.key());
            on.same.extend(async_handoff::warm(
                exec,
                client,
                client,
                &name,
                hand_per_round,
                WARM_PARK,
            ));
            let name = format!("{cross}:{}", exec.key());
            on.cross.extend(async_handoff::warm(
                exec,
                client,
                other,
                &name,
                hand_per_round,
                WARM_PARK,
            ));
        }
    }
    eprintln!();
    for round in 0..CROWD_ROUNDS {
        eprint!("  {CROWD} callers, round {}/{CROWD_ROUNDS}\r", round + 1);
        let name = format!("{prefix}:lib:crowd:{round}");
        crowd::run_blocking(client, &format!("{name}:blocking"), &mut f.blocking_crowd);
        for (exec, on) in execs.iter().zip(f.execs.iter_mut()) {
            crowd::run_async(
                exec,
                client,
                &format!("{name}:{}", exec.key()),
                &mut on.crowd,
            );
        }
    }
    eprintln!();
    f
}

/// (operation label, JSON key, async samples, blocking samples) of one
/// executor, in table order.
type Op<'a> = (&'static str, &'static str, &'a [Duration], &'a [Duration]);

fn ops<'a>(f: &'a AsyncFace, on: &'a OnExec) -> [Op<'a>; 4] {
    [
        (
            "acquire+release",
            "pair",
            &on.pairs.async_pair,
            &on.pairs.blocking,
        ),
        (
            "same-client hand-over",
            "same_client_handoff",
            &on.same.samples,
            &f.blocking_same,
        ),
        (
            "cross-client hand-over",
            "cross_client_handoff",
            &on.cross.samples,
            &f.blocking_cross,
        ),
        (
            "1,000 callers: gap",
            "crowd_gap",
            &on.crowd.gaps,
            &f.blocking_crowd.gaps,
        ),
    ]
}

/// Whether an async figure meets both targets against its blocking one.
fn met(a: &[Duration], b: &[Duration]) -> bool {
    ratio(p50(a), p50(b)) <= MAX_P50_RATIO && ratio(p99(a), p99(b)) <= MAX_P99_RATIO
}

fn p50_p99(v: &[Duration]) -> String {
    format!("{} / {}", fmt_us(p50(v)), fmt_us(p99(v)))
}

/// One row per operation and executor (async against blocking, p50 and
/// p99), and info rows: the async pair against the raw pair of its loop,
/// the ideal client's hand-over, the crowds' totals.
pub(crate) fn rows(t: &mut Table, f: &AsyncFace) {
    let target = format!("p50 <= {MAX_P50_RATIO}x, p99 <= {MAX_P99_RATIO}x blocking");
    for on in &f.execs {
        for (op, _, a, b) in ops(f, on) {
            t.plain_row(
                &format!("async {op}, {}", on.label),
                &p50_p99(a),
                &format!("{} (blocking)", p50_p99(b)),
                &format!(
                    "{:.2} / {:.2}",
                    ratio(p50(a), p50(b)),
                    ratio(p99(a), p99(b))
                ),
                &target,
                met(a, b),
            );
        }
        let pr = &on.pairs;
        t.info_cols(
            &format!("  (acquire / release alone, {})", on.label),
            &format!(
                "{} / {}",
                fmt_us(p50(&pr.async_acquire)),
                fmt_us(p50(&pr.async_release))
            ),
            &format!(
                "{} / {} (blocking)",
                fmt_us(p50(&pr.blocking_acquire)),
                fmt_us(p50(&pr.blocking_release))
            ),
            &format!(
                "{:.2} / {:.2}",
                ratio(p50(&pr.async_acquire), p50(&pr.blocking_acquire)),
                ratio(p50(&pr.async_release), p50(&pr.blocking_release))
            ),
            "info: p50s",
        );
        t.info_cols(
            &format!("  (async pair vs raw pair, {})", on.label),
            &p50_p99(&on.pairs.async_pair),
            &format!("{} (raw pair, same loop)", fmt_us(p50(&on.pairs.raw))),
            &format!(
                "{:.2}",
                ratio(p50(&on.pairs.async_pair), p50(&on.pairs.raw))
            ),
            "info",
        );
    }
    t.info_cols(
        "  (ideal client hand-over, async rounds)",
        &p50_p99(&f.raw_handoff),
        "-",
        "-",
        "info",
    );
    let total = |c: &Crowd| fmt_us(median(&c.totals));
    for on in &f.execs {
        t.info_cols(
            &format!("  ({CROWD} callers: all served, {})", on.label),
            &total(&on.crowd),
            &format!("{} (blocking)", total(&f.blocking_crowd)),
            &format!(
                "{:.2}",
                ratio(median(&on.crowd.totals), median(&f.blocking_crowd.totals))
            ),
            "info: median of runs",
        );
    }
}

/// The median of a few durations (zero when there are none).
fn median(v: &[Duration]) -> Duration {
    p50(v)
}

/// `async_<exec>_<op>_*` (async samples), `async_<exec>_<op>_blocking_*`
/// where the blocking samples are the executor's own (the pairs' loop),
/// `async_blocking_<op>_*` where they are shared, and the ratios.
pub(crate) fn to_json(j: &mut Json, f: &AsyncFace) {
    j.num("async_tokio_mt_workers", f.tokio_workers as f64);
    j.lat("async_raw_ideal_handoff", &f.raw_handoff);
    j.lat("async_blocking_same_client_handoff", &f.blocking_same);
    j.lat("async_blocking_cross_client_handoff", &f.blocking_cross);
    j.lat("async_blocking_crowd_gap", &f.blocking_crowd.gaps);
    j.lat("async_blocking_crowd_total", &f.blocking_crowd.totals);
    j.num("async_crowd_callers", CROWD as f64);
    let (mut met_n, mut total_n) = (0, 0);
    for on in &f.execs {
        let k = format!("async_{}", on.key);
        j.lat(&format!("{k}_pair_raw"), &on.pairs.raw);
        j.lat(&format!("{k}_pair_blocking"), &on.pairs.blocking);
        j.lat(&format!("{k}_acquire_only"), &on.pairs.async_acquire);
        j.lat(&format!("{k}_release_only"), &on.pairs.async_release);
        j.lat(
            &format!("{k}_blocking_acquire_only"),
            &on.pairs.blocking_acquire,
        );
        j.lat(
            &format!("{k}_blocking_release_only"),
            &on.pairs.blocking_release,
        );
        j.num(
            &format!("{k}_pair_p50_over_raw_p50"),
            ratio(p50(&on.pairs.async_pair), p50(&on.pairs.raw)),
        );
        for (_, op, a, b) in ops(f, on) {
            j.lat(&format!("{k}_{op}"), a);
            j.num(
                &format!("{k}_{op}_p50_over_blocking"),
                ratio(p50(a), p50(b)),
            );
            j.num(
                &format!("{k}_{op}_p99_over_blocking"),
                ratio(p99(a), p99(b)),
            );
            total_n += 1;
            met_n += usize::from(met(a, b));
        }
        j.num(
            &format!("{k}_same_client_not_parked"),
            on.same.not_parked as f64,
        );
        j.num(
            &format!("{k}_cross_client_not_parked"),
            on.cross.not_parked as f64,
        );
        j.lat(&format!("{k}_crowd_total"), &on.crowd.totals);
        j.num(&format!("{k}_crowd_short_runs"), on.crowd.short_runs as f64);
    }
    j.num(
        "async_crowd_blocking_short_runs",
        f.blocking_crowd.short_runs as f64,
    );
    j.num("async_targets_met", met_n as f64);
    j.num("async_targets_total", total_n as f64);
}
