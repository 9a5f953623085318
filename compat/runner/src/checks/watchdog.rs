//! Watchdogs: a lock taken without a lease outlives its watchdog timeout
//! while its holder lives, on either side; a killed Java driver's lock
//! expires and a parked Rust waiter gets it.

use std::thread;
use std::time::{Duration, Instant};

use super::{Ctx, Report, T};
use crate::side::{Kind, Side};

/// The holder keeps its lock this many watchdog timeouts while the other
/// side waits.
const TIMEOUTS: u32 = 2;

/// Redisson's batched read-lock renewal (`ReadLockTask`, from 3.44.0)
/// renews the hash but, its inner loop reusing the outer loop's variable,
/// not the holds' `rwlock_timeout` keys; fixed in 4.0.0. A documented
/// difference of those releases (docs/wire-format.md).
const READ_RENEWAL_BROKEN: std::ops::Range<(u32, u32, u32)> = (3, 44, 0)..(4, 0, 0);

fn outlives(
    ctx: &Ctx<'_>,
    holder: &dyn Side,
    waiter: &dyn Side,
    kind: Kind,
) -> Result<String, String> {
    let name = ctx.name(&format!("watchdog-{}-{}", kind.word(), holder.label()));
    let (h, w) = (format!("{name}/h"), format!("{name}/w"));
    let other = if kind == Kind::Read {
        Kind::Write
    } else {
        kind
    };
    holder.lock(&h, kind, &name, None).wait(T)?;
    let hold = ctx.watchdog * TIMEOUTS + ctx.watchdog / 2;
    let wait_ms = u64::try_from(hold.as_millis()).unwrap_or(u64::MAX);
    let started = Instant::now();
    let tried = waiter
        .try_lock(&w, other, &name, wait_ms, None)
        .wait(hold + T)?;
    let waited = started.elapsed();
    if tried.is_true() {
        return Err(format!(
            "the {} waiter got in after {:.1} s: the {} holder's watchdog did not keep the lock",
            waiter.label(),
            waited.as_secs_f64(),
            holder.label()
        ));
    }
    let pttl = ctx.pttl(&name)?;
    if pttl <= 0 {
        return Err(format!(
            "after {:.1} s the lock's PTTL is {pttl}",
            waited.as_secs_f64()
        ));
    }
    if kind == Kind::Read {
        // The read hold's own timeout key must be renewed with the hash.
        let base = if name.contains('{') {
            name.clone()
        } else {
            format!("{{{name}}}")
        };
        let holds = ctx.redis.keys(&format!("{base}:*:rwlock_timeout:*"))?;
        let broken = holder.label() == "java" && READ_RENEWAL_BROKEN.contains(&ctx.redisson);
        match (holds.is_empty(), broken) {
            (true, false) => {
                return Err(
                    "the read hold's rwlock_timeout key expired while the hash lived".into(),
                )
            }
            (false, true) => {
                return Err(
                    "the read hold's rwlock_timeout key was renewed: Redisson's ReadLockTask \
                     is fixed in this release; update docs/wire-format.md"
                        .into(),
                )
            }
            (true, true) => {
                holder.unlock(&h, kind, &name).wait(T)?;
                return Ok(format!(
                    "difference (documented): Redisson 3.44-3.52's watchdog renewed the hash \
                     (PTTL {pttl} ms after {:.1} s) but let the hold's rwlock_timeout key expire",
                    waited.as_secs_f64()
                ));
            }
            (false, false) => {}
        }
    }
    holder.unlock(&h, kind, &name).wait(T)?;
    let got = waiter.try_lock(&w, other, &name, 2_000, None).wait(T)?;
    if !got.is_true() {
        return Err("the waiter could not take the lock after the release".into());
    }
    waiter.unlock(&w, other, &name).wait(T)?;
    Ok(format!(
        "{} held {} with a {:.0} s watchdog for {:.1} s while {} waited; PTTL still {pttl} ms",
        holder.label(),
        kind.word(),
        ctx.watchdog.as_secs_f64(),
        waited.as_secs_f64(),
        waiter.label()
    ))
}

/// Both sides, plain and read locks, at once (each takes several seconds
/// of waiting and almost no CPU).
pub fn run(ctx: &Ctx<'_>, report: &mut Report) {
    let mut cases = Vec::new();
    for kind in [Kind::Plain, Kind::Read] {
        for (holder, waiter) in ctx.directions() {
            let title = format!(
                "{} watchdog {}: {} lock outlives its watchdog timeout, {} waits",
                ctx.topo,
                kind.word(),
                holder.label(),
                waiter.label()
            );
            if report.wants(&title) {
                cases.push((title, holder, waiter, kind));
            }
        }
    }
    let results: Vec<_> = thread::scope(|s| {
        let handles: Vec<_> = cases
            .iter()
            .map(|(_, holder, waiter, kind)| {
                s.spawn(move || {
                    let started = Instant::now();
                    (outlives(ctx, *holder, *waiter, *kind), started.elapsed())
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|p| {
                    (
                        Err(format!("panicked: {}", super::panic_text(&p))),
                        Duration::ZERO,
                    )
                })
            })
            .collect()
    });
    for ((title, ..), (outcome, took)) in cases.iter().zip(results) {
        report.record(title, outcome, took);
    }
}

/// Kills the Java driver while it holds a lock a Rust thread waits for.
/// Run last on a topology: the driver is gone afterwards.
pub fn killed_driver(ctx: &Ctx<'_>, report: &mut Report) {
    let title = format!(
        "{} watchdog: a killed java driver's lock expires, the parked rust waiter gets it",
        ctx.topo
    );
    report.check(title, || {
        let name = ctx.name("killed-driver");
        let (h, w) = (format!("{name}/h"), format!("{name}/w"));
        ctx.java.lock(&h, Kind::Plain, &name, None).wait(T)?;
        let field: Vec<String> = ctx.redis.at(&name, redis::cmd("HKEYS").arg(&name))?;
        let mut pending = ctx.rust.lock(&w, Kind::Plain, &name, None);
        ctx.wait_parked(Kind::Plain, &name, &mut pending)?;
        // Past one renewal, so the TTL seen at the kill is a renewed one.
        thread::sleep(ctx.watchdog / 2);
        let ttl_at_kill = ctx.pttl(&name)?;
        ctx.java.kill();
        let killed = Instant::now();
        pending.wait(ctx.watchdog + T)?;
        let took = killed.elapsed();
        ctx.rust.unlock(&w, Kind::Plain, &name).wait(T)?;
        if took > ctx.watchdog + Duration::from_millis(500) {
            return Err(format!(
                "the waiter got the lock {:.2} s after the kill, more than the {:.0} s watchdog timeout",
                took.as_secs_f64(),
                ctx.watchdog.as_secs_f64()
            ));
        }
        if took < Duration::from_millis(200) {
            return Err(format!(
                "the waiter got the lock {} ms after the kill: something released it",
                took.as_millis()
            ));
        }
        Ok(format!(
            "java ({}) held it with PTTL {ttl_at_kill} ms at the kill; rust held it {:.2} s later",
            field.first().map(String::as_str).unwrap_or("?"),
            took.as_secs_f64()
        ))
    });
}
