//! Neither side ever enters while the other holds: threads on both sides
//! run critical sections on shared counters (see the Java driver's `hammer`
//! and `RustSide::hammer`). An `inside` counter must read 1 in every
//! exclusive section, a reader must never see a writer inside, and the
//! counter, incremented with a separate GET and SET, must lose no update.

use std::time::Duration;

use super::{Ctx, Report};
use crate::side::{Kind, Op, Side};

/// How long one mixed run may take before it counts as stuck.
const LIMIT: Duration = Duration::from_secs(240);

/// One thread's share: which side, which kind, how many sections, and the
/// lock's name when it is not the check's own (a multi-lock's names).
pub struct Worker<'a> {
    pub side: &'a dyn Side,
    pub kind: Kind,
    pub sections: usize,
    pub name: Option<String>,
}

/// How a mixed run went, once it is known that nobody overlapped.
pub struct Mixed {
    /// One line: the sections each side ran, no overlap, no lost update.
    pub summary: String,
    /// Per worker, in order: the longest and the median wait for the lock
    /// of its sections, in µs.
    pub waits: Vec<(u64, u64)>,
    /// Per worker, in order: each section's call (wall clock, µs since the
    /// epoch), its wait for the lock and how long it held it (µs).
    pub times: Vec<Vec<Section>>,
}

/// Runs `workers` at once on the check's lock (`check` names it) and fails
/// on any overlap or lost update. The counters' keys carry
/// [`COUNTERS_TAG`](super::COUNTERS_TAG), so that on a cluster they all
/// live on the node redhold's side counts on.
pub fn hammer(ctx: &Ctx<'_>, check: &str, workers: &[Worker<'_>]) -> Result<Mixed, String> {
    let name = ctx.name(check);
    let prefix = format!("{}:{name}:counters", super::COUNTERS_TAG);
    let pending: Vec<_> = workers
        .iter()
        .enumerate()
        .map(|(i, w)| {
            let op = Op::Hammer {
                kind: w.kind,
                name: w.name.clone().unwrap_or_else(|| name.clone()),
                n: w.sections,
                prefix: prefix.clone(),
            };
            w.side.call(&format!("{name}/{i}"), op)
        })
        .collect();
    let mut problems = Vec::new();
    let mut waits = Vec::new();
    let mut times = Vec::new();
    for (w, p) in workers.iter().zip(pending) {
        let reply = p.wait(LIMIT)?;
        let violations = reply.number(0)?;
        let wait = |index| reply.number(index).map(|us| u64::try_from(us).unwrap_or(0));
        waits.push((wait(2)?, wait(3)?));
        times.push(section_times(reply.data.split(' ').nth(4).unwrap_or(""))?);
        if violations != 0 {
            problems.push(format!(
                "{} {}: {violations} violations, first: {}",
                w.side.label(),
                w.kind.word(),
                reply
                    .data
                    .split(' ')
                    .nth(5)
                    .unwrap_or("?")
                    .replace('_', " ")
            ));
        }
    }
    let exclusive: usize = workers
        .iter()
        .filter(|w| w.kind != Kind::Read)
        .map(|w| w.sections)
        .sum();
    let total: usize = workers.iter().map(|w| w.sections).sum();
    let counter: Option<i64> = ctx
        .redis
        .at(&prefix, redis::cmd("GET").arg(format!("{prefix}:counter")))?;
    if counter.unwrap_or(0) != i64::try_from(exclusive).unwrap_or(-1) {
        problems.push(format!(
            "the counter reads {counter:?} after {exclusive} exclusive sections: updates were lost"
        ));
    }
    if !problems.is_empty() {
        return Err(problems.join("; "));
    }
    let by_side = |label: &str| -> usize {
        workers
            .iter()
            .filter(|w| w.side.label() == label)
            .map(|w| w.sections)
            .sum()
    };
    let summary = format!(
        "{total} sections ({} java, {} rust; every third re-entered), no overlap, no lost update",
        by_side("java"),
        by_side("rust")
    );
    Ok(Mixed {
        summary,
        waits,
        times,
    })
}

