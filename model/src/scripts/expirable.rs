//! `expirable_*.lua`: the permit-expirable semaphore, a count beside a
//! sorted set of the permits out scored by their lease ends.

use super::counters::check_kind;
use super::plain::latched;
use super::{Exec, Exit};
use crate::call::{Call, LeaseOp, Publish};
use crate::keyspace::{Cmd, Str};
use crate::names::{Channel, Key, Member, Name};
use crate::reply::Reply;

fn permits(ids: &[u8]) -> Vec<Member> {
    ids.iter().map(|&id| Member::Permit(id)).collect()
}

/// Gives back the permits whose leases ended by `now`, and announces the
/// count when it is positive.
fn reclaim(x: &mut Exec<'_>, name: Name, ended: &[Member], publish: Publish) -> Cmd<Option<i64>> {
    if ended.is_empty() {
        return Ok(None);
    }
    x.ks.zrem(Key::Leases(name), ended)?;
    let available = x.ks.incrby(Key::Name(name), ended.len() as i64)?;
    if available > 0 {
        x.publish(publish, Channel::Semaphore(name), available);
    }
    Ok(Some(available))
}

/// The count at the name, 0 when absent (`tonumber(get or '0')`).
fn count(x: &Exec<'_>, name: Name) -> Cmd<i64> {
    Ok(match x.ks.get(Key::Name(name))? {
        Some(Str::Int(n)) => n,
        _ => 0,
    })
}

/// The expirable semaphore's scripts.
pub(crate) fn run(x: &mut Exec<'_>, call: &Call) -> Exit {
    match call {
        Call::ExpirableAcquire { .. } => acquire(x, call),
        &Call::ExpirableRelease {
            name,
            id,
            now,
            publish,
            latch,
            latch_ttl,
        } => {
            let latch = Key::Latch(name, latch);
            if let Some(done) = x.ks.get(latch)? {
                return Ok((latched(done), "replay"));
            }
            let (mut reply, mut branch) = (0, "not-out");
            if let Some(ends) = x.ks.zscore(Key::Leases(name), Member::Permit(id))? {
                x.ks.zrem(Key::Leases(name), &[Member::Permit(id)])?;
                let available = x.ks.incrby(Key::Name(name), 1)?;
                x.publish(publish, Channel::Semaphore(name), available);
                branch = "released-ended";
                if ends > now {
                    (reply, branch) = (1, "released");
                }
            }
            x.ks.set(latch, Str::Int(reply), Some(latch_ttl));
            Ok((Reply::Int(reply), branch))
        }
        &Call::ExpirableLease {
            name,
            now,
            publish,
            op,
        } => {
            if let Err(exit) = check_kind(x, Key::Name(name), true) {
                return Ok(exit);
            }
            let ended = x.ks.zrangebyscore(Key::Leases(name), 0, now)?;
            reclaim(x, name, &ended, publish)?;
            match op {
                LeaseOp::Available => Ok((Reply::Int(count(x, name)?), "available")),
                LeaseOp::Update(id, end) => {
                    let leases = Key::Leases(name);
                    let Some(was) = x.ks.zscore(leases, Member::Permit(id))? else {
                        return Ok((Reply::Int(0), "not-out"));
                    };
                    x.ks.zadd(leases, end, Member::Permit(id))?;
                    if end < was {
                        let available = count(x, name)?;
                        x.publish(publish, Channel::Semaphore(name), available);
                        return Ok((Reply::Int(1), "updated-sooner"));
                    }
                    Ok((Reply::Int(1), "updated"))
                }
                LeaseOp::Unknown => {
                    let e = "ERR unknown operation bogus";
                    Ok((Reply::Error(e.into()), "unknown-op"))
                }
            }
        }
        Call::ExpirableGiveBack {
            name,
            publish,
            latch,
            latch_ttl,
            ids,
        } => {
            let (name, latch) = (*name, Key::Latch(*name, *latch));
            let taken = x.ks.get(latch)? == Some(Str::Taken);
            x.ks.set(latch, Str::Closed, Some(*latch_ttl));
            if !taken {
                return Ok((Reply::Int(0), "nothing-taken"));
            }
            let removed = x.ks.zrem(Key::Leases(name), &permits(ids))?;
            if removed > 0 {
                let available = x.ks.incrby(Key::Name(name), removed)?;
                x.publish(*publish, Channel::Semaphore(name), available);
                return Ok((Reply::Int(removed), "given-back"));
            }
            Ok((Reply::Int(0), "none-out"))
        }
        _ => unreachable!("not an expirable semaphore call"),
    }
}

/// `expirable_acquire.lua`.
fn acquire(x: &mut Exec<'_>, call: &Call) -> Exit {
    let Call::ExpirableAcquire {
        name,
        lease_end,
        now,
        publish,
        latch,
        latch_ttl,
        attempt,
        ids,
    } = call
    else {
        unreachable!("not an expirable acquire")
    };
    let (name, sem, leases, latch) = (
        *name,
        Key::Name(*name),
        Key::Leases(*name),
        Key::Latch(*name, *latch),
    );
    match x.ks.get(latch)? {
        Some(Str::Taken) => return Ok((Reply::Array(vec![Reply::Int(1)]), "replay-taken")),
        Some(state @ (Str::Closed | Str::Int(_))) if !matches!(state, Str::Int(n) if n < *attempt) =>
        {
            x.ks.pexpire(latch, *latch_ttl);
            return Ok((Reply::Array(vec![Reply::Int(0), Reply::Int(-1)]), "late"));
        }
        Some(Str::Closed | Str::Int(_)) | None => {}
        Some(_) => {
            return Err(crate::keyspace::CommandError {
                code: "ERR",
                message: "attempt to compare nil with number",
            })
        }
    }
    // The kind checks, split around the lease read as the file has them.
    let kind = x.ks.type_of(sem);
    if kind != "string" {
        if let Err(exit) = check_kind(x, sem, true) {
            return Ok(exit);
        }
    }
    let ended = x.ks.zrangebyscore(leases, 0, *now)?;
    let mut available = 0;
    if kind == "string" {
        if let Err(exit) = check_kind(x, sem, true) {
            return Ok(exit);
        }
        available = count(x, name)?;
    }
    if let Some(now) = reclaim(x, name, &ended, *publish)? {
        available = now;
    }
    if available < ids.len() as i64 {
        x.ks.set(latch, Str::Int(*attempt), Some(*latch_ttl));
        if let Some(&(_, first)) = x.ks.zrange(leases)?.first() {
            return Ok((
                Reply::Array(vec![Reply::Int(0), Reply::Int(first)]),
                "too-few-lease",
            ));
        }
        return Ok((Reply::Array(vec![Reply::Int(0), Reply::Int(-1)]), "too-few"));
    }
    x.ks.incrby(sem, -(ids.len() as i64))?;
    for &id in ids {
        x.ks.zadd(leases, *lease_end, Member::Permit(id))?;
    }
    let ttl = x.ks.pttl(sem);
    if ttl > 0 {
        x.ks.pexpire(leases, ttl);
    }
    x.ks.set(latch, Str::Taken, Some(*latch_ttl));
    Ok((Reply::Array(vec![Reply::Int(1)]), "taken"))
}
