//! Where redhold deliberately or knowingly differs from Redisson, each
//! written down in docs/wire-format.md. These checks pass while the two
//! behave as documented, so a change on either side (a fix in redhold, a
//! new Redisson release) shows up here and the documentation gets updated.

use std::thread;
use std::time::{Duration, Instant};

use super::{Ctx, Report, LONG_LEASE, T, WAKE_LIMIT_US};
use crate::side::{Kind, Side};

/// `RReadWriteLock.readLock().isLocked()` is true while the writer also
/// holds read locks (mode `write`, more than two fields), as redhold's
/// `read().is_locked()` is; before Redisson 3.24.1 it said false then
/// (a documented difference of those releases).
const READ_IS_LOCKED_FIXED_IN: (u32, u32, u32) = (3, 24, 1);

fn read_is_locked_under_writer(ctx: &Ctx<'_>) -> Result<String, String> {
    let name = ctx.name("diff-read-is-locked");
    let a = format!("{name}/a");
    ctx.java
        .lock(&a, Kind::Write, &name, Some(LONG_LEASE))
        .wait(T)?;
    ctx.java
        .lock(&a, Kind::Read, &name, Some(LONG_LEASE))
        .wait(T)?;
    let java = ctx
        .java
        .is_locked(&format!("{name}/j"), Kind::Read, &name)
        .wait(T)?
        .is_true();
    let rust = ctx
        .rust
        .is_locked(&format!("{name}/r"), Kind::Read, &name)
        .wait(T)?
        .is_true();
    ctx.java.unlock(&a, Kind::Read, &name).wait(T)?;
    ctx.java.unlock(&a, Kind::Write, &name).wait(T)?;
    let expected = (ctx.redisson >= READ_IS_LOCKED_FIXED_IN, true);
    match (java, rust) {
        (true, true) if expected.0 => {
            Ok("Redisson's read isLocked() and redhold's read().is_locked() both say true".into())
        }
        (false, true) if !expected.0 => Ok(
            "difference (documented): Redisson before 3.24.1 says false, redhold's read().is_locked() true".into(),
        ),
        other => Err(format!(
            "(Redisson, redhold) answer {other:?}, not {expected:?}; update docs/wire-format.md"
        )),
    }
}

/// The Redisson releases whose latches outlive the release (see
/// `unlock_latch`).
const LATCHES_LEFT_BY: std::ops::Range<(u32, u32, u32)> = (3, 52, 0)..(3, 53, 0);

/// Redisson deletes its `redisson_unlock_latch:{name}:<id>` key once the
/// release's reply arrives; redhold latches every release, the freeing one
/// too (a retry that finds neither field nor latch reports the lock lost),
/// and keeps each latch until its TTL instead of spending a round trip on
/// deleting it.
fn unlock_latch(ctx: &Ctx<'_>) -> Result<String, String> {
    let mut left = Vec::new();
    for side in [ctx.java as &dyn Side, ctx.rust as &dyn Side] {
        let name = ctx.name(&format!("diff-latch-{}", side.label()));
        let a = format!("{name}/a");
        // Two holds: the first release leaves one, the second frees the lock.
        side.lock(&a, Kind::Plain, &name, Some(LONG_LEASE))
            .wait(T)?;
        side.lock(&a, Kind::Plain, &name, Some(LONG_LEASE))
            .wait(T)?;
        side.unlock(&a, Kind::Plain, &name).wait(T)?;
        side.unlock(&a, Kind::Plain, &name).wait(T)?;
        // Redisson's DEL is sent after the reply, without waiting for it;
        // redhold's latches are there when its release returns.
        let pattern = format!("redisson_unlock_latch:*{name}*");
        let deadline = Instant::now() + Duration::from_secs(1);
        let latches = loop {
            let latches = ctx.redis.keys(&pattern)?;
            if side.label() == "rust" || latches.is_empty() || Instant::now() > deadline {
                break latches;
            }
            thread::sleep(Duration::from_millis(20));
        };
        // The shortest TTL of the latches left (0 when none is).
        let mut ttl = i64::MAX;
        for latch in &latches {
            ttl = ttl.min(ctx.redis.at(latch, redis::cmd("PTTL").arg(latch))?);
        }
        if latches.is_empty() {
            ttl = 0;
        }
        left.push((latches.len(), ttl));
    }
    // Redisson 3.52 names its release's latch after a fresh request id but
    // deletes the one named after its client id: its latches stay until
    // their TTL, like redhold's (4.7.0, checked, deletes them again).
    let java_keeps = LATCHES_LEFT_BY.contains(&ctx.redisson);
    match left[..] {
        [(2, java_ttl), (2, ttl)] if java_keeps && java_ttl > 0 && ttl > 0 => Ok(format!(
            "Redisson 3.52 leaves its two latches too (at least {java_ttl} ms left), as redhold \
             does (at least {ttl} ms left)"
        )),
        [(0, _), (2, ttl)] if ttl > 0 && !java_keeps => Ok(format!(
            "after two releases Redisson's latches are gone; redhold keeps both, the one \
             of the release that left a hold and the freeing one's (at least {ttl} ms left)"
        )),
        _ => Err(format!(
            "latches left after a release that leaves a hold and one that frees the lock \
             (Redisson, redhold): {left:?}, documented: none, two with a TTL; \
             update docs/wire-format.md"
        )),
    }
}

