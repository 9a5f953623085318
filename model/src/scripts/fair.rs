//! `fair_acquire.lua`, `fair_release.lua`, `fair_give_up.lua` and
//! `fair_force_release.lua`: the fair lock, its queue and deadlines.

use super::plain::{count, latched, pair};
use super::{Exec, Exit, Mutation};
use crate::call::{Attempt, Call, Publish};
use crate::keyspace::{Cmd, HashValue, Str};
use crate::names::{Channel, Field, Key, Member, Name};
use crate::reply::Reply;

/// Drops from the queue's head every waiter whose deadline is not after
/// `now` (or that has none): the loop every fair script but give-up opens
/// with.
fn drop_expired(x: &mut Exec<'_>, name: Name, now: i64) -> Cmd<()> {
    let (queue, deadlines) = (Key::Queue(name), Key::Deadlines(name));
    while let Some(head) = x.ks.lindex(queue, true)? {
        if x.ks
            .zscore(deadlines, Member::Field(head))?
            .is_some_and(|d| d > now)
        {
            break;
        }
        x.ks.lpop(queue)?;
        x.ks.zrem(deadlines, &[Member::Field(head)])?;
    }
    Ok(())
}

/// Publishes the wake-up on the queue head's own channel, if there is one.
fn wake_head(x: &mut Exec<'_>, name: Name, publish: Publish) -> Cmd<()> {
    if let Some(head) = x.ks.lindex(Key::Queue(name), true)? {
        x.publish(publish, Channel::Fair(name, head), 0);
    }
    Ok(())
}

/// `{0, t}` where `t` came from a TTL or a deadline.
fn wait_for(t: i64) -> Reply {
    Reply::Array(vec![Reply::Int(0), Reply::Ttl(t)])
}

/// `fair_acquire.lua`.
pub(crate) fn acquire(x: &mut Exec<'_>, call: &Call) -> Exit {
    let Call::FairAcquire {
        name,
        field,
        lease,
        wait,
        now,
        join,
        reentry_only,
    } = *call
    else {
        unreachable!("not a fair acquire")
    };
    let (lock, queue, deadlines) = (Key::Name(name), Key::Queue(name), Key::Deadlines(name));
    if reentry_only && !x.ks.hexists(lock, field)? {
        return Ok((pair(2, 0), "reentry-lost"));
    }
    drop_expired(x, name, now)?;
    let exists = x.ks.exists(lock);
    if exists && x.ks.hexists(lock, Field::Mode)? {
        return Ok((
            Reply::Error("WRONGKIND read-write lock".into()),
            "wrong-kind",
        ));
    }
    if !exists {
        let head = x.ks.lindex(queue, true)?;
        if head.is_none() || head == Some(field) {
            let mut id = "new";
            if head.is_some() {
                x.ks.lpop(queue)?;
                x.ks.zrem(deadlines, &[Member::Field(field)])?;
                for (behind, _) in x.ks.zrange(deadlines)? {
                    x.ks.zincrby(deadlines, -wait, behind)?;
                }
                id = "new-from-queue";
            }
            x.ks.hset(lock, field, HashValue::Int(1))?;
            x.ks.pexpire(lock, lease);
            return Ok((pair(1, 1), id));
        }
    }
    if x.ks.hexists(lock, field)? {
        let holds = x.ks.hincrby(lock, field, 1)?;
        let ttl = x.ks.pttl(lock);
        if ttl != -1 && ttl < lease {
            x.ks.pexpire(lock, lease);
        }
        return Ok((pair(1, holds), "reentry"));
    }
    let pttl = x.ks.pttl(lock);
    if x.ks.zscore(deadlines, Member::Field(field))?.is_some() {
        let head = x.ks.lindex(queue, true)?;
        let Some(head) = head.filter(|h| *h != field) else {
            return Ok((wait_for(pttl), "queued-head"));
        };
        let head_deadline = x.ks.zscore(deadlines, Member::Field(head))?.unwrap_or(now);
        let until_head = (head_deadline - now).max(1);
        if pttl > 0 {
            return Ok((wait_for(pttl.min(until_head)), "queued-behind"));
        }
        return Ok((wait_for(until_head), "queued-behind-free"));
    }
    if !join {
        return Ok((wait_for(pttl.max(0)), "try-busy"));
    }
    let ttl = match x.ks.lindex(queue, false)? {
        Some(last) => x.ks.zscore(deadlines, Member::Field(last))?.unwrap_or(now) - now,
        None => pttl,
    }
    .max(0);
    x.ks.zadd(deadlines, ttl + wait + now, Member::Field(field))?;
    x.ks.rpush(queue, field)?;
    Ok((wait_for(ttl), "queued"))
}

