//! What one side sees of the other's locks: `is_locked`, hold counts,
//! try-lock refusals, for every kind.

use super::{expect_false, expect_true, Ctx, Report, LONG_LEASE, T};
use crate::side::{Kind, Side};

fn seen(ctx: &Ctx<'_>, a: &dyn Side, b: &dyn Side) -> Result<String, String> {
    let mut kinds = Vec::new();
    for kind in [
        Kind::Plain,
        Kind::Fair,
        Kind::Read,
        Kind::Write,
        Kind::Fenced,
    ] {
        if kind == Kind::Fenced && !ctx.java_fenced {
            // Not in this Redisson release: said in the line below.
            continue;
        }
        let name = ctx.name(&format!("status-{}-{}", kind.word(), a.label()));
        let (sa, sb) = (format!("{name}/a"), format!("{name}/b"));
        a.lock(&sa, kind, &name, Some(LONG_LEASE)).wait(T)?;
        a.lock(&sa, kind, &name, Some(LONG_LEASE)).wait(T)?;
        let what = |s: &str| format!("{} {} {s}", b.label(), kind.word());
        expect_true(b.is_locked(&sb, kind, &name), &what("is_locked while held"))?;
        let mine = a.hold_count(&sa, kind, &name).wait(T)?.number(0)?;
        let theirs = b.hold_count(&sb, kind, &name).wait(T)?.number(0)?;
        if (mine, theirs) != (2, 0) {
            return Err(format!(
                "{}: hold counts {mine} (holder, after two acquires) and {theirs} (other side)",
                kind.word()
            ));
        }
        if kind != Kind::Read {
            expect_false(
                b.try_lock(&sb, kind, &name, 0, None),
                &what("try_lock while held"),
            )?;
        }
        a.unlock(&sa, kind, &name).wait(T)?;
        expect_true(
            b.is_locked(&sb, kind, &name),
            &what("is_locked with one hold left"),
        )?;
        a.unlock(&sa, kind, &name).wait(T)?;
        expect_false(
            b.is_locked(&sb, kind, &name),
            &what("is_locked after the last release"),
        )?;
        kinds.push(kind.word());
    }
    let fenced = if ctx.java_fenced {
        ""
    } else {
        " (fenced: no RFencedLock in this Redisson)"
    };
    Ok(format!(
        "{}{fenced}: {} sees {}'s holds (is_locked, hold count 0 vs 2, try_lock refused) and their release",
        kinds.join(", "),
        b.label(),
        a.label()
    ))
}

pub fn run(ctx: &Ctx<'_>, report: &mut Report) {
    for (a, b) in ctx.directions() {
        report.check(
            format!(
                "{} status: {} sees {}'s locks",
                ctx.topo,
                b.label(),
                a.label()
            ),
            || seen(ctx, a, b),
        );
    }
}
