//! `read_acquire.lua`, `read_release.lua`, `write_acquire.lua`,
//! `write_release.lua` and `rw_force_release.lua`: the read-write lock, its
//! `mode` field and each read hold's own key.

use super::plain::{busy, count, latched, pair};
use super::{Cmd, Exec, Exit, Mutation};
use crate::call::{Attempt, Call};
use crate::keyspace::{HashValue, Str};
use crate::names::{Channel, Field, Key, Name};
use crate::reply::Reply;

/// `read_acquire.lua`.
pub(crate) fn read_acquire(x: &mut Exec<'_>, call: &Call) -> Exit {
    let Call::ReadAcquire {
        name,
        holder,
        lease,
        reentry_only,
    } = *call
    else {
        unreachable!("not a read acquire")
    };
    let (lock, reader, writer) = (
        Key::Name(name),
        Field::Reader(holder),
        Field::Writer(holder),
    );
    let dropped = drop_expired_holds(x, name, reader)?;
    if reentry_only && !x.ks.hexists(lock, reader)? {
        let id = if dropped {
            "reentry-lost-expired"
        } else {
            "reentry-lost"
        };
        return Ok((pair(2, 0), id));
    }
    let mode = x.ks.hget(lock, Field::Mode)?;
    if mode.is_none() {
        if x.ks.exists(lock) {
            return Ok((
                Reply::Error("WRONGKIND plain or fair lock".into()),
                "wrong-kind",
            ));
        }
        x.ks.hset(lock, Field::Mode, HashValue::Read)?;
        x.ks.hset(lock, reader, HashValue::Int(1))?;
        x.ks.set(Key::ReadHold(name, reader, 1), Str::Int(1), Some(lease));
        x.ks.pexpire(lock, lease);
        let id = if dropped { "new-after-expired" } else { "new" };
        return Ok((pair(1, 1), id));
    }
    if mode == Some(HashValue::Read)
        || (mode == Some(HashValue::Write) && x.ks.hexists(lock, writer)?)
    {
        let count = x.ks.hincrby(lock, reader, 1)?;
        x.ks.set(
            Key::ReadHold(name, reader, count as u16),
            Str::Int(1),
            Some(lease),
        );
        let ttl = x.ks.pttl(lock);
        if ttl != -1 {
            x.ks.pexpire(lock, ttl.max(lease));
        }
        let id = if dropped {
            "shared-after-expired"
        } else {
            "shared"
        };
        return Ok((pair(1, count), id));
    }
    Ok((busy(x.ks.pttl(lock)), "busy"))
}

/// `read_acquire.lua`'s first step: the holder's field none of whose
/// hold keys is left goes (and a hash left with its mode only). Whether
/// it went.
fn drop_expired_holds(x: &mut Exec<'_>, name: Name, reader: Field) -> Cmd<bool> {
    let lock = Key::Name(name);
    if x.mutated(Mutation::ReadAcquireKeepsExpiredHolds) || !x.ks.hexists(lock, Field::Mode)? {
        return Ok(false);
    }
    let count = match x.ks.hget(lock, reader)? {
        Some(HashValue::Int(n)) if n > 0 => n as u16,
        _ => return Ok(false),
    };
    let live = (1..=count).any(|k| {
        let ttl = x.ks.pttl(Key::ReadHold(name, reader, k));
        ttl == -1 || ttl > 0
    });
    if live {
        return Ok(false);
    }
    x.ks.hdel(lock, reader)?;
    if x.ks.hlen(lock)? == 1 {
        x.ks.del(lock);
    }
    Ok(true)
}

/// `read_release.lua`'s `sooner`: whether PTTL `a` ends sooner than PTTL
/// `b`, where -2 (gone) is soonest and -1 (no expiry) never ends.
fn sooner(a: i64, b: i64) -> bool {
    if a == -1 {
        return false;
    }
    b == -1 || a < b
}

