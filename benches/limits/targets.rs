//! The targets the library is held to: one table row per figure, with the
//! raw bound it is compared with and the criterion it must meet.

use std::time::Duration;

use crate::idle;
use crate::interleaved;
use crate::peers;
use crate::report::Figures;
use crate::share;
use crate::stats::{p50, p99, ratio};
use crate::table::Table;

pub(crate) fn table(f: &Figures) -> Table {
    let (lat, cold, fair, wd) = (&f.lat, &f.cold, &f.fair, &f.wd);
    let uncontended_bound = lat.uncontended_bound();
    let handoff_bound = lat.handoff_bound();
    let raw_acq_p50 = p50(&lat.raw_acq);
    let warm_target_p50 = handoff_bound.mul_f64(1.5);
    let handoff_target_per_s = 0.5 / handoff_bound.as_secs_f64();
    let parked_pct = f.parked.pct_schedstat.unwrap_or(f.parked.pct_ticks);
    let (lib_pairs_s, raw_pairs_s) = (f.tput.lib_pairs_s, f.tput.raw_pairs_s);
    let mut t = Table::default();
    // Separate loops: on a VM that halts idle vCPUs the two loops can land
    // on different vCPUs, so this ratio can measure placement. The
    // interleaved row below is the fair comparison.
    t.lat_row(
        "uncontended lock()+drop (own loop)",
        &lat.lib_unc,
        uncontended_bound,
        "raw acq+rel",
        "p50 <= 1.15x",
        ratio(p50(&lat.lib_unc), uncontended_bound) <= 1.15,
    );
    interleaved::rows(&mut t, &lat.inter);
    t.lat_row(
        "reentrant lock() while held",
        &lat.lib_re,
        raw_acq_p50,
        "raw acq",
        "p50 <= 1.15x",
        ratio(p50(&lat.lib_re), raw_acq_p50) <= 1.15,
    );
    t.lat_row(
        "warm handoff (parked waiter)",
        &lat.lib_warm,
        handoff_bound,
        "rel+pub+acq",
        "p50 <= 1.5x, p99 <= 2 ms",
        p50(&lat.lib_warm) <= warm_target_p50 && p99(&lat.lib_warm) <= Duration::from_millis(2),
    );
    t.lat_row(
        "  (vs hand-rolled raw handoff)",
        &lat.lib_warm,
        p50(&lat.raw_handoff),
        "raw handoff",
        "info",
        true,
    );
    idle::rows(&mut t, lat, &f.long_idle);
    crate::synchronizers::rows(&mut t, lat, &f.semaphores);
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
    share::rows(&mut t, &f.share);
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
    peers::rows(&mut t, &f.peers);
    crate::async_face::rows(&mut t, &f.async_face);
    crate::peers_async::rows(&mut t, &f.peers);
    t
}
