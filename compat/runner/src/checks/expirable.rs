//! Redisson's `RPermitExpirableSemaphore` shared by both sides: the same
//! count and lease set whoever takes a permit, a permit released by its id
//! on the other side, and a permit left to expire on one side taken by a
//! waiter of the other at its lease's end, not before and not much after.

use super::{woken_in_time, Ctx, Report, T};
use crate::side::{sync_op, Reply, Side};

/// A lease short enough to wait for.
const SHORT_LEASE_MS: u64 = 600;

/// How late after its lease's end a waiter may get an expired permit: the
/// waiter looks again at the earliest lease end it was told of.
const EXPIRY_SLACK_US: u64 = 300_000;

/// Every check of this file, both directions.
pub fn run(ctx: &Ctx<'_>, report: &mut Report) {
    for (a, b) in ctx.directions() {
        let (x, y) = (a.label(), b.label());
        let name = ctx.name(&format!("pes-layout-{x}"));
        report.check(
            format!(
                "{} expirable semaphore: {x} takes a permit, {y} sees it and releases it by id",
                ctx.topo
            ),
            || layout(ctx, a, b, &name),
        );
        let name = ctx.name(&format!("pes-expiry-{x}"));
        report.check(
            format!("{} expirable semaphore: a {x} permit left to expire goes to a waiting {y} at its lease's end", ctx.topo),
            || expiry(a, b, &name),
        );
        let name = ctx.name(&format!("pes-wake-{x}"));
        report.check(
            format!(
                "{} expirable semaphore wake: {x} release by id wakes a parked {y} acquire",
                ctx.topo
            ),
            || wake(ctx, a, b, &name),
        );
    }
}

fn call(side: &dyn Side, slot: &str, words: &[&str]) -> Result<Reply, String> {
    side.call(slot, sync_op(words)).wait(T)
}

fn expect(reply: &Reply, expected: &str, what: &str) -> Result<(), String> {
    if reply.data == expected {
        Ok(())
    } else {
        Err(format!("{what}: {:?}, expected {expected:?}", reply.data))
    }
}

/// Redisson's `suffixName(name, "timeout")`.
fn lease_set(name: &str) -> String {
    if name.contains('{') {
        format!("{name}:timeout")
    } else {
        format!("{{{name}}}:timeout")
    }
}

fn layout(ctx: &Ctx<'_>, a: &dyn Side, b: &dyn Side, name: &str) -> Result<String, String> {
    let (sa, sb) = (format!("{name}/a"), format!("{name}/b"));
    expect(
        &call(a, &sa, &["pes-try-set", name, "2"])?,
        "true",
        "trySetPermits",
    )?;
    let id = call(a, &sa, &["pes-acquire", name, "60000"])?.data;
    expect(
        &call(b, &sb, &["pes-available", name])?,
        "1",
        "availablePermits",
    )?;
    let leases = lease_set(name);
    let members: Vec<(Vec<u8>, f64)> = ctx.redis.at(
        &leases,
        redis::cmd("ZRANGE")
            .arg(&leases)
            .arg(0)
            .arg(-1)
            .arg("WITHSCORES"),
    )?;
    let hex: Vec<String> = members
        .iter()
        .map(|(m, _)| m.iter().map(|b| format!("{b:02x}")).collect())
        .collect();
    if hex != [id.clone()] {
        return Err(format!(
            "{leases} holds {hex:?}, expected the raw bytes of {id}"
        ));
    }
    expect(
        &call(b, &sb, &["pes-release", name, &id])?,
        "true",
        "release by id",
    )?;
    expect(
        &call(b, &sb, &["pes-release", name, &id])?,
        "false",
        "second release",
    )?;
    expect(
        &call(a, &sa, &["pes-available", name])?,
        "2",
        "after the release",
    )?;
    Ok(format!(
        "permit {id}: its raw bytes in {leases}, released by id across"
    ))
}

fn expiry(a: &dyn Side, b: &dyn Side, name: &str) -> Result<String, String> {
    let (sa, sb) = (format!("{name}/a"), format!("{name}/b"));
    expect(
        &call(a, &sa, &["pes-try-set", name, "1"])?,
        "true",
        "trySetPermits",
    )?;
    let short = SHORT_LEASE_MS.to_string();
    let taken = call(a, &sa, &["pes-acquire", name, &short])?;
    let got = b
        .call(&sb, sync_op(&["pes-acquire", name, "60000"]))
        .wait(T)?;
    let ends = taken.end_us + SHORT_LEASE_MS * 1000;
    // Leases are counted from the taker's clock before its call returned.
    if got.end_us + 50_000 < taken.start_us + SHORT_LEASE_MS * 1000 {
        return Err(format!(
            "the waiter got the permit {} ms before its lease ended",
            (taken.start_us + SHORT_LEASE_MS * 1000 - got.end_us) / 1000
        ));
    }
    let late = got.end_us.saturating_sub(ends);
    if late > EXPIRY_SLACK_US {
        return Err(format!(
            "the waiter got the expired permit {} after its lease ended",
            super::ms(late)
        ));
    }
    Ok(format!("taken {} after the lease ended", super::ms(late)))
}

fn wake(
    ctx: &Ctx<'_>,
    releaser: &dyn Side,
    waiter: &dyn Side,
    name: &str,
) -> Result<String, String> {
    let (sr, sw) = (format!("{name}/r"), format!("{name}/w"));
    expect(
        &call(releaser, &sr, &["pes-try-set", name, "1"])?,
        "true",
        "trySetPermits",
    )?;
    let id = call(releaser, &sr, &["pes-acquire", name, "60000"])?.data;
    let mut pending = waiter.call(&sw, sync_op(&["pes-acquire", name, "60000"]));
    super::synchronizers::wait_listening(ctx, &super::prefixed("redisson_sc", name), &mut pending)?;
    let release = call(releaser, &sr, &["pes-release", name, &id])?;
    expect(&release, "true", "release by id")?;
    let got = pending.wait(T)?;
    let took = woken_in_time(release.start_us, got.end_us)?;
    Ok(format!(
        "acquired {} after the release began",
        super::ms(took)
    ))
}
