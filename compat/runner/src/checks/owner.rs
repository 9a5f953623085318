//! Owners (issue 41) beside Redisson: a hold redhold takes for an
//! [`Owner`] is the field `<client-uuid>:<owner-id>`, the shape of
//! Redisson's `lockAsync(threadId)` holds, so Redisson treats it as any
//! holder. A Java waiter parked on it is woken by the release of the
//! owner's last hold whatever thread drops the guard; Java's `isLocked`
//! and `tryLock` see it; and a Java `forceUnlock` under it is reported to
//! the owner (`on_hold_lost`, `is_held`, `LockLost` naming the owner).
//!
//! The guards are taken and dropped on threads of the check's own, not on
//! the side's slot threads: that is the point of an owner.

use std::thread;
use std::time::{Duration, Instant};

use redhold::{Error, Lock, Owner, OwnerGuard, Reentrant};

use super::wake::Release;
use super::{expect_false, expect_true, ms, panic_text, woken_in_time, Ctx, Report, LONG_LEASE, T};
use crate::side::{now_us, Kind, Op, Side};

/// How the Java waiter waits.
#[derive(Clone, Copy, PartialEq, Eq)]
enum JavaWait {
    /// `lock()`.
    Lock,
    /// `tryLock(WAIT_MS, -1, ms)`.
    TryLock,
}

/// The Java `tryLock` waiter's wait: long beside the wake limit, shorter
/// than the owner's lease, so only the release message can answer it
/// `true` in time.
const WAIT_MS: u64 = 30_000;

/// The short wait of a `tryLock` that must fail while the owner holds.
const SHORT_WAIT_MS: u64 = 200;

/// Runs `f` on a new thread named `name` and returns what it returned.
fn elsewhere<R: Send + 'static>(
    name: &str,
    f: impl FnOnce() -> R + Send + 'static,
) -> Result<R, String> {
    thread::Builder::new()
        .name(name.to_owned())
        .spawn(f)
        .map_err(|e| format!("spawn {name}: {e}"))?
        .join()
        .map_err(|p| format!("{name} panicked: {}", panic_text(&p)))
}

fn err(e: Error) -> String {
    e.to_string()
}

/// The owner's handle on the plain lock `name`, and its holder field after
/// checking the field's shape.
fn owner_lock(
    ctx: &Ctx<'_>,
    name: &str,
    owner: Owner,
) -> Result<(Lock<Reentrant, Owner>, String), String> {
    let lock = ctx.rust.client().lock(name).for_owner(owner);
    let field = lock.holder_id();
    let expected = format!("{}:{}", ctx.rust.client().id(), owner.id());
    if field != expected {
        return Err(format!("the owner's holder id is {field}, not {expected}"));
    }
    // Redisson's threadId is a Java long: the owner's id must be positive
    // there, and above every thread number.
    if !(1u64 << 62..1u64 << 63).contains(&owner.id()) {
        return Err(format!("owner id {} is not in [2^62, 2^63)", owner.id()));
    }
    Ok((lock, field))
}

/// Fails unless the lock's hash is exactly `field` → `count`.
fn only_field(ctx: &Ctx<'_>, name: &str, field: &str, count: i64) -> Result<(), String> {
    let hash: Vec<(String, i64)> = ctx.redis.at(name, redis::cmd("HGETALL").arg(name))?;
    if hash != [(field.to_owned(), count)] {
        return Err(format!(
            "the lock's hash is {hash:?}, expected only {field} → {count}"
        ));
    }
    Ok(())
}