/// `fair_release.lua`.
pub(crate) fn release(x: &mut Exec<'_>, call: &Call) -> Exit {
    let Call::FairRelease {
        name,
        field,
        now,
        latch,
        latch_ttl,
        publish,
        attempt,
    } = *call
    else {
        unreachable!("not a fair release")
    };
    let (lock, latch) = (Key::Name(name), Key::Latch(name, latch));
    let retry = attempt == Attempt::Retry;
    if let Some(value) = x.ks.get(latch)? {
        return Ok((latched(value), "replay"));
    }
    if let Attempt::Above(n) = attempt {
        if count(x.ks.hget(lock, field)?).unwrap_or(0) <= n {
            return Ok((Reply::Int(4), "undo-nothing"));
        }
    }
    drop_expired(x, name, now)?;
    // `latch_gone()`: 3, latched, on a retry; nil otherwise.
    let gone = |x: &mut Exec<'_>, ids: (&'static str, &'static str)| -> Exit {
        if retry {
            if !x.mutated(Mutation::FairRetryGoneNotLatched) {
                x.ks.set(latch, Str::Int(3), Some(latch_ttl));
            }
            return Ok((Reply::Int(3), ids.0));
        }
        Ok((Reply::Nil, ids.1))
    };
    if !x.ks.exists(lock) {
        wake_head(x, name, publish)?;
        return gone(x, ("free-retry-gone", "free-not-held"));
    }
    if x.ks.hexists(lock, Field::Mode)? {
        return Ok((Reply::Nil, "read-write"));
    }
    if !x.ks.hexists(lock, field)? {
        return gone(x, ("retry-gone", "not-held"));
    }
    if x.ks.hincrby(lock, field, -1)? > 0 {
        x.ks.set(latch, Str::Int(0), Some(latch_ttl));
        return Ok((Reply::Int(0), "holds-remain"));
    }
    x.ks.del(lock);
    x.ks.set(latch, Str::Int(1), Some(latch_ttl));
    wake_head(x, name, publish)?;
    Ok((Reply::Int(1), "freed"))
}

/// `fair_give_up.lua`.
pub(crate) fn give_up(x: &mut Exec<'_>, call: &Call) -> Exit {
    let Call::FairGiveUp {
        name,
        field,
        wait,
        publish,
    } = *call
    else {
        unreachable!("not a give-up")
    };
    let (queue, deadlines) = (Key::Queue(name), Key::Deadlines(name));
    if x.ks.zscore(deadlines, Member::Field(field))?.is_none() {
        return Ok((Reply::Int(0), "not-queued"));
    }
    let mut behind = false;
    for waiter in x.ks.lrange(queue)? {
        if behind {
            x.ks.zincrby(deadlines, -wait, Member::Field(waiter))?;
        } else if waiter == field {
            behind = true;
        }
    }
    x.ks.lrem(queue, field)?;
    x.ks.zrem(deadlines, &[Member::Field(field)])?;
    if !x.ks.exists(Key::Name(name)) {
        wake_head(x, name, publish)?;
    }
    Ok((Reply::Int(1), "left"))
}

/// `fair_force_release.lua`.
pub(crate) fn force_release(x: &mut Exec<'_>, call: &Call) -> Exit {
    let Call::FairForceRelease { name, now, publish } = *call else {
        unreachable!("not a fair force release")
    };
    drop_expired(x, name, now)?;
    let deleted = x.ks.del(Key::Name(name));
    wake_head(x, name, publish)?;
    let id = if deleted == 1 { "deleted" } else { "absent" };
    Ok((Reply::Int(deleted), id))
}
