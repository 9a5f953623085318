//! Handoff after the waiter sat idle, against the ideal client.
//!
//! Three handoffs, each with the waiter parked for a while before the holder
//! releases: the ideal client (`raw::handoff_direct`: the `redis` crate
//! alone, the waiter blocked in `get_message` on its own subscribed
//! connection), the library with holder and waiter two threads of one
//! `Client` ("same client", the local handoff), and the library with the
//! waiter on a second `Client` ("cross client": own UUID, own subscriber
//! thread; what another process looks like).
//!
//! Idle 1 ms: measured in the latency rounds (`rounds`), the same samples as
//! the raw handoff and the warm handoff. Idle 20 ms: measured here, in
//! `LONG_ROUNDS` alternating rounds; each sample costs 20 ms of waiting, so
//! they get fewer samples (`long_samples`).

use std::time::Duration;

use redhold::Client;

use crate::handoff::{self, LONG_PARK};
use crate::json::Json;
use crate::raw;
use crate::rounds::Latencies;
use crate::stats::{p50, p99, ratio};
use crate::table::Table;

const LONG_ROUNDS: usize = 5;
/// Target: the local handoff beats the ideal client (no round trip through
/// the server's pub/sub needed), p50 <= this x ideal.
const SAME_CLIENT_MAX_RATIO: f64 = 0.6;
/// Target: across clients, p50 <= this x ideal ...
const CROSS_CLIENT_MAX_RATIO: f64 = 1.15;
/// ... and p99 <= this x the ideal p99.
const CROSS_CLIENT_MAX_P99_RATIO: f64 = 2.0;

/// The three handoffs with the waiter idle 20 ms.
#[derive(Default)]
pub(crate) struct LongIdle {
    pub(crate) ideal: Vec<Duration>,
    pub(crate) same: Vec<Duration>,
    pub(crate) cross: Vec<Duration>,
}

/// Samples per 20 ms curve: a tenth of `samples`, at least 50, at most 400
/// (400 x 3 curves x ~21 ms = ~25 s).
fn long_samples(samples: usize) -> usize {
    (samples / 10).clamp(50, 400)
}

/// The handoffs with the waiter idle `LONG_PARK` (20 ms), in alternating
/// rounds: ideal client, same client, cross client (`other` is the waiter's
/// client).
pub(crate) fn long(
    url: &str,
    client: &Client,
    other: &Client,
    prefix: &str,
    samples: usize,
) -> LongIdle {
    let per_round = long_samples(samples).div_ceil(LONG_ROUNDS);
    eprintln!(
        "handoff, waiter idle {} ms: {LONG_ROUNDS} rounds x {per_round} samples of ideal client, \
         lib same client, lib cross client",
        LONG_PARK.as_millis()
    );
    let mut l = LongIdle::default();
    let (same_name, cross_name) = (
        format!("{prefix}:lib:idle-long:same"),
        format!("{prefix}:lib:idle-long:cross"),
    );
    for round in 0..LONG_ROUNDS {
        eprint!("  round {}/{LONG_ROUNDS}\r", round + 1);
        let (h, _) = raw::handoff_direct(url, prefix, per_round, LONG_PARK);
        l.ideal.extend(h);
        let (h, _) = handoff::warm(client, client, &same_name, per_round, LONG_PARK);
        l.same.extend(h);
        let (h, _) = handoff::warm(client, other, &cross_name, per_round, LONG_PARK);
        l.cross.extend(h);
    }
    eprintln!();
    l
}

/// One idle time's curves: (idle label, ideal, same client, cross client).
type Curves<'a> = (&'static str, &'a [Duration], &'a [Duration], &'a [Duration]);

/// The six curves, by idle time.
fn curves<'a>(lat: &'a Latencies, long: &'a LongIdle) -> [Curves<'a>; 2] {
    [
        ("1ms", &lat.raw_handoff, &lat.lib_warm, &lat.lib_cross),
        ("20ms", &long.ideal, &long.same, &long.cross),
    ]
}

/// Table rows: the ideal client (info), then the library on one client and
/// across two clients, each against the ideal at the same idle time.
pub(crate) fn rows(t: &mut Table, lat: &Latencies, long: &LongIdle) {
    for (idle, ideal, same, cross) in curves(lat, long) {
        let idle = idle.replace("ms", " ms");
        let (ideal_p50, ideal_p99) = (p50(ideal), p99(ideal));
        let label = format!("ideal {idle}");
        t.lat_row(
            &format!("ideal client handoff, idle {idle}"),
            ideal,
            Duration::ZERO,
            "",
            "info",
            true,
        );
        t.lat_row(
            &format!("same-client handoff, idle {idle}"),
            same,
            ideal_p50,
            &label,
            &format!("p50 <= {SAME_CLIENT_MAX_RATIO}x"),
            ratio(p50(same), ideal_p50) <= SAME_CLIENT_MAX_RATIO,
        );
        t.lat_row(
            &format!("cross-client handoff, idle {idle}"),
            cross,
            ideal_p50,
            &label,
            &format!(
                "p50 <= {CROSS_CLIENT_MAX_RATIO}x, p99 <= {CROSS_CLIENT_MAX_P99_RATIO}x ideal p99"
            ),
            ratio(p50(cross), ideal_p50) <= CROSS_CLIENT_MAX_RATIO
                && ratio(p99(cross), ideal_p99) <= CROSS_CLIENT_MAX_P99_RATIO,
        );
    }
}

/// `handoff_idle_<1ms|20ms>_<ideal|same_client|cross_client>_*` and the
/// ratios the targets read. The 1 ms ideal and same-client curves are the
/// samples of `raw_handoff_direct_*` and `lib_warm_handoff_*`.
pub(crate) fn to_json(j: &mut Json, lat: &Latencies, long: &LongIdle) {
    for (idle, ideal, same, cross) in curves(lat, long) {
        let k = format!("handoff_idle_{idle}");
        j.lat(&format!("{k}_ideal"), ideal);
        j.lat(&format!("{k}_same_client"), same);
        j.lat(&format!("{k}_cross_client"), cross);
        j.num(
            &format!("{k}_same_client_p50_over_ideal"),
            ratio(p50(same), p50(ideal)),
        );
        j.num(
            &format!("{k}_cross_client_p50_over_ideal"),
            ratio(p50(cross), p50(ideal)),
        );
        j.num(
            &format!("{k}_cross_client_p99_over_ideal_p99"),
            ratio(p99(cross), p99(ideal)),
        );
    }
}

/// The curves for `handoff-latency.csv`: (series name, samples).
pub(crate) fn csv_series<'a>(
    lat: &'a Latencies,
    long: &'a LongIdle,
) -> Vec<(String, &'a [Duration])> {
    let mut out = Vec::new();
    for (idle, ideal, same, cross) in curves(lat, long) {
        out.push((format!("ideal_idle_{idle}"), ideal));
        out.push((format!("same_client_idle_{idle}"), same));
        out.push((format!("cross_client_idle_{idle}"), cross));
    }
    out
}
