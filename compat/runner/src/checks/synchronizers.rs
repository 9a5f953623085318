//! Redisson's `RSemaphore` and `RCountDownLatch` shared by both sides: what
//! one side sets the other reads, in the same keys; a release (a
//! count-down) on one side wakes a waiter parked on the other within the
//! wake-up bound, which only the channel's message can do; and threads of
//! both sides hammering one semaphore never hold more permits than it has.

use std::thread;
use std::time::{Duration, Instant};

use super::{prefixed, woken_in_time, Ctx, Report, COUNTERS_TAG, T};
use crate::side::{sync_op, Pending, Reply, Side};

/// How long the hammer may take before it counts as stuck.
const HAMMER_LIMIT: Duration = Duration::from_secs(240);

/// Every check of this file, both directions.
pub fn run(ctx: &Ctx<'_>, report: &mut Report) {
    for (a, b) in ctx.directions() {
        let (x, y) = (a.label(), b.label());
        let name = ctx.name(&format!("sem-layout-{x}"));
        report.check(
            format!(
                "{} semaphore layout: {x} sets and takes, {y} reads and gives back",
                ctx.topo
            ),
            || semaphore_layout(ctx, a, b, &name),
        );
        let name = ctx.name(&format!("latch-layout-{x}"));
        report.check(
            format!(
                "{} latch layout: {x} sets, {y} reads and counts down",
                ctx.topo
            ),
            || latch_layout(ctx, a, b, &name),
        );
        let name = ctx.name(&format!("sem-wake-{x}"));
        report.check(
            format!(
                "{} semaphore wake: {x} release wakes a parked {y} acquire",
                ctx.topo
            ),
            || semaphore_wake(ctx, a, b, &name),
        );
        let name = ctx.name(&format!("latch-wake-{x}"));
        report.check(
            format!(
                "{} latch wake: {x} countDown opens a parked {y} await",
                ctx.topo
            ),
            || latch_wake(ctx, a, b, &name),
        );
    }
    report.check(
        format!(
            "{} semaphore exclusion: java and rust threads never hold more than 2 permits",
            ctx.topo
        ),
        || hammer(ctx),
    );
}

/// Runs `words` on `side`'s slot `slot` and waits for the reply.
fn call(side: &dyn Side, slot: &str, words: &[&str]) -> Result<Reply, String> {
    side.call(slot, sync_op(words)).wait(T)
}

/// Fails unless `reply`'s data is `expected`.
fn expect(reply: Reply, expected: &str, what: &str) -> Result<(), String> {
    if reply.data == expected {
        Ok(())
    } else {
        Err(format!("{what}: {:?}, expected {expected:?}", reply.data))
    }
}

/// The keys that hold `name`'s state: the name alone (request latches,
/// which live a few seconds, left out).
fn state_keys(ctx: &Ctx<'_>, name: &str) -> Result<Vec<String>, String> {
    let mut keys = ctx.redis.keys(&format!("*{name}*"))?;
    keys.retain(|k| !k.starts_with("redisson_unlock_latch:"));
    Ok(keys)
}

/// `TYPE` and `GET` of `name` must be a string holding `value`.
fn expect_count(ctx: &Ctx<'_>, name: &str, value: &str) -> Result<(), String> {
    let kind: String = ctx.redis.at(name, redis::cmd("TYPE").arg(name))?;
    let got: Option<String> = ctx.redis.at(name, redis::cmd("GET").arg(name))?;
    if kind != "string" || got.as_deref() != Some(value) {
        return Err(format!(
            "{name} is a {kind} holding {got:?}, expected the string {value:?}"
        ));
    }
    let keys = state_keys(ctx, name)?;
    if keys != [name.to_owned()] {
        return Err(format!(
            "keys for {name}: {keys:?}, expected the name alone"
        ));
    }
    Ok(())
}

fn semaphore_layout(
    ctx: &Ctx<'_>,
    a: &dyn Side,
    b: &dyn Side,
    name: &str,
) -> Result<String, String> {
    let (sa, sb) = (format!("{name}/a"), format!("{name}/b"));
    expect(
        call(a, &sa, &["sem-try-set", name, "3"])?,
        "true",
        "first trySetPermits",
    )?;
    expect(
        call(b, &sb, &["sem-try-set", name, "5"])?,
        "false",
        "second trySetPermits",
    )?;
    expect(
        call(b, &sb, &["sem-available", name])?,
        "3",
        "availablePermits",
    )?;
    expect_count(ctx, name, "3")?;
    call(a, &sa, &["sem-acquire", name, "2"])?;
    expect(
        call(b, &sb, &["sem-available", name])?,
        "1",
        "after acquire(2)",
    )?;
    expect_count(ctx, name, "1")?;
    call(b, &sb, &["sem-release", name, "2"])?;
    expect(
        call(a, &sa, &["sem-available", name])?,
        "3",
        "after release(2)",
    )?;
    expect_count(ctx, name, "3")?;
    Ok("one string key holding the permits, read and changed alike by both".into())
}

