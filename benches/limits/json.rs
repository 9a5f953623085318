//! The JSON line: every figure of the run as one flat JSON object, keys in
//! the order they were added (printed as the last line on stdout and written
//! to `limits.json`).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use crate::common::percentile;
use crate::stats::sorted;

/// A flat JSON object written by hand (no serde in this crate).
#[derive(Default)]
pub(crate) struct Json {
    fields: BTreeMap<String, String>,
    order: Vec<String>,
}

impl Json {
    pub(crate) fn raw(&mut self, k: &str, v: &str) {
        if self.fields.insert(k.to_string(), v.to_string()).is_none() {
            self.order.push(k.to_string());
        }
    }
    pub(crate) fn num(&mut self, k: &str, v: f64) {
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
    pub(crate) fn opt(&mut self, k: &str, v: Option<f64>) {
        match v {
            Some(v) => self.num(k, v),
            None => self.raw(k, "null"),
        }
    }
    pub(crate) fn us(&mut self, k: &str, d: Duration) {
        self.num(k, d.as_secs_f64() * 1e6);
    }
    pub(crate) fn str(&mut self, k: &str, v: &str) {
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
    pub(crate) fn lat(&mut self, k: &str, v: &[Duration]) {
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
    pub(crate) fn finish(&self) -> String {
        let parts: Vec<String> = self
            .order
            .iter()
            .map(|k| format!("\"{k}\":{}", self.fields[k]))
            .collect();
        format!("{{{}}}", parts.join(","))
    }
}
