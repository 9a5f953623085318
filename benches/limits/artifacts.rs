//! The files a run leaves under `target/redhold-limits/`: every handoff
//! sample (`handoff-latency.csv`, for `benches/plot_handoff.py`; one
//! `series` per curve) and the JSON line (`limits.json`).

use std::fmt::Write as _;
use std::time::Duration;

use crate::idle;
use crate::json::Json;
use crate::report::Figures;

/// `$CARGO_TARGET_DIR/redhold-limits`, else `target/redhold-limits` in the
/// workspace.
fn target_dir() -> std::path::PathBuf {
    crate::common::output_dir("redhold-limits")
}

/// Writes `handoff-latency.csv` and `limits.json`; a failure is reported on
/// stderr, never fatal.
pub(crate) fn write(f: &Figures, j: &Json) {
    let (lat, cold) = (&f.lat, &f.cold);
    let (raw_acq, raw_rel, raw_pub) = (&lat.raw_acq, &lat.raw_rel, &lat.raw_pub);
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
    series("library_warm_handoff", &mut lat.lib_warm.iter().copied());
    series("raw_handoff", &mut lat.raw_handoff.iter().copied());
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
    // The handoffs after an idle waiter: ideal client, same client, cross
    // client, at 1 ms and 20 ms (`ideal_idle_1ms`, ...).
    for (name, v) in idle::csv_series(lat, &f.long_idle) {
        series(&name, &mut v.iter().copied());
    }
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