/// One section's times, in µs.
#[derive(Clone, Copy, Debug)]
pub struct Section {
    /// When the call that took the lock was made (wall clock, since the epoch).
    pub asked: u64,
    /// How long it waited for the lock.
    pub took: u64,
    /// From holding the lock until the unlock returned.
    pub held: u64,
}

impl Section {
    /// When it got the lock (wall clock, µs since the epoch).
    pub fn got(&self) -> u64 {
        self.asked.saturating_add(self.took)
    }

    /// When its unlock returned (wall clock, µs since the epoch).
    pub fn gave_back(&self) -> u64 {
        self.got().saturating_add(self.held)
    }
}

/// A hammer reply's `ASKED_US:TOOK_US:HELD_US,...` (`-` for none).
fn section_times(word: &str) -> Result<Vec<Section>, String> {
    if word == "-" {
        return Ok(Vec::new());
    }
    word.split(',')
        .map(|triple| {
            let mut parts = triple.split(':').map(|n| n.parse().ok());
            Some(Section {
                asked: parts.next()??,
                took: parts.next()??,
                held: parts.next()??,
            })
        })
        .collect::<Option<Vec<_>>>()
        .ok_or_else(|| format!("expected ASKED:TOOK:HELD triples, got {word:?}"))
}

/// [`hammer`], for a check that looks only at exclusion.
fn mixed(ctx: &Ctx<'_>, check: &str, workers: &[Worker<'_>]) -> Result<String, String> {
    hammer(ctx, check, workers).map(|run| run.summary)
}

pub fn run(ctx: &Ctx<'_>, report: &mut Report) {
    let (j, r): (&dyn Side, &dyn Side) = (ctx.java, ctx.rust);
    let w = |side, kind, sections| Worker {
        side,
        kind,
        sections,
        name: None,
    };
    report.check(
        format!("{} exclusion plain: 2 java + 2 rust threads", ctx.topo),
        || {
            let n = 750;
            mixed(
                ctx,
                "exclusion-plain",
                &[
                    w(j, Kind::Plain, n),
                    w(r, Kind::Plain, n),
                    w(j, Kind::Plain, n),
                    w(r, Kind::Plain, n),
                ],
            )
        },
    );
    report.check(
        format!(
            "{} exclusion fenced+plain: java fenced, rust fenced, java plain, rust plain",
            ctx.topo
        ),
        || {
            let n = 200;
            mixed(
                ctx,
                "exclusion-fenced",
                &[
                    w(j, Kind::Fenced, n),
                    w(r, Kind::Fenced, n),
                    w(j, Kind::Plain, n),
                    w(r, Kind::Plain, n),
                ],
            )
        },
    );
    report.check(
        format!("{} exclusion multi+plain: a multi-lock over two names and a plain lock on one of them, each side", ctx.topo),
        || {
            let n = 200;
            let base = ctx.name("exclusion-multi");
            let multi = format!("{base}-a,{base}-b");
            let one = format!("{base}-b");
            let named = |side, kind, name: &String| Worker {
                side,
                kind,
                sections: n,
                name: Some(name.clone()),
            };
            mixed(ctx, "exclusion-multi", &[named(j, Kind::Multi, &multi), named(r, Kind::Multi, &multi), named(j, Kind::Plain, &one), named(r, Kind::Plain, &one)])
        },
    );
    report.check(
        format!("{} exclusion fair: 2 java + 2 rust threads", ctx.topo),
        || {
            let n = 150;
            mixed(
                ctx,
                "exclusion-fair",
                &[
                    w(j, Kind::Fair, n),
                    w(r, Kind::Fair, n),
                    w(j, Kind::Fair, n),
                    w(r, Kind::Fair, n),
                ],
            )
        },
    );
    report.check(
        format!(
            "{} exclusion read-write: a writer and a reader on each side",
            ctx.topo
        ),
        || {
            let n = 250;
            mixed(
                ctx,
                "exclusion-rw",
                &[
                    w(j, Kind::Write, n),
                    w(r, Kind::Write, n),
                    w(j, Kind::Read, n),
                    w(r, Kind::Read, n),
                ],
            )
        },
    );
}
