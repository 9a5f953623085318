//! Summaries of latency samples: percentiles, ratios and how a duration is
//! printed.

use std::time::Duration;

use crate::common::percentile;

pub(crate) fn sorted(v: &[Duration]) -> Vec<Duration> {
    let mut s = v.to_vec();
    s.sort();
    s
}
pub(crate) fn p50(v: &[Duration]) -> Duration {
    percentile(&sorted(v), 0.50)
}
pub(crate) fn p99(v: &[Duration]) -> Duration {
    percentile(&sorted(v), 0.99)
}
/// `a / b`; NaN when `b` is zero.
pub(crate) fn ratio(a: Duration, b: Duration) -> f64 {
    if b.is_zero() {
        f64::NAN
    } else {
        a.as_secs_f64() / b.as_secs_f64()
    }
}
/// `47 µs`, or `12.3 ms` from 10 ms up.
pub(crate) fn fmt_us(d: Duration) -> String {
    let us = d.as_secs_f64() * 1e6;
    if us >= 10_000.0 {
        format!("{:.1} ms", us / 1e3)
    } else {
        format!("{us:.0} µs")
    }
}
