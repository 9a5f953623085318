//! The async face beside the async peers (issue 42), from the `peers`
//! binary's figures of the same run (`peers`): redhold's async pair
//! (`redhold_async`: `lock_async` + `unlock_async`) against rslock's and
//! rlock's async pairs, and the three libraries' cross-client hand-over
//! (`<key>_handoff_*`, `benches/peers/src/handoff.rs`).
//!
//! Targets (for a quiet machine, reported, not asserted): redhold's async
//! hand-over at least `MIN_HANDOFF_SPEEDUP` times faster (p50) than every
//! async peer's, and its async uncontended pair within `MAX_PAIR_RATIO` of
//! the fastest async peer's.

use crate::json::Json;
use crate::peers::{get, us, Peers};
use crate::table::Table;

/// Target: peer hand-over p50 / redhold's async hand-over p50, for the
/// fastest peer.
const MIN_HANDOFF_SPEEDUP: f64 = 10.0;
/// Target: redhold's async pair p50 / the fastest async peer's pair p50.
const MAX_PAIR_RATIO: f64 = 1.3;
/// (JSON key, label) of the async peers.
const ASYNC_PEERS: [(&str, &str); 2] = [
    ("rslock", "rslock 0.10"),
    ("rlock_async", "rlock 0.2 async"),
];

/// (p50, p99) in µs of `<key>_<what>_*`.
fn figure(p: &[(String, f64)], key: &str, what: &str) -> Option<(f64, f64)> {
    Some((
        get(p, &format!("{key}_{what}_p50_us"))?,
        get(p, &format!("{key}_{what}_p99_us"))?,
    ))
}

/// The fastest async peer's (label, p50, p99) for `what`.
fn fastest(p: &[(String, f64)], what: &str) -> Option<(&'static str, f64, f64)> {
    ASYNC_PEERS
        .iter()
        .filter_map(|(k, label)| figure(p, k, what).map(|(a, b)| (*label, a, b)))
        .min_by(|a, b| a.1.total_cmp(&b.1))
}

fn both(v: (f64, f64)) -> String {
    format!("{} / {}", us(v.0), us(v.1))
}

pub(crate) fn rows(t: &mut Table, p: &Peers) {
    let Ok(p) = p else { return };
    for (what, label) in [
        ("pair", "uncontended pair"),
        ("handoff", "cross-client hand-over"),
    ] {
        for (key, name) in [("redhold_async", "redhold async")]
            .iter()
            .chain(&ASYNC_PEERS)
        {
            if let Some(v) = figure(p, key, what) {
                t.info_cols(
                    &format!("peers run: {name} {label}"),
                    &both(v),
                    "-",
                    "-",
                    "info",
                );
            }
        }
    }
    if let (Some(rh), Some((label, p50, _))) =
        (figure(p, "redhold_async", "pair"), fastest(p, "pair"))
    {
        let r = rh.0 / p50;
        t.plain_row(
            "async pair vs fastest async peer",
            &both(rh),
            &format!("{} ({label})", us(p50)),
            &format!("{r:.2}"),
            &format!("p50 <= {MAX_PAIR_RATIO}x"),
            r <= MAX_PAIR_RATIO,
        );
    }
    if let (Some(rh), Some((label, p50, _))) =
        (figure(p, "redhold_async", "handoff"), fastest(p, "handoff"))
    {
        let speedup = p50 / rh.0;
        t.plain_row(
            "async hand-over vs fastest async peer",
            &both(rh),
            &format!("{} ({label})", us(p50)),
            &format!("{speedup:.1}x faster"),
            &format!(">= {MIN_HANDOFF_SPEEDUP}x faster"),
            speedup >= MIN_HANDOFF_SPEEDUP,
        );
    }
}

/// `peers_async_pair_over_fastest_peer` and
/// `peers_async_handoff_speedup_over_fastest_peer` (the peers' own figures
/// are under `peers_*` already).
pub(crate) fn to_json(j: &mut Json, p: &Peers) {
    let Ok(p) = p else { return };
    if let (Some(rh), Some((_, p50, _))) = (figure(p, "redhold_async", "pair"), fastest(p, "pair"))
    {
        j.num("peers_async_pair_over_fastest_peer", rh.0 / p50);
    }
    if let (Some(rh), Some((_, p50, _))) =
        (figure(p, "redhold_async", "handoff"), fastest(p, "handoff"))
    {
        j.num("peers_async_handoff_speedup_over_fastest_peer", p50 / rh.0);
    }
}
