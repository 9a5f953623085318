//! A Redisson client gets its turn as promptly as a redhold one: two Java
//! and two redhold threads hammer one plain lock (the exclusion check's
//! sections), and the longest a side waited for its turn must stay within
//! [`RATIO`] times the other side's.
//!
//! redhold hands the lock straight from one of its threads to the next and
//! announces it only now and then; a Java waiter, woken by that
//! announcement a pub/sub hop and a JVM wake-up later, must still get in
//! at such an announcement, not only once every redhold section is done.
//!
//! What is compared is each side's wait *for its turn*: for every section,
//! from the later of its call and the last time another thread of the same
//! side took the lock, until it got the lock; a side's longest such wait is
//! the longest it went without the lock while one of its threads asked. A
//! thread's own wait (also printed, longest and medians) includes the turns
//! its sibling took, and Redisson's siblings are not fair to each other:
//! a Java thread that releases and locks again at once beats the other
//! Java thread's woken waiter (runs of 9 and of 190 sections by one Java
//! thread were seen, once the other Java thread and both redhold threads
//! waited 200 ms), so a thread's longest wait measures Redisson as much as
//! redhold. Longest, not median: starvation shows in the tail. Both sides
//! run in the same noise (one machine), so a ratio is what is checked,
//! never a time.

use super::exclusion::{hammer, Worker};
use super::{ms, Ctx, Report};
use crate::side::{Kind, Side};

/// Sections per thread. A few hundred: each side's longest wait for its
/// turn is then a turn lost to the other side (redhold runs up to 8 direct
/// hand-overs between announcements), not one scheduler hiccup, and the
/// run still takes about 2 s.
const SECTIONS: usize = 400;

/// Sections per thread of the warm-up run before it, not measured: a fresh
/// JVM's first lock calls load classes and compile code.
const WARM_UP: usize = 40;

/// A side's longest wait for its turn may be at most this many times the
/// other side's (checked for Java against redhold).
const RATIO: u64 = 2;

pub fn run(ctx: &Ctx<'_>, report: &mut Report) {
    report.check(
        format!(
            "{} liveness plain: 2 java + 2 rust threads, java's longest wait for its turn ≤ {RATIO}× rust's",
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
            let labels: Vec<&str> = workers(0).iter().map(|w| w.side.label()).collect();
            let side = |label: &str| -> Waits {
                let mine = || labels.iter().enumerate().filter(|(_, l)| **l == label);
                Waits {
                    turn: longest_turn_wait(mine().map(|(i, _)| run.times[i].as_slice())),
                    longest: mine().map(|(i, _)| run.waits[i].0).max().unwrap_or(0),
                    medians: mine()
                        .map(|(i, _)| ms(run.waits[i].1))
                        .collect::<Vec<_>>()
                        .join(", "),
                }
            };
            let (java, rust) = (side("java"), side("rust"));
            let detail = format!(
                "longest wait for a turn java {}, rust {}; longest wait of a thread java {} (medians {}), rust {} (medians {}); {}",
                ms(java.turn),
                ms(rust.turn),
                ms(java.longest),
                java.medians,
                ms(rust.longest),
                rust.medians,
                run.summary
            );
            if java.turn > RATIO * rust.turn {
                return Err(format!(
                    "java waited {:.1}× as long as rust for its turn (limit {RATIO}×): {detail}",
                    java.turn as f64 / rust.turn.max(1) as f64
                ));
            }
            Ok(detail)
        },
    );
}

/// One side's waits, in µs.
struct Waits {
    /// The longest it went without the lock while one of its threads asked.
    turn: u64,
    /// The longest one of its threads waited.
    longest: u64,
    /// Each thread's median wait, for the check line.
    medians: String,
}

/// The longest wait for a turn among one side's threads, each given as its
/// sections' `(asked, took)` in µs: per section, from the later of its call
/// and the side's previous acquisition until its own.
fn longest_turn_wait<'a>(threads: impl Iterator<Item = &'a [(u64, u64)]>) -> u64 {
    let mut sections: Vec<(u64, u64)> = threads
        .flatten()
        .map(|&(asked, took)| (asked.saturating_add(took), asked))
        .collect();
    sections.sort_unstable();
    let mut previous: Option<u64> = None;
    let mut longest = 0;
    for (got, asked) in sections {
        let from = previous.map_or(asked, |p| p.max(asked));
        longest = longest.max(got.saturating_sub(from));
        previous = Some(got);
    }
    longest
}

#[cfg(test)]
mod tests {
    use super::longest_turn_wait;

    #[test]
    fn a_sibling_turn_restarts_the_wait() {
        // Thread a asks at 0 and gets in at 100; b gets in at 40 and 70:
        // the side waited at most 40 (0 to 40) for its turn.
        let a = [(0, 100)];
        let b = [(0, 40), (45, 25)];
        assert_eq!(longest_turn_wait([&a[..], &b[..]].into_iter()), 40);
    }

    #[test]
    fn a_wait_counts_from_the_call_when_the_side_was_in_before() {
        let a = [(0, 10), (50, 30)];
        assert_eq!(longest_turn_wait([&a[..]].into_iter()), 30);
    }
}
