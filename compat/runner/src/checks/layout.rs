//! The same lock state, made once by Redisson and once by redhold, must
//! leave the same keys in Redis: names, types, fields, values, list order,
//! which keys have a TTL. Holder fields and the lock name are replaced by
//! placeholders before comparing. Release latches are left out: Redisson
//! deletes its latch once the release's reply arrives, redhold lets its
//! latch expire (see docs/wire-format.md).

use std::time::{SystemTime, UNIX_EPOCH};

use super::{prefixed, Ctx, Report, LONG_LEASE, T};
use crate::side::{Kind, Side};

/// A state to build and compare.
#[derive(Clone, Copy)]
enum State {
    /// One thread holds a plain lock twice.
    PlainTwice,
    /// A fenced lock held once.
    Fenced,
    /// A fair lock held, a second thread queued behind it.
    FairQueued,
    /// A read lock held twice by one thread.
    ReadTwice,
    /// A writer that also took a read lock.
    WriteAndRead,
    /// The same after the write lock was released (a downgrade).
    Downgraded,
}

impl State {
    fn label(self) -> &'static str {
        match self {
            State::PlainTwice => "plain held twice",
            State::Fenced => "fenced held",
            State::FairQueued => "fair held with one waiter queued",
            State::ReadTwice => "read held twice",
            State::WriteAndRead => "write plus read by the writer",
            State::Downgraded => "downgraded to read",
        }
    }
}

/// Builds `state` on `side` under `name`, snapshots it and cleans up.
fn build(ctx: &Ctx<'_>, side: &dyn Side, state: State, name: &str) -> Result<String, String> {
    let (a, b) = (format!("{name}/a"), format!("{name}/b"));
    let lease = Some(LONG_LEASE);
    let mut fields = Vec::new();
    let holder = |fields: &mut Vec<(String, &'static str)>| -> Result<(), String> {
        let keys: Vec<String> = ctx.redis.at(name, redis::cmd("HKEYS").arg(name))?;
        let field = keys
            .iter()
            .find(|k| *k != "mode")
            .ok_or("no holder field in the hash")?;
        let field = field.strip_suffix(":write").unwrap_or(field).to_owned();
        fields.push((field, "<holder>"));
        Ok(())
    };
    let snapshot = match state {
        State::PlainTwice | State::Fenced | State::ReadTwice => {
            let kind = match state {
                State::PlainTwice => Kind::Plain,
                State::Fenced => Kind::Fenced,
                _ => Kind::Read,
            };
            let times = if matches!(state, State::Fenced) { 1 } else { 2 };
            for _ in 0..times {
                side.lock(&a, kind, name, lease).wait(T)?;
            }
            holder(&mut fields)?;
            let snap = snapshot(ctx, name, &fields)?;
            for _ in 0..times {
                side.unlock(&a, kind, name).wait(T)?;
            }
            snap
        }
        State::FairQueued => {
            side.lock(&a, Kind::Fair, name, lease).wait(T)?;
            holder(&mut fields)?;
            let mut waiter = side.lock(&b, Kind::Fair, name, lease);
            ctx.wait_parked(Kind::Fair, name, &mut waiter)?;
            let queue = prefixed("redisson_lock_queue", name);
            let head: Option<String> = ctx
                .redis
                .at(&queue, redis::cmd("LINDEX").arg(&queue).arg(0))?;
            fields.push((head.ok_or("nobody queued")?, "<waiter>"));
            let snap = snapshot(ctx, name, &fields)?;
            side.unlock(&a, Kind::Fair, name).wait(T)?;
            waiter.wait(T)?;
            side.unlock(&b, Kind::Fair, name).wait(T)?;
            snap
        }
        State::WriteAndRead | State::Downgraded => {
            side.lock(&a, Kind::Write, name, lease).wait(T)?;
            side.lock(&a, Kind::Read, name, lease).wait(T)?;
            holder(&mut fields)?;
            if matches!(state, State::Downgraded) {
                side.unlock(&a, Kind::Write, name).wait(T)?;
            }
            let snap = snapshot(ctx, name, &fields)?;
            if matches!(state, State::WriteAndRead) {
                side.unlock(&a, Kind::Write, name).wait(T)?;
            }
            side.unlock(&a, Kind::Read, name).wait(T)?;
            snap
        }
    };
    Ok(snapshot_text(&snapshot))
}

fn snapshot_text(lines: &[String]) -> String {
    lines.join("\n")
}