/// The owner takes `name` on this thread and re-enters on another; a Java
/// waiter parks; one guard is dropped on a third thread (the waiter must
/// stay parked: the owner still holds), the other on a fourth, which must
/// wake the waiter within the wake limit (the owner's lease is a minute).
fn wake(ctx: &Ctx<'_>, how: JavaWait) -> Result<String, String> {
    let label = match how {
        JavaWait::Lock => "lock",
        JavaWait::TryLock => "trylock",
    };
    let name = ctx.name(&format!("owner-wake-{label}"));
    let w = format!("{name}/w");
    let lease = Duration::from_millis(LONG_LEASE);
    let owner = Owner::new();
    let (lock, field) = owner_lock(ctx, &name, owner)?;
    let first = lock.lock_with_lease(lease).map_err(err)?;
    let again = lock.clone();
    let second = elsewhere("owner-reenter", move || again.lock_with_lease(lease))?.map_err(err)?;
    only_field(ctx, &name, &field, 2)?;

    let mut pending = match how {
        JavaWait::Lock => ctx.java.lock(&w, Kind::Plain, &name, None),
        JavaWait::TryLock => ctx.java.try_lock(&w, Kind::Plain, &name, WAIT_MS, None),
    };
    let (classic, sharded) = ctx.wait_parked(Kind::Plain, &name, &mut pending)?;

    // The first of the two holds, dropped on a thread of its own: the
    // owner still holds, nobody is woken.
    elsewhere("owner-drop-1", move || drop(second))?;
    thread::sleep(Duration::from_millis(100));
    if pending.is_done() {
        return Err("the java waiter got the lock while the owner still held it once".into());
    }
    only_field(ctx, &name, &field, 1)?;
    expect_true(
        ctx.java.is_locked(&format!("{name}/l"), Kind::Plain, &name),
        "java isLocked with one owner hold left",
    )?;

    // The last hold, dropped on yet another thread.
    let since = elsewhere("owner-drop-2", move || {
        let since = now_us();
        drop(first);
        since
    })?;
    let got = pending.wait(T)?;
    if how == JavaWait::TryLock && !got.is_true() {
        return Err(format!(
            "java tryLock({WAIT_MS} ms) answered {:?}",
            got.data
        ));
    }
    ctx.java.unlock(&w, Kind::Plain, &name).wait(T)?;
    let took = woken_in_time(since, got.end_us)?;
    let via = if ctx.redis.is_cluster() {
        format!(" (waiter listening: {sharded} sharded, {classic} classic subscribers)")
    } else {
        String::new()
    };
    Ok(format!(
        "java stayed parked through the first of the owner's two holds (taken on two threads, \
         dropped on two others); it held the lock {} after the last drop began{via}",
        ms(took)
    ))
}

