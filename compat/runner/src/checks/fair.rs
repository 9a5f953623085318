//! Fair lock: Java and Rust waiters queued in an interleaved order are
//! served in exactly that order, each woken through its own channel by the
//! release of a waiter from the other side.

use std::thread;
use std::time::{Duration, Instant};

use super::{prefixed, Ctx, Report, LONG_LEASE, T};
use crate::side::{Kind, Op, Side};

/// Waiters per side.
const PER_SIDE: usize = 3;

fn order(ctx: &Ctx<'_>, first: &dyn Side, second: &dyn Side) -> Result<String, String> {
    let name = ctx.name(&format!("fair-order-{}-first", first.label()));
    let queue = prefixed("redisson_lock_queue", &name);
    let list = format!("{name}:served");
    let holder = format!("{name}/holder");
    // The holder is on the second side, so the first hand-off crosses too.
    second
        .lock(&holder, Kind::Fair, &name, Some(LONG_LEASE))
        .wait(T)?;

    let mut expected = Vec::new();
    let mut pending = Vec::new();
    for i in 0..PER_SIDE * 2 {
        let side = if i % 2 == 0 { first } else { second };
        let label = format!("{}{}", side.label(), i / 2 + 1);
        let op = Op::Section {
            kind: Kind::Fair,
            name: name.clone(),
            label: label.clone(),
            list: list.clone(),
            hold: 5,
        };
        pending.push(side.call(&format!("{name}/{label}"), op));
        expected.push(label);
        // The next waiter starts only once this one is in the queue.
        let deadline = Instant::now() + T;
        loop {
            let queued: i64 = ctx.redis.at(&queue, redis::cmd("LLEN").arg(&queue))?;
            if queued == i64::try_from(i + 1).unwrap_or(-1) {
                break;
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "waiter {} never joined the queue (length {queued})",
                    i + 1
                ));
            }
            thread::sleep(Duration::from_millis(2));
        }
    }
    // Give the last waiter time to subscribe before the chain starts.
    thread::sleep(Duration::from_millis(200));
    second.unlock(&holder, Kind::Fair, &name).wait(T)?;
    let started = Instant::now();
    for p in pending {
        p.wait(T)?;
    }
    let took = started.elapsed();
    let served: Vec<String> = ctx
        .redis
        .at(&list, redis::cmd("LRANGE").arg(&list).arg(0).arg(-1))?;
    if served != expected {
        return Err(format!("queued {expected:?}, served {served:?}"));
    }
    Ok(format!(
        "queued and served {} ({} hand-offs in {:.0} ms)",
        served.join(" "),
        served.len(),
        took.as_secs_f64() * 1000.0
    ))
}

pub fn run(ctx: &Ctx<'_>, report: &mut Report) {
    for (first, second) in ctx.directions() {
        let title = format!(
            "{} fair order: {} and {} waiters interleaved, {} first",
            ctx.topo,
            first.label(),
            second.label(),
            first.label()
        );
        report.check(title, || order(ctx, first, second));
    }
}