/// A re-entry with a shorter lease: Redisson cuts the lock's TTL to it,
/// redhold never shortens a lock that still has holds.
fn reentry_ttl(ctx: &Ctx<'_>) -> Result<String, String> {
    let mut ttls = Vec::new();
    for side in [ctx.java as &dyn Side, ctx.rust as &dyn Side] {
        let name = ctx.name(&format!("diff-reentry-ttl-{}", side.label()));
        let a = format!("{name}/a");
        side.lock(&a, Kind::Plain, &name, Some(LONG_LEASE))
            .wait(T)?;
        side.lock(&a, Kind::Plain, &name, Some(5_000)).wait(T)?;
        ttls.push(ctx.pttl(&name)?);
        side.unlock(&a, Kind::Plain, &name).wait(T)?;
        side.unlock(&a, Kind::Plain, &name).wait(T)?;
    }
    let (java, rust) = (ttls[0], ttls[1]);
    let long = i64::try_from(LONG_LEASE).unwrap_or(i64::MAX);
    if java <= 5_000 && rust > long - 5_000 {
        Ok(format!(
            "held for 60 s, re-entered with a 5 s lease: PTTL {java} ms (Redisson), {rust} ms (redhold)"
        ))
    } else {
        Err(format!(
            "PTTL after the short re-entry: {java} ms (Redisson), {rust} ms (redhold); documented: ~5000 and ~60000; update docs/wire-format.md"
        ))
    }
}

/// Redisson announces nothing when its writer downgrades to read, so a
/// parked redhold reader is not woken by a message: it gets in at its next
/// look, bounded by the lock's TTL (here a 1.5 s lease).
fn java_downgrade_is_silent(ctx: &Ctx<'_>) -> Result<String, String> {
    let name = ctx.name("diff-java-downgrade");
    let (a, w) = (format!("{name}/a"), format!("{name}/w"));
    ctx.java.lock(&a, Kind::Write, &name, Some(1_500)).wait(T)?;
    ctx.java.lock(&a, Kind::Read, &name, Some(1_500)).wait(T)?;
    let mut reader = ctx.rust.lock(&w, Kind::Read, &name, None);
    ctx.wait_parked(Kind::Read, &name, &mut reader)?;
    let release = ctx.java.unlock(&a, Kind::Write, &name).wait(T)?;
    let got = reader.wait(T)?;
    ctx.rust.unlock(&w, Kind::Read, &name).wait(T)?;
    let _ = ctx.java.unlock(&a, Kind::Read, &name).wait(T);
    let took = got.end_us.saturating_sub(release.start_us);
    if took > WAKE_LIMIT_US {
        Ok(format!(
            "the parked redhold reader got in {} after Redisson's downgrade, at its next look, not woken",
            super::ms(took)
        ))
    } else {
        Err(format!(
            "the parked redhold reader got in {} after Redisson's downgrade: Redisson seems to announce downgrades now; update docs/wire-format.md",
            super::ms(took)
        ))
    }
}

pub fn run(ctx: &Ctx<'_>, report: &mut Report) {
    let title = |what: &str| format!("{} difference (documented): {what}", ctx.topo);
    report.check(
        format!("{} read is_locked while the writer also reads", ctx.topo),
        || read_is_locked_under_writer(ctx),
    );
    report.check(title("release latch cleanup"), || unlock_latch(ctx));
    report.check(title("re-entry with a shorter lease"), || reentry_ttl(ctx));
    report.check(title("Redisson's downgrade wakes no reader"), || {
        java_downgrade_is_silent(ctx)
    });
}