/// What Java sees of an owner's hold: `isLocked`, `tryLock` refused (at
/// once and after a short wait), hold count 0, and `isHeldByThread`.
fn seen(ctx: &Ctx<'_>) -> Result<String, String> {
    let name = ctx.name("owner-status");
    let (j, k) = (format!("{name}/j"), format!("{name}/k"));
    let owner = Owner::new();
    let (lock, field) = owner_lock(ctx, &name, owner)?;
    let guard = lock
        .lock_with_lease(Duration::from_millis(LONG_LEASE))
        .map_err(err)?;
    only_field(ctx, &name, &field, 1)?;
    expect_true(ctx.java.is_locked(&j, Kind::Plain, &name), "java isLocked")?;
    let holds = ctx
        .java
        .hold_count(&j, Kind::Plain, &name)
        .wait(T)?
        .number(0)?;
    if holds != 0 {
        return Err(format!("java getHoldCount is {holds} on the owner's lock"));
    }
    expect_false(
        ctx.java.try_lock(&j, Kind::Plain, &name, 0, None),
        "java tryLock()",
    )?;
    let tried = ctx
        .java
        .try_lock(&j, Kind::Plain, &name, SHORT_WAIT_MS, None)
        .wait(T)?;
    if tried.is_true() {
        return Err(format!(
            "java tryLock({SHORT_WAIT_MS} ms) got the owner's lock"
        ));
    }
    let waited = tried.end_us.saturating_sub(tried.start_us);
    if waited < SHORT_WAIT_MS * 1_000 / 2 {
        return Err(format!(
            "java tryLock({SHORT_WAIT_MS} ms) gave up after {}",
            ms(waited)
        ));
    }
    // Redisson's isHeldByThread(threadId) is `HEXISTS name
    // <its own client id>:<threadId>` (RedissonBaseLock.getLockName), so
    // the owner's id, asked of a Java client, names a holder of that
    // client, which does not exist: false, as for any other client's
    // thread. Only the whole field names the owner across clients
    // (redhold's `is_held_by(holder id)`); no Redisson API takes one.
    expect_false(
        ctx.java.call(
            &j,
            Op::HeldByThread {
                kind: Kind::Plain,
                name: name.clone(),
                thread: owner.id(),
            },
        ),
        "java isHeldByThread(owner id)",
    )?;
    if !ctx
        .rust
        .client()
        .lock(&name)
        .is_held_by(&field)
        .map_err(err)?
    {
        return Err("redhold is_held_by(the owner's field) is false".into());
    }

    // Dropped on another thread: Java sees it free, takes it, and its
    // isHeldByThread does recognize its own thread's id (the control for
    // the `false` above).
    elsewhere("owner-drop", move || drop(guard))?;
    expect_false(
        ctx.java.is_locked(&j, Kind::Plain, &name),
        "java isLocked after the owner's guard was dropped on another thread",
    )?;
    expect_true(
        ctx.java
            .try_lock(&j, Kind::Plain, &name, 0, Some(LONG_LEASE)),
        "java tryLock() after the owner's release",
    )?;
    let java_field = ctx.java.call(&j, Op::Field).wait(T)?.data;
    let thread_id: u64 = java_field
        .rsplit_once(':')
        .and_then(|(_, t)| t.parse().ok())
        .ok_or_else(|| format!("java field {java_field:?}"))?;
    let own = ctx
        .java
        .call(
            &k,
            Op::HeldByThread {
                kind: Kind::Plain,
                name: name.clone(),
                thread: thread_id,
            },
        )
        .wait(T)?;
    let gone = ctx
        .java
        .call(
            &k,
            Op::HeldByThread {
                kind: Kind::Plain,
                name: name.clone(),
                thread: owner.id(),
            },
        )
        .wait(T)?;
    ctx.java.unlock(&j, Kind::Plain, &name).wait(T)?;
    if !own.is_true() || gone.is_true() {
        return Err(format!(
            "java isHeldByThread of its own holder thread {thread_id}: {}, of the owner's id: {}",
            own.data, gone.data
        ));
    }
    Ok(format!(
        "java isLocked true, getHoldCount 0, tryLock() false, tryLock({SHORT_WAIT_MS} ms) false \
         after {}, isHeldByThread({}) false (Redisson asks for \
         <its own client id>:{}), true for its own thread; free to java once dropped on \
         another thread",
        ms(waited),
        owner.id(),
        owner.id()
    ))
}