/// `read_release.lua`.
pub(crate) fn read_release(x: &mut Exec<'_>, call: &Call) -> Exit {
    let Call::ReadRelease {
        name,
        holder,
        latch,
        latch_ttl,
        publish,
        attempt,
    } = *call
    else {
        unreachable!("not a read release")
    };
    let (lock, latch, reader) = (
        Key::Name(name),
        Key::Latch(name, latch),
        Field::Reader(holder),
    );
    if let Some(value) = x.ks.get(latch)? {
        return Ok((latched(value), "replay"));
    }
    if let Attempt::Above(n) = attempt {
        if count(x.ks.hget(lock, reader)?).unwrap_or(0) <= n {
            return Ok((Reply::Int(4), "undo-nothing"));
        }
    }
    let mode = x.ks.hget(lock, Field::Mode)?;
    if mode.is_none() || !x.ks.hexists(lock, reader)? {
        if attempt == Attempt::Retry {
            if !x.mutated(Mutation::ReadRetryGoneNotLatched) {
                x.ks.set(latch, Str::Int(3), Some(latch_ttl));
            }
            return Ok((Reply::Int(3), "retry-gone"));
        }
        return Ok((Reply::Nil, "not-held"));
    }
    let left = x.ks.hincrby(lock, reader, -1)?;
    if left == 0 {
        x.ks.hdel(lock, reader)?;
    }
    // The hold key with the shortest TTL goes (the last one's TTL moves
    // into it), ties to the last.
    let hold = |k: i64| Key::ReadHold(name, reader, k as u16);
    let last = hold(left + 1);
    let (mut shortest, mut shortest_ttl) = (left + 1, x.ks.pttl(last));
    for k in 1..=left {
        let ttl = x.ks.pttl(hold(k));
        if sooner(ttl, shortest_ttl) {
            (shortest, shortest_ttl) = (k, ttl);
        }
    }
    if shortest <= left {
        let last_ttl = x.ks.pttl(last);
        if last_ttl > 0 {
            x.ks.set(hold(shortest), Str::Int(1), Some(last_ttl));
        } else if last_ttl == -1 {
            x.ks.set(hold(shortest), Str::Int(1), None);
        }
    }
    x.ks.del(last);
    let (mut reply, mut id) = (1, "freed");
    if mode == Some(HashValue::Write) {
        (reply, id) = (0, "writer-holds");
    } else if x.ks.hlen(lock)? > 1 {
        let mut longest = -3;
        for field in x.ks.hkeys(lock)? {
            if let Some(count) = count(x.ks.hget(lock, field)?) {
                for k in 1..=count {
                    let ttl = x.ks.pttl(Key::ReadHold(name, field, k as u16));
                    if sooner(longest, ttl) {
                        longest = ttl;
                    }
                }
            }
        }
        if longest == -1 {
            x.ks.persist(lock);
            (reply, id) = (0, "others-remain-for-ever");
        } else if longest > 0 {
            let before = x.ks.pttl(lock);
            x.ks.pexpire(lock, longest);
            id = "others-remain";
            if sooner(longest, before) {
                x.publish(publish, Channel::ReadWrite(name), 0);
                id = match before {
                    -1 => "others-remain-given-a-ttl",
                    _ => "others-remain-sooner",
                };
            }
            reply = 0;
        } else {
            id = "freed-others-expired";
        }
    }
    if reply == 1 {
        x.ks.del(lock);
        x.publish(publish, Channel::ReadWrite(name), 0);
    }
    x.ks.set(latch, Str::Int(reply), Some(latch_ttl));
    Ok((Reply::Int(reply), id))
}

