//! One side holds, the other side's waiter is parked, the holder releases
//! (or a third party force-unlocks): the waiter must hold the lock within
//! 50 ms of the release, which only the release message can do, since the
//! holder's lease is a minute long.

use super::{woken_in_time, Ctx, Report, LONG_LEASE, T};
use crate::side::{Kind, Side};

/// How the lock is let go.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Release {
    /// The holder unlocks.
    Unlock,
    /// The holder's side force-unlocks it from another thread.
    Force,
}

/// Runs one wake-up: `holder` takes `name` as `held`, `waiter` waits for it
/// as `wanted`, then the holder lets go as `how` says.
pub fn wake(
    ctx: &Ctx<'_>,
    holder: &dyn Side,
    waiter: &dyn Side,
    held: Kind,
    wanted: Kind,
    name: &str,
    how: Release,
) -> Result<String, String> {
    let (h, w, f) = (
        format!("{name}/h"),
        format!("{name}/w"),
        format!("{name}/f"),
    );
    holder.lock(&h, held, name, Some(LONG_LEASE)).wait(T)?;
    let mut pending = waiter.lock(&w, wanted, name, None);
    let (classic, sharded) = ctx.wait_parked(wanted, name, &mut pending)?;
    let release = match how {
        Release::Unlock => holder.unlock(&h, held, name),
        Release::Force => holder.force_unlock(&f, held, name),
    }
    .wait(T)?;
    if how == Release::Force && !release.is_true() {
        return Err("force-unlock found no lock to delete".into());
    }
    let got = pending.wait(T)?;
    waiter.unlock(&w, wanted, name).wait(T)?;
    if how == Release::Force {
        // The old holder's release now finds nothing (or someone else's
        // lock) and must change nothing; its error is expected.
        let _ = holder.unlock(&h, held, name).wait(T);
    }
    let took = woken_in_time(release.start_us, got.end_us)?;
    let via = if ctx.redis.is_cluster() {
        format!(" (waiter listening: {sharded} sharded, {classic} classic subscribers)")
    } else {
        String::new()
    };
    Ok(format!(
        "holds {} after the release began{via}",
        super::ms(took)
    ))
}

/// The plain, fair, read-write, fenced and multi-lock wake-ups, both ways.
pub fn run(ctx: &Ctx<'_>, report: &mut Report) {
    let cases: [(&str, Kind, Kind); 8] = [
        ("plain", Kind::Plain, Kind::Plain),
        ("fair", Kind::Fair, Kind::Fair),
        ("write->read", Kind::Write, Kind::Read),
        ("write->write", Kind::Write, Kind::Write),
        ("read->write", Kind::Read, Kind::Write),
        ("fenced", Kind::Fenced, Kind::Fenced),
        ("fenced->plain", Kind::Fenced, Kind::Plain),
        ("multi", Kind::Multi, Kind::Multi),
    ];
    for (label, held, wanted) in cases {
        for (holder, waiter) in ctx.directions() {
            let title = format!(
                "{} wake {label}: {} unlock wakes a parked {} waiter",
                ctx.topo,
                holder.label(),
                waiter.label()
            );
            let mut name = ctx.name(&format!("wake-{label}-{}", holder.label()));
            if held == Kind::Multi {
                name = multi_names(ctx, &name);
            }
            report.check(title, || {
                wake(ctx, holder, waiter, held, wanted, &name, Release::Unlock)
            });
        }
    }
}

/// On a cluster: a redhold client that listens the other way than this
/// Redisson (`other`: sharded beside a Redisson that listens classically,
/// classic beside one that listens sharded) still wakes Redisson's parked
/// waiters, because it publishes both ways (`publish_both_ways`, on by
/// default): in a fleet in the middle of an upgrade no redhold release is
/// lost. Beside a classic Redisson, `other` is also told
/// `hear_classic_releases`, and Redisson's releases must wake it too.
pub fn run_other_way(ctx: &Ctx<'_>, other: &dyn Side, report: &mut Report) {
    let listens = if ctx.sharded { "classic" } else { "sharded" };
    let cases: [(&str, Kind, Kind); 3] = [
        ("plain", Kind::Plain, Kind::Plain),
        ("fair", Kind::Fair, Kind::Fair),
        ("write->read", Kind::Write, Kind::Read),
    ];
    for (label, held, wanted) in cases {
        let title = format!(
            "{} mixed fleet wake {label}: unlock by a redhold client listening {listens} wakes a parked java waiter",
            ctx.topo
        );
        let name = ctx.name(&format!("mixed-{label}"));
        report.check(title, || {
            wake(ctx, other, ctx.java, held, wanted, &name, Release::Unlock)
        });
        if ctx.sharded {
            continue;
        }
        // The waiter is `other`, which listens sharded.
        let sharded = Ctx {
            sharded: true,
            ..*ctx
        };
        let title = format!(
            "{} mixed fleet wake {label}: java unlock wakes a parked waiter of a redhold client listening sharded with hear_classic_releases",
            ctx.topo
        );
        let name = ctx.name(&format!("mixed-hear-{label}"));
        report.check(title, || {
            wake(
                &sharded,
                ctx.java,
                other,
                held,
                wanted,
                &name,
                Release::Unlock,
            )
        });
    }
}

/// Two lock names for a multi-lock, on different masters of a cluster.
pub fn multi_names(ctx: &Ctx<'_>, base: &str) -> String {
    match ctx.redis.name_per_node(base) {
        Ok(names) if ctx.redis.is_cluster() => names[..2].join(","),
        _ => format!("{base}-a,{base}-b"),
    }
}

/// Force-unlock on either side wakes the other side's waiter.
pub fn run_force(ctx: &Ctx<'_>, report: &mut Report) {
    let cases: [(&str, Kind, Kind); 3] = [
        ("plain", Kind::Plain, Kind::Plain),
        ("fair", Kind::Fair, Kind::Fair),
        ("write->read", Kind::Write, Kind::Read),
    ];
    for (label, held, wanted) in cases {
        for (holder, waiter) in ctx.directions() {
            let title = format!(
                "{} force-unlock {label}: {} force-unlock wakes a parked {} waiter",
                ctx.topo,
                holder.label(),
                waiter.label()
            );
            let name = ctx.name(&format!("force-{label}-{}", holder.label()));
            report.check(title, || {
                wake(ctx, holder, waiter, held, wanted, &name, Release::Force)
            });
        }
    }
}

/// On a cluster: the plain lock on a name served by each master.
pub fn run_each_master(ctx: &Ctx<'_>, report: &mut Report) {
    for (holder, waiter) in ctx.directions() {
        let title = format!(
            "{} wake plain on every master: {} unlock wakes a parked {} waiter",
            ctx.topo,
            holder.label(),
            waiter.label()
        );
        report.check(title, || {
            let names = ctx
                .redis
                .name_per_node(&ctx.name(&format!("masters-{}", holder.label())))?;
            let mut lines = Vec::new();
            for name in &names {
                let detail = wake(
                    ctx,
                    holder,
                    waiter,
                    Kind::Plain,
                    Kind::Plain,
                    name,
                    Release::Unlock,
                )?;
                let node = ctx.redis.node_for(name)?;
                lines.push(format!(
                    "master {node}: {}",
                    detail.split(" (").next().unwrap_or(&detail)
                ));
            }
            Ok(lines.join("; "))
        });
    }
}
