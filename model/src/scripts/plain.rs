//! `acquire.lua`, `fenced_acquire.lua`, `release.lua`, `force_release.lua`
//! and `renew.lua`: the plain (and fenced) lock.

use super::{Exec, Exit, Mutation};
use crate::call::{Attempt, Call};
use crate::keyspace::{Cmd, HashValue, Str};
use crate::names::{Channel, Field, Key};
use crate::reply::Reply;

/// Lua's `tonumber(hget(...))`: a count, or nil (`mode`'s value too).
pub(crate) fn count(value: Option<HashValue>) -> Option<i64> {
    match value {
        Some(HashValue::Int(n)) => Some(n),
        _ => None,
    }
}

/// Lua's `tonumber(get(...))` of a latched reply.
pub(crate) fn latched(value: Str) -> Reply {
    match value {
        Str::Int(n) => Reply::Int(n),
        _ => Reply::Nil,
    }
}

/// `{0, PTTL}`: the busy reply.
pub(crate) fn busy(pttl: i64) -> Reply {
    Reply::Array(vec![Reply::Int(0), Reply::Ttl(pttl)])
}

/// `{a, b}` of plain integers.
pub(crate) fn pair(a: i64, b: i64) -> Reply {
    Reply::Array(vec![Reply::Int(a), Reply::Int(b)])
}

/// The fencing-token counter's check (`fenced_acquire.lua`'s
/// `check_counter`, `release.lua` line 58): what INCR accepts and turns
/// into a positive token. `Some` holds the counter when it fails.
fn corrupt_counter(x: &Exec<'_>, key: Key) -> Cmd<Option<Str>> {
    Ok(match x.ks.get(key)? {
        None => None,
        Some(Str::Int(n)) if (0..i64::MAX).contains(&n) => None,
        Some(other) => Some(other),
    })
}

/// `acquire.lua` and `fenced_acquire.lua` (the same flow; the fenced one
/// checks and draws the token).
pub(crate) fn acquire(x: &mut Exec<'_>, call: &Call) -> Exit {
    let (name, field, lease, reentry_only, fenced) = match *call {
        Call::Acquire {
            name,
            field,
            lease,
            reentry_only,
        } => (name, field, lease, reentry_only, false),
        Call::FencedAcquire {
            name,
            field,
            lease,
            reentry_only,
        } => (name, field, lease, reentry_only, true),
        _ => unreachable!("not an acquire"),
    };
    let (lock, token) = (Key::Name(name), Key::Token(name));
    let corrupt = |x: &Exec<'_>| -> Cmd<Option<Reply>> {
        Ok(corrupt_counter(x, token)?.map(|c| Reply::Error(format!("CORRUPT {c}"))))
    };
    if reentry_only && !x.ks.hexists(lock, field)? {
        return Ok((pair(2, 0), "reentry-lost"));
    }
    if !x.ks.exists(lock) {
        if fenced {
            if let Some(e) = corrupt(x)? {
                return Ok((e, "corrupt-new"));
            }
        }
        x.ks.hset(lock, field, HashValue::Int(1))?;
        if !x.mutated(Mutation::AcquireWithoutTtl) {
            x.ks.pexpire(lock, lease);
        }
        if fenced {
            let t = x.ks.incrby(token, 1)?;
            return Ok((
                Reply::Array(vec![Reply::Int(1), Reply::Int(1), Reply::Int(t)]),
                "new",
            ));
        }
        return Ok((pair(1, 1), "new"));
    }
    if x.ks.hexists(lock, Field::Mode)? {
        return Ok((
            Reply::Error("WRONGKIND read-write lock".into()),
            "wrong-kind",
        ));
    }
    if x.ks.hexists(lock, field)? {
        if fenced {
            if let Some(e) = corrupt(x)? {
                return Ok((e, "corrupt-reentry"));
            }
        }
        let holds = x.ks.hincrby(lock, field, 1)?;
        let ttl = x.ks.pttl(lock);
        if ttl != -1 && ttl < lease {
            x.ks.pexpire(lock, lease);
        }
        if fenced {
            let t = x.ks.incrby(token, 1)?;
            let reply = Reply::Array(vec![Reply::Int(1), Reply::Int(holds), Reply::Int(t)]);
            return Ok((reply, "reentry"));
        }
        return Ok((pair(1, holds), "reentry"));
    }
    Ok((busy(x.ks.pttl(lock)), "busy"))
}