/// `write_acquire.lua`.
pub(crate) fn write_acquire(x: &mut Exec<'_>, call: &Call) -> Exit {
    let Call::WriteAcquire {
        name,
        holder,
        lease,
        reentry_only,
    } = *call
    else {
        unreachable!("not a write acquire")
    };
    let (lock, reader, writer) = (
        Key::Name(name),
        Field::Reader(holder),
        Field::Writer(holder),
    );
    if reentry_only && !x.ks.hexists(lock, writer)? {
        return Ok((pair(2, 0), "reentry-lost"));
    }
    let mode = x.ks.hget(lock, Field::Mode)?;
    if mode.is_none() {
        if x.ks.exists(lock) {
            return Ok((
                Reply::Error("WRONGKIND plain or fair lock".into()),
                "wrong-kind",
            ));
        }
        x.ks.hset(lock, Field::Mode, HashValue::Write)?;
        x.ks.hset(lock, writer, HashValue::Int(1))?;
        x.ks.pexpire(lock, lease);
        return Ok((pair(1, 1), "new"));
    }
    if mode == Some(HashValue::Write) && x.ks.hexists(lock, writer)? {
        let holds = x.ks.hincrby(lock, writer, 1)?;
        let ttl = x.ks.pttl(lock);
        if ttl != -1 && ttl < lease {
            x.ks.pexpire(lock, lease);
        }
        return Ok((pair(1, holds), "reentry"));
    }
    if mode == Some(HashValue::Read) && x.ks.hexists(lock, reader)? {
        return Ok((pair(0, -3), "upgrade"));
    }
    Ok((busy(x.ks.pttl(lock)), "busy"))
}

/// `write_release.lua`.
pub(crate) fn write_release(x: &mut Exec<'_>, call: &Call) -> Exit {
    let Call::WriteRelease {
        name,
        holder,
        latch,
        latch_ttl,
        publish,
        attempt,
    } = *call
    else {
        unreachable!("not a write release")
    };
    let (lock, latch, writer) = (
        Key::Name(name),
        Key::Latch(name, latch),
        Field::Writer(holder),
    );
    if let Some(value) = x.ks.get(latch)? {
        return Ok((latched(value), "replay"));
    }
    if let Attempt::Above(n) = attempt {
        if count(x.ks.hget(lock, writer)?).unwrap_or(0) <= n {
            return Ok((Reply::Int(4), "undo-nothing"));
        }
    }
    if x.ks.hget(lock, Field::Mode)? != Some(HashValue::Write) || !x.ks.hexists(lock, writer)? {
        if attempt == Attempt::Retry {
            if !x.mutated(Mutation::WriteRetryGoneNotLatched) {
                x.ks.set(latch, Str::Int(3), Some(latch_ttl));
            }
            return Ok((Reply::Int(3), "retry-gone"));
        }
        return Ok((Reply::Nil, "not-held"));
    }
    if x.ks.hincrby(lock, writer, -1)? > 0 {
        x.ks.set(latch, Str::Int(0), Some(latch_ttl));
        return Ok((Reply::Int(0), "holds-remain"));
    }
    x.ks.hdel(lock, writer)?;
    let id = if x.ks.hlen(lock)? == 1 {
        x.ks.del(lock);
        "freed"
    } else {
        x.ks.hset(lock, Field::Mode, HashValue::Read)?;
        "downgraded"
    };
    x.ks.set(latch, Str::Int(1), Some(latch_ttl));
    x.publish(publish, Channel::ReadWrite(name), 1);
    Ok((Reply::Int(1), id))
}

/// `rw_force_release.lua`: message `1` (wake all) for the write mode, as
/// the library sends, `0` for the read mode.
pub(crate) fn force_release(x: &mut Exec<'_>, call: &Call) -> Exit {
    let Call::RwForceRelease {
        name,
        write,
        publish,
    } = *call
    else {
        unreachable!("not a read-write force release")
    };
    let mode = if write {
        HashValue::Write
    } else {
        HashValue::Read
    };
    if x.ks.hget(Key::Name(name), Field::Mode)? == Some(mode) {
        x.ks.del(Key::Name(name));
        x.publish(publish, Channel::ReadWrite(name), i64::from(write));
        return Ok((Reply::Int(1), "deleted"));
    }
    Ok((Reply::Int(0), "absent"))
}
