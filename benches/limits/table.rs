//! The results table: one row per figure with the library's value, the raw
//! bound it is compared with, their ratio, the target and whether it was
//! met; it also counts the targets met.

use std::fmt::Write as _;
use std::time::Duration;

use crate::common::percentile;
use crate::stats::{fmt_us, ratio, sorted};

#[derive(Default)]
pub(crate) struct Table {
    rows: Vec<[String; 7]>,
    pub(crate) met: usize,
    pub(crate) total: usize,
}

impl Table {
    fn push(&mut self, row: [String; 7], ok: bool, counts: bool) {
        if counts {
            self.total += 1;
            if ok {
                self.met += 1;
            }
        }
        self.rows.push(row);
    }
    pub(crate) fn lat_row(
        &mut self,
        op: &str,
        lib: &[Duration],
        raw: Duration,
        raw_label: &str,
        target: &str,
        ok: bool,
    ) {
        let s = sorted(lib);
        let (p50, p99) = (percentile(&s, 0.5), percentile(&s, 0.99));
        let info = target == "info";
        self.push(
            [
                op.to_string(),
                format!("{} / {}", fmt_us(p50), fmt_us(p99)),
                if raw.is_zero() {
                    "-".into()
                } else {
                    format!("{} ({raw_label})", fmt_us(raw))
                },
                if raw.is_zero() {
                    "-".into()
                } else {
                    format!("{:.2}", ratio(p50, raw))
                },
                if info { "-".into() } else { target.into() },
                if info { "-".into() } else { yes_no(ok) },
                String::new(),
            ],
            ok,
            !info,
        );
    }
    pub(crate) fn rate_row(&mut self, op: &str, lib: f64, raw: f64, target: &str, ok: bool) {
        self.push(
            [
                op.to_string(),
                format!("{lib:.0}"),
                format!("{raw:.0}"),
                format!("{:.2}", lib / raw),
                target.into(),
                yes_no(ok),
                String::new(),
            ],
            ok,
            true,
        );
    }
    pub(crate) fn plain_row(
        &mut self,
        op: &str,
        lib: &str,
        raw: &str,
        ratio: &str,
        target: &str,
        ok: bool,
    ) {
        self.push(
            [
                op.to_string(),
                lib.to_string(),
                if raw.is_empty() {
                    "-".into()
                } else {
                    raw.into()
                },
                if ratio.is_empty() {
                    "-".into()
                } else {
                    ratio.into()
                },
                target.into(),
                yes_no(ok),
                String::new(),
            ],
            ok,
            true,
        );
    }
    /// A row with every column given that does not count towards the
    /// met/total tally.
    pub(crate) fn info_cols(&mut self, op: &str, lib: &str, raw: &str, ratio: &str, note: &str) {
        self.push(
            [
                op.to_string(),
                lib.to_string(),
                raw.to_string(),
                ratio.to_string(),
                note.into(),
                "-".into(),
                String::new(),
            ],
            true,
            false,
        );
    }
    /// A row that does not count towards the met/total tally.
    pub(crate) fn info_row(&mut self, op: &str, lib: &str, note: &str) {
        self.push(
            [
                op.to_string(),
                lib.to_string(),
                "-".into(),
                "-".into(),
                note.into(),
                "-".into(),
                String::new(),
            ],
            true,
            false,
        );
    }
    pub(crate) fn print(&self) {
        let header = [
            "operation",
            "library p50 / p99",
            "raw p50 (bound)",
            "ratio",
            "target",
            "met?",
        ];
        let mut w = [0usize; 6];
        for (i, h) in header.iter().enumerate() {
            w[i] = h.chars().count();
        }
        for r in &self.rows {
            for i in 0..6 {
                w[i] = w[i].max(r[i].chars().count());
            }
        }
        let line = |cells: [&str; 6]| {
            let mut s = String::from("|");
            for i in 0..6 {
                let pad = w[i] - cells[i].chars().count();
                let _ = write!(s, " {}{} |", cells[i], " ".repeat(pad));
            }
            println!("{s}");
        };
        line(header);
        let dashes: Vec<String> = w.iter().map(|n| "-".repeat(*n)).collect();
        line([
            &dashes[0], &dashes[1], &dashes[2], &dashes[3], &dashes[4], &dashes[5],
        ]);
        for r in &self.rows {
            line([&r[0], &r[1], &r[2], &r[3], &r[4], &r[5]]);
        }
    }
}

fn yes_no(ok: bool) -> String {
    if ok { "yes" } else { "NO" }.to_string()
}
