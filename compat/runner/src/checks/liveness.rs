//! A Redisson waiter gets its turn as promptly as a redhold one: two Java
//! and two redhold threads hammer one plain lock (the exclusion check's
//! sections), and the longest any Java thread waited for the lock must stay
//! within [`RATIO`] times the longest any redhold thread waited.
//!
//! redhold hands the lock straight from one of its threads to the next and
//! announces it only now and then; a Java waiter, woken by that
//! announcement a pub/sub hop and a JVM wake-up later, must still find the
//! lock free often enough. Longest waits, not medians: starvation shows in
//! the tail. Both sides run in the same noise (one machine), so a ratio of
//! the two is what is checked, never a time.

use super::exclusion::{hammer, Worker};
use super::{ms, Ctx, Report};
use crate::side::{Kind, Side};

/// Sections per thread. Enough that each side's longest wait is a turn it
/// lost to the other side, not one scheduler hiccup: with a few hundred
/// sections a thread, both sides see the machine's hiccups alike.
const SECTIONS: usize = 400;

/// Sections per thread of the warm-up run before it, not measured: a fresh
/// JVM's first lock calls load classes and compile code.
const WARM_UP: usize = 40;

/// Java's longest wait may be at most this many times redhold's.
const RATIO: u64 = 2;

pub fn run(ctx: &Ctx<'_>, report: &mut Report) {
    report.check(
        format!(
            "{} liveness plain: 2 java + 2 rust threads, java's longest wait ≤ {RATIO}× rust's",
            ctx.topo
        ),
        || {
            let (j, r): (&dyn Side, &dyn Side) = (ctx.java, ctx.rust);
            let w = |side, sections| Worker {
                side,
                kind: Kind::Plain,
                sections,
                name: None,
            };
            let workers = |n| [w(j, n), w(r, n), w(j, n), w(r, n)];
            hammer(ctx, "liveness-warm-up", &workers(WARM_UP))?;
            let run = hammer(ctx, "liveness-plain", &workers(SECTIONS))?;
            let side = |label: &str| -> (u64, Vec<u64>) {
                let mine = workers(SECTIONS)
                    .iter()
                    .zip(&run.waits)
                    .filter(|(w, _)| w.side.label() == label)
                    .map(|(_, wait)| *wait)
                    .collect::<Vec<_>>();
                let longest = mine.iter().map(|(longest, _)| *longest).max().unwrap_or(0);
                (longest, mine.iter().map(|(_, median)| *median).collect())
            };
            let ((java, java_medians), (rust, rust_medians)) = (side("java"), side("rust"));
            let medians = |m: &[u64]| m.iter().map(|us| ms(*us)).collect::<Vec<_>>().join(", ");
            let detail = format!(
                "longest wait java {} (medians {}), rust {} (medians {}); {}",
                ms(java),
                medians(&java_medians),
                ms(rust),
                medians(&rust_medians),
                run.summary
            );
            if java > RATIO * rust {
                return Err(format!(
                    "java waited {:.1}× as long as rust at most (limit {RATIO}×): {detail}",
                    java as f64 / rust.max(1) as f64
                ));
            }
            Ok(detail)
        },
    );
}
