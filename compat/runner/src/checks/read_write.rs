//! Read-write lock across the two sides: readers overlap, a writer on
//! either side excludes both, a downgrade on either side is seen by the
//! other.

use super::{expect_false, expect_true, woken_in_time, Ctx, Report, LONG_LEASE, T};
use crate::side::{Kind, Side};

fn overlap(ctx: &Ctx<'_>, a: &dyn Side, b: &dyn Side) -> Result<String, String> {
    let name = ctx.name(&format!("rw-overlap-{}", a.label()));
    let (sa, sb) = (format!("{name}/a"), format!("{name}/b"));
    a.lock(&sa, Kind::Read, &name, Some(LONG_LEASE)).wait(T)?;
    expect_true(
        b.try_lock(&sb, Kind::Read, &name, 0, Some(LONG_LEASE)),
        "the second reader's try-lock",
    )?;
    let readers: i64 = ctx.redis.at(&name, redis::cmd("HLEN").arg(&name))?;
    expect_false(
        a.try_lock(&format!("{name}/c"), Kind::Write, &name, 0, None),
        "a writer's try-lock while both read",
    )?;
    a.unlock(&sa, Kind::Read, &name).wait(T)?;
    b.unlock(&sb, Kind::Read, &name).wait(T)?;
    if readers != 3 {
        return Err(format!(
            "expected mode and two reader fields, the hash has {readers} fields"
        ));
    }
    Ok(format!(
        "{} reads, then {} reads at once; a writer is refused",
        a.label(),
        b.label()
    ))
}

fn writer_excludes(ctx: &Ctx<'_>, a: &dyn Side, b: &dyn Side) -> Result<String, String> {
    let name = ctx.name(&format!("rw-excl-{}", a.label()));
    let (sa, sb) = (format!("{name}/a"), format!("{name}/b"));
    a.lock(&sa, Kind::Write, &name, Some(LONG_LEASE)).wait(T)?;
    expect_false(
        b.try_lock(&sb, Kind::Read, &name, 0, None),
        "a reader's try-lock under the writer",
    )?;
    expect_false(
        b.try_lock(&sb, Kind::Write, &name, 0, None),
        "a writer's try-lock under the writer",
    )?;
    expect_true(
        b.is_locked(&sb, Kind::Write, &name),
        "is-locked(write) under the writer",
    )?;
    a.unlock(&sa, Kind::Write, &name).wait(T)?;
    a.lock(&sa, Kind::Read, &name, Some(LONG_LEASE)).wait(T)?;
    expect_false(
        b.try_lock(&sb, Kind::Write, &name, 0, None),
        "a writer's try-lock under a reader",
    )?;
    a.unlock(&sa, Kind::Read, &name).wait(T)?;
    expect_true(
        b.try_lock(&sb, Kind::Write, &name, 0, None),
        "a writer's try-lock once free",
    )?;
    b.unlock(&sb, Kind::Write, &name).wait(T)?;
    Ok(format!(
        "{} writing keeps {} readers and writers out; {} reading keeps its writers out",
        a.label(),
        b.label(),
        a.label()
    ))
}

/// `a` takes the write lock, then a read lock, then releases the write
/// lock: `b`'s readers get in from then on, its writers still do not.
/// When `b` is Java, a Java reader parked before the downgrade is woken too
/// (redhold announces a downgrade; Redisson does not, see
/// docs/wire-format.md).
fn downgrade(ctx: &Ctx<'_>, a: &dyn Side, b: &dyn Side) -> Result<String, String> {
    let name = ctx.name(&format!("rw-downgrade-{}", a.label()));
    let (sa, sb, sw) = (
        format!("{name}/a"),
        format!("{name}/b"),
        format!("{name}/w"),
    );
    a.lock(&sa, Kind::Write, &name, Some(LONG_LEASE)).wait(T)?;
    a.lock(&sa, Kind::Read, &name, Some(LONG_LEASE)).wait(T)?;
    expect_false(
        b.try_lock(&sb, Kind::Read, &name, 0, None),
        "a reader's try-lock before the downgrade",
    )?;
    let mut parked = (a.label() == "rust").then(|| b.lock(&sw, Kind::Read, &name, None));
    if let Some(p) = parked.as_mut() {
        ctx.wait_parked(Kind::Read, &name, p)?;
    }
    let release = a.unlock(&sa, Kind::Write, &name).wait(T)?;
    let mode: Option<String> = ctx
        .redis
        .at(&name, redis::cmd("HGET").arg(&name).arg("mode"))?;
    if mode.as_deref() != Some("read") {
        return Err(format!(
            "after the downgrade the mode is {mode:?}, not read"
        ));
    }
    let mut detail = String::new();
    if let Some(p) = parked {
        let got = p.wait(T)?;
        let took = woken_in_time(release.start_us, got.end_us)?;
        detail = format!(
            "; the parked {} reader got in {}",
            b.label(),
            super::ms(took)
        );
        b.unlock(&sw, Kind::Read, &name).wait(T)?;
    }
    expect_true(
        b.try_lock(&sb, Kind::Read, &name, 0, Some(LONG_LEASE)),
        "a reader's try-lock after the downgrade",
    )?;
    expect_false(
        b.try_lock(&format!("{name}/c"), Kind::Write, &name, 0, None),
        "a writer's try-lock after the downgrade",
    )?;
    b.unlock(&sb, Kind::Read, &name).wait(T)?;
    a.unlock(&sa, Kind::Read, &name).wait(T)?;
    Ok(format!(
        "{} downgraded write to read; {} readers share it, writers wait{detail}",
        a.label(),
        b.label()
    ))
}

pub fn run(ctx: &Ctx<'_>, report: &mut Report) {
    for (a, b) in ctx.directions() {
        report.check(
            format!(
                "{} rw readers overlap: {} then {}",
                ctx.topo,
                a.label(),
                b.label()
            ),
            || overlap(ctx, a, b),
        );
    }
    for (a, b) in ctx.directions() {
        report.check(
            format!(
                "{} rw {} writer excludes {}",
                ctx.topo,
                a.label(),
                b.label()
            ),
            || writer_excludes(ctx, a, b),
        );
    }
    for (a, b) in ctx.directions() {
        report.check(
            format!(
                "{} rw {} downgrade is seen by {}",
                ctx.topo,
                a.label(),
                b.label()
            ),
            || downgrade(ctx, a, b),
        );
    }
}