/// A Java `forceUnlock` under the owner's hold (kept by redhold's
/// watchdog), then a Java thread takes the lock: the watchdog's next
/// renewal reports the owner's hold lost, the guard (moved to another
/// thread) says so and its `unlock` fails with `LockLost` naming the owner,
/// and Java's hold is untouched.
fn lost(ctx: &Ctx<'_>) -> Result<String, String> {
    let name = ctx.name("owner-lost");
    let (f, j) = (format!("{name}/f"), format!("{name}/j"));
    let owner = Owner::new();
    let (lock, field) = owner_lock(ctx, &name, owner)?;
    // No lease: the watchdog keeps it.
    let guard: OwnerGuard = lock.lock().map_err(err)?;
    if !guard.is_held() {
        return Err("a fresh guard is not held".into());
    }
    if !ctx.rust.lost().of(&name).is_empty() {
        return Err("a loss was reported before the force-unlock".into());
    }
    let forced = ctx.java.force_unlock(&f, Kind::Plain, &name).wait(T)?;
    if !forced.is_true() {
        return Err("java forceUnlock found no lock to delete".into());
    }
    let forced_at = Instant::now();
    // Someone else gets in before the watchdog looks.
    ctx.java
        .lock(&j, Kind::Plain, &name, Some(LONG_LEASE))
        .wait(T)?;
    let deadline = forced_at + ctx.watchdog + T;
    let reported = loop {
        let reported = ctx.rust.lost().of(&name);
        if !reported.is_empty() {
            break reported;
        }
        if Instant::now() > deadline {
            return Err(format!(
                "no on_hold_lost call within {:?} of the force-unlock",
                ctx.watchdog + T
            ));
        }
        thread::sleep(Duration::from_millis(5));
    };
    let after = forced_at.elapsed();
    let hold = &reported[0];
    if reported.len() != 1 || hold.owner != Some(owner) || hold.holder_id != field {
        return Err(format!(
            "on_hold_lost was told {reported:?}; expected one loss of {field} by {owner:?}"
        ));
    }
    // The watchdog renews every third of its timeout: it finds the loss by
    // then (plus the renewal's round trip).
    if after > ctx.watchdog {
        return Err(format!(
            "the loss was reported {:.2} s after the force-unlock, more than the {:.0} s watchdog timeout",
            after.as_secs_f64(),
            ctx.watchdog.as_secs_f64()
        ));
    }
    let (held, released) = elsewhere("owner-lost-unlock", move || {
        let held = guard.is_held();
        (held, guard.unlock())
    })?;
    if held {
        return Err("the guard still says is_held() after the loss was reported".into());
    }
    match released {
        Err(Error::LockLost {
            owner: Some(o),
            lock,
            ..
        }) if o == owner && lock == name => {}
        other => {
            return Err(format!(
                "guard.unlock() on another thread gave {other:?}, not LockLost naming {owner:?}"
            ))
        }
    }
    // The owner's late release touched nothing of Java's hold.
    let holds = ctx
        .java
        .hold_count(&j, Kind::Plain, &name)
        .wait(T)?
        .number(0)?;
    ctx.java.unlock(&j, Kind::Plain, &name).wait(T)?;
    if holds != 1 {
        return Err(format!(
            "java's hold count is {holds} after the owner's failed release, not 1"
        ));
    }
    Ok(format!(
        "on_hold_lost named the owner {:.0} ms after java's forceUnlock (java took the lock \
         meanwhile); is_held() false and unlock() LockLost naming the owner, on another \
         thread; java's hold untouched",
        after.as_secs_f64() * 1_000.0
    ))
}

/// One wake-up of a Java waiter by a redhold thread's release, not judged.
/// A fresh JVM runs Redisson's wake-up path for the first time at its first
/// wake-up (class loading, compiling): run alone (`--only owner`) on this
/// 2-core machine, that first one took 15 to 58 ms after the release began,
/// the next ones 4 to 10 ms. So the wake limit judges the release message
/// and not the JVM's start, as it does in a whole run, where other wake-ups
/// come first.
fn warm_up(ctx: &Ctx<'_>) {
    let name = ctx.name("owner-warm-up");
    let _ = super::wake::wake(
        ctx,
        ctx.rust,
        ctx.java,
        Kind::Plain,
        Kind::Plain,
        &name,
        Release::Unlock,
    );
}

/// The owner's checks, on every topology.
pub fn run(ctx: &Ctx<'_>, report: &mut Report) {
    let waits = [
        (JavaWait::Lock, "lock()".to_owned()),
        (JavaWait::TryLock, format!("tryLock({} s)", WAIT_MS / 1_000)),
    ];
    let titles = waits.map(|(how, label)| {
        let title = format!(
            "{} owner wake {label}: a redhold owner's guard dropped on another thread wakes a parked java {label}",
            ctx.topo
        );
        (how, title)
    });
    if titles.iter().any(|(_, title)| report.wants(title)) {
        warm_up(ctx);
    }
    for (how, title) in titles {
        report.check(title, || wake(ctx, how));
    }
    report.check(
        format!(
            "{} owner status: java sees a redhold owner's hold (isLocked, tryLock, isHeldByThread)",
            ctx.topo
        ),
        || seen(ctx),
    );
    report.check(
        format!(
            "{} owner lost: java forceUnlock is reported to the redhold owner's guard",
            ctx.topo
        ),
        || lost(ctx),
    );
}