/// `release.lua`.
pub(crate) fn release(x: &mut Exec<'_>, call: &Call) -> Exit {
    let Call::Release {
        name,
        field,
        latch,
        latch_ttl,
        publish,
        attempt,
        successor,
    } = *call
    else {
        unreachable!("not a release")
    };
    let (lock, latch) = (Key::Name(name), Key::Latch(name, latch));
    let retry = attempt == Attempt::Retry;
    let reads_latch = !x.mutated(Mutation::ReleaseSkipsLatch)
        && (retry || !x.mutated(Mutation::FirstAttemptSkipsLatch));
    if reads_latch {
        match x.ks.get(latch)? {
            Some(Str::HandedOver(t)) => return Ok((pair(2, t), "replay-token")),
            Some(value) => return Ok((latched(value), "replay")),
            None => {}
        }
    }
    if let Attempt::Above(n) = attempt {
        if count(x.ks.hget(lock, field)?).unwrap_or(0) <= n {
            return Ok((Reply::Int(4), "undo-nothing"));
        }
    }
    let mut successor = successor;
    if let Some(s) = successor {
        if s.fenced && corrupt_counter(x, Key::Token(name))?.is_some() {
            successor = None;
        }
    }
    if x.ks.hexists(lock, Field::Mode)? {
        return Ok((Reply::Nil, "read-write"));
    }
    if !x.ks.hexists(lock, field)? {
        if retry {
            if !x.mutated(Mutation::RetryGoneNotLatched) {
                x.ks.set(latch, Str::Int(3), Some(latch_ttl));
            }
            return Ok((Reply::Int(3), "retry-gone"));
        }
        return Ok((Reply::Nil, "not-held"));
    }
    if x.ks.hincrby(lock, field, -1)? > 0 {
        x.ks.set(latch, Str::Int(0), Some(latch_ttl));
        return Ok((Reply::Int(0), "holds-remain"));
    }
    if let Some(s) = successor {
        if x.ks.hlen(lock)? == 1 {
            let before = x.ks.pttl(lock);
            x.ks.hdel(lock, field)?;
            x.ks.hset(lock, s.field, HashValue::Int(1))?;
            x.ks.pexpire(lock, s.lease);
            if (before == -1 || s.lease < before) && !x.mutated(Mutation::HandOverWithoutPublish) {
                x.publish(publish, Channel::Lock(name), 0);
            }
            if s.fenced {
                let t = x.ks.incrby(Key::Token(name), 1)?;
                x.ks.set(latch, Str::HandedOver(t), Some(latch_ttl));
                return Ok((pair(2, t), "hand-over-fenced"));
            }
            x.ks.set(latch, Str::Int(2), Some(latch_ttl));
            if before == -1 {
                // Told apart so that the walks must reach it.
                return Ok((Reply::Int(2), "hand-over-given-a-ttl"));
            }
            return Ok((Reply::Int(2), "hand-over"));
        }
    }
    x.ks.del(lock);
    x.ks.set(latch, Str::Int(1), Some(latch_ttl));
    let heard = x.publish(publish, Channel::Lock(name), 0);
    Ok((pair(1, heard), "freed"))
}

/// `force_release.lua`.
pub(crate) fn force_release(x: &mut Exec<'_>, call: &Call) -> Exit {
    let Call::ForceRelease { name, publish } = *call else {
        unreachable!("not a force release")
    };
    if x.ks.del(Key::Name(name)) == 1 {
        x.publish(publish, Channel::Lock(name), 0);
        return Ok((Reply::Int(1), "deleted"));
    }
    Ok((Reply::Int(0), "absent"))
}

/// `renew.lua`.
pub(crate) fn renew(x: &mut Exec<'_>, call: &Call) -> Exit {
    let Call::Renew { ttl, ref locks } = *call else {
        unreachable!("not a renewal")
    };
    let mut renewed = Vec::with_capacity(locks.len());
    let mut id = "renewed";
    for lock in locks {
        let key = Key::Name(lock.name);
        let mut count = count(x.ks.hget(key, lock.field)?);
        let mut holds = Vec::new();
        if let (Some(n), true) = (count, lock.read) {
            for k in 1..=n {
                let hold = Key::ReadHold(lock.name, lock.field, k as u16);
                if x.ks.exists(hold) {
                    holds.push(hold);
                }
            }
            if holds.is_empty() {
                count = None;
                // Told apart so that the walks must reach it.
                id = "read-keys-gone";
            }
        }
        if count.is_none() {
            renewed.push(Reply::Int(0));
            continue;
        }
        let key_ttl = x.ks.pttl(key);
        if key_ttl != -1 && key_ttl < ttl {
            x.ks.pexpire(key, ttl);
        }
        for hold in holds {
            let hold_ttl = x.ks.pttl(hold);
            if hold_ttl != -1 && hold_ttl < ttl {
                x.ks.pexpire(hold, ttl);
            }
        }
        renewed.push(Reply::Int(1));
    }
    Ok((Reply::Array(renewed), id))
}
