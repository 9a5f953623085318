//! Fenced lock: one token counter for both sides, every acquire (re-entries
//! included) gets a larger token than any before it, whoever took it.

use super::{Ctx, Report, LONG_LEASE, T};
use crate::side::{Kind, Side};

fn tokens(ctx: &Ctx<'_>) -> Result<String, String> {
    let name = ctx.name("fenced-tokens");
    let mut seen: Vec<(String, i64)> = Vec::new();
    for round in 0..6 {
        for side in [ctx.java as &dyn Side, ctx.rust as &dyn Side] {
            let slot = format!("{name}/{}{round}", side.label());
            let outer = side
                .lock(&slot, Kind::Fenced, &name, Some(LONG_LEASE))
                .wait(T)?
                .number(0)?;
            let inner = side
                .lock(&slot, Kind::Fenced, &name, Some(LONG_LEASE))
                .wait(T)?
                .number(0)?;
            seen.push((format!("{}{round}", side.label()), outer));
            seen.push((format!("{}{round}'", side.label()), inner));
            side.unlock(&slot, Kind::Fenced, &name).wait(T)?;
            side.unlock(&slot, Kind::Fenced, &name).wait(T)?;
        }
    }
    // Redisson's getToken() reads the same counter redhold increments.
    let current = ctx
        .java
        .call(&format!("{name}/t"), token_op(&name))
        .wait(T)?
        .number(0)?;
    let all: Vec<i64> = seen.iter().map(|(_, t)| *t).collect();
    if let Some(w) = all.windows(2).find(|w| w[1] <= w[0]) {
        return Err(format!(
            "token {} came after token {}: {seen:?}",
            w[1], w[0]
        ));
    }
    let last = all.last().copied().unwrap_or(0);
    if current != last {
        return Err(format!(
            "Redisson's getToken() says {current}, the last acquire got {last}"
        ));
    }
    Ok(format!(
        "{} acquires alternating java/rust, re-entries included: tokens {}..={} strictly increasing; getToken() = {current}",
        all.len(),
        all.first().copied().unwrap_or(0),
        last
    ))
}

/// Redisson's `RFencedLock.getToken()`.
fn token_op(name: &str) -> crate::side::Op {
    crate::side::Op::Token {
        name: name.to_owned(),
    }
}

pub fn run(ctx: &Ctx<'_>, report: &mut Report) {
    report.check(
        format!("{} fenced tokens increase across both sides", ctx.topo),
        || tokens(ctx),
    );
}