fn latch_layout(ctx: &Ctx<'_>, a: &dyn Side, b: &dyn Side, name: &str) -> Result<String, String> {
    let (sa, sb) = (format!("{name}/a"), format!("{name}/b"));
    expect(
        call(a, &sa, &["latch-try-set", name, "2"])?,
        "true",
        "first trySetCount",
    )?;
    expect(
        call(b, &sb, &["latch-try-set", name, "5"])?,
        "false",
        "second trySetCount",
    )?;
    expect(call(b, &sb, &["latch-count", name])?, "2", "getCount")?;
    expect_count(ctx, name, "2")?;
    call(b, &sb, &["latch-count-down", name])?;
    expect(
        call(a, &sa, &["latch-count", name])?,
        "1",
        "after one countDown",
    )?;
    call(a, &sa, &["latch-count-down", name])?;
    let exists: i64 = ctx.redis.at(name, redis::cmd("EXISTS").arg(name))?;
    if exists != 0 {
        return Err("the latch's key is still there at zero".into());
    }
    expect(
        call(b, &sb, &["latch-count", name])?,
        "0",
        "getCount when open",
    )?;
    Ok("one string key holding the count, deleted at zero by either side".into())
}

/// Waits until someone listens on `channel` (on a cluster, only the way
/// [`Ctx::sharded`] says) and the waiter behind `pending` has had time to park.
pub fn wait_listening(ctx: &Ctx<'_>, channel: &str, pending: &mut Pending) -> Result<(), String> {
    let deadline = Instant::now() + T;
    let (classic, sharded) = loop {
        let counts = ctx.redis.subscribers(channel)?;
        if counts.0 + counts.1 > 0 {
            break counts;
        }
        if pending.is_done() {
            return Err("the waiter went on before anything was released".into());
        }
        if Instant::now() > deadline {
            return Err(format!("nobody subscribed to {channel} within {T:?}"));
        }
        thread::sleep(Duration::from_millis(5));
    };
    thread::sleep(Duration::from_millis(100));
    if pending.is_done() {
        return Err("the waiter went on before anything was released".into());
    }
    ctx.listens_as_expected(channel, (classic, sharded))
}

fn semaphore_wake(
    ctx: &Ctx<'_>,
    releaser: &dyn Side,
    waiter: &dyn Side,
    name: &str,
) -> Result<String, String> {
    let (sr, sw) = (format!("{name}/r"), format!("{name}/w"));
    expect(
        call(releaser, &sr, &["sem-try-set", name, "0"])?,
        "true",
        "trySetPermits(0)",
    )?;
    let mut pending = waiter.call(&sw, sync_op(&["sem-acquire", name, "1"]));
    wait_listening(ctx, &prefixed("redisson_sc", name), &mut pending)?;
    let release = call(releaser, &sr, &["sem-release", name, "1"])?;
    let got = pending.wait(T)?;
    let took = woken_in_time(release.start_us, got.end_us)?;
    expect(
        call(releaser, &sr, &["sem-available", name])?,
        "0",
        "the waiter's permit",
    )?;
    Ok(format!(
        "acquired {} after the release began",
        super::ms(took)
    ))
}

fn latch_wake(
    ctx: &Ctx<'_>,
    opener: &dyn Side,
    waiter: &dyn Side,
    name: &str,
) -> Result<String, String> {
    let (so, sw) = (format!("{name}/o"), format!("{name}/w"));
    expect(
        call(opener, &so, &["latch-try-set", name, "1"])?,
        "true",
        "trySetCount(1)",
    )?;
    let mut pending = waiter.call(&sw, sync_op(&["latch-await", name]));
    let channel = format!("redisson_countdownlatch__channel__{{{name}}}");
    wait_listening(ctx, &channel, &mut pending)?;
    let opened = call(opener, &so, &["latch-count-down", name])?;
    let got = pending.wait(T)?;
    let took = woken_in_time(opened.start_us, got.end_us)?;
    Ok(format!(
        "await returned {} after the countDown began",
        super::ms(took)
    ))
}

/// Two Java and two redhold threads take and give back one permit of a
/// two-permit semaphore 40 times each.
fn hammer(ctx: &Ctx<'_>) -> Result<String, String> {
    const PERMITS: &str = "2";
    const ROUNDS: &str = "40";
    let name = ctx.name("sem-hammer");
    let prefix = format!("{COUNTERS_TAG}:{name}:counters");
    expect(
        call(
            ctx.java,
            &format!("{name}/set"),
            &["sem-try-set", &name, PERMITS],
        )?,
        "true",
        "trySetPermits",
    )?;
    let sides: [&dyn Side; 4] = [ctx.java, ctx.rust, ctx.java, ctx.rust];
    let pending: Vec<_> = sides
        .iter()
        .enumerate()
        .map(|(i, side)| {
            side.call(
                &format!("{name}/{i}"),
                sync_op(&["sem-hammer", &name, ROUNDS, PERMITS, &prefix]),
            )
        })
        .collect();
    let mut most = 0;
    let mut problems = Vec::new();
    for (side, p) in sides.iter().zip(pending) {
        let reply = p.wait(HAMMER_LIMIT)?;
        let violations = reply.number(0)?;
        most = most.max(reply.number(2)?);
        if violations != 0 {
            problems.push(format!(
                "{}: {violations} rounds saw more than {PERMITS} inside",
                side.label()
            ));
        }
    }
    if !problems.is_empty() {
        return Err(problems.join("; "));
    }
    for side in [ctx.java as &dyn Side, ctx.rust] {
        expect(
            call(side, &format!("{name}/end"), &["sem-available", &name])?,
            PERMITS,
            "every permit back",
        )?;
    }
    Ok(format!(
        "160 rounds (80 java, 80 rust), at most {most} inside at once, every permit back"
    ))
}