/// Every key whose name contains `name`, as sorted lines
/// `key type ttl|no-ttl value`, with placeholders for the fields.
fn snapshot(
    ctx: &Ctx<'_>,
    name: &str,
    fields: &[(String, &'static str)],
) -> Result<Vec<String>, String> {
    let now_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as f64)
        .unwrap_or(0.0);
    let normal = |text: &str| -> String {
        let mut text = text.replace(name, "<name>");
        for (field, label) in fields {
            text = text.replace(field.as_str(), label);
        }
        text
    };
    let mut lines = Vec::new();
    for key in ctx.redis.keys(&format!("*{name}*"))? {
        if key.starts_with("redisson_unlock_latch:") {
            // Redisson deletes its latch as soon as the release's reply
            // arrives; redhold lets it expire (docs/wire-format.md). Only
            // the lock's own keys are compared.
            continue;
        }
        let kind: String = ctx.redis.at(&key, redis::cmd("TYPE").arg(&key))?;
        let pttl: i64 = ctx.redis.at(&key, redis::cmd("PTTL").arg(&key))?;
        let ttl = if pttl > 0 { "ttl" } else { "no-ttl" };
        let value = match kind.as_str() {
            "hash" => {
                let mut pairs: Vec<(String, String)> =
                    ctx.redis.at(&key, redis::cmd("HGETALL").arg(&key))?;
                let mut pairs: Vec<String> = pairs
                    .drain(..)
                    .map(|(f, v)| format!("{}={v}", normal(&f)))
                    .collect();
                pairs.sort();
                pairs.join(",")
            }
            "list" => {
                let items: Vec<String> = ctx
                    .redis
                    .at(&key, redis::cmd("LRANGE").arg(&key).arg(0).arg(-1))?;
                items
                    .iter()
                    .map(|i| normal(i))
                    .collect::<Vec<_>>()
                    .join(",")
            }
            "zset" => {
                let items: Vec<(String, f64)> = ctx.redis.at(
                    &key,
                    redis::cmd("ZRANGE")
                        .arg(&key)
                        .arg(0)
                        .arg(-1)
                        .arg("WITHSCORES"),
                )?;
                items
                    .iter()
                    .map(|(m, s)| {
                        format!(
                            "{}@{}",
                            normal(m),
                            if *s > now_ms { "future" } else { "past" }
                        )
                    })
                    .collect::<Vec<_>>()
                    .join(",")
            }
            "string" => {
                let value: String = ctx.redis.at(&key, redis::cmd("GET").arg(&key))?;
                value
            }
            other => format!("<{other}>"),
        };
        lines.push(format!("{} {kind} {ttl} {value}", normal(&key)));
    }
    lines.sort();
    Ok(lines)
}

fn compare(ctx: &Ctx<'_>, state: State, tagged: bool) -> Result<String, String> {
    let slug = state.label().replace(' ', "-");
    let name_for = |side: &str| {
        if tagged {
            format!("{{compat}}:{}:layout-{slug}-{side}", ctx.topo)
        } else {
            ctx.name(&format!("layout-{slug}-{side}"))
        }
    };
    let java = build(ctx, ctx.java, state, &name_for("java"))?;
    let rust = build(ctx, ctx.rust, state, &name_for("rust"))?;
    if java != rust {
        return Err(format!(
            "layouts differ\n--- Redisson ---\n{java}\n--- redhold ---\n{rust}"
        ));
    }
    let keys = java.lines().count();
    let summary: Vec<String> = java
        .lines()
        .map(|l| l.split(' ').take(2).collect::<Vec<_>>().join(" "))
        .collect();
    Ok(format!("same {keys} key(s): {}", summary.join("; ")))
}

pub fn run(ctx: &Ctx<'_>, report: &mut Report) {
    let states = [
        (State::PlainTwice, false),
        (State::Fenced, false),
        (State::FairQueued, false),
        (State::FairQueued, true),
        (State::ReadTwice, false),
        (State::ReadTwice, true),
        (State::WriteAndRead, false),
        (State::Downgraded, false),
    ];
    for (state, tagged) in states {
        let tag = if tagged { ", name with a hash tag" } else { "" };
        report.check(
            format!(
                "{} layout {}{tag}: redisson and redhold leave the same keys",
                ctx.topo,
                state.label()
            ),
            || compare(ctx, state, tagged),
        );
    }
}
