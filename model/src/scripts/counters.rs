//! `semaphore_*.lua` and `latch_*.lua`: counts in string keys, each change
//! latched under its request id.

use super::plain::latched;
use super::{Exec, Exit};
use crate::call::{Call, SetOp};
use crate::keyspace::{Cmd, CommandError, Str};
use crate::names::{Channel, Key, Name};
use crate::reply::Reply;

/// The kind checks every counter script makes before it changes anything:
/// `Err` holds the exit when the key is not a count (`count_too`: also a
/// string that is not an integer).
pub(crate) fn check_kind(
    x: &Exec<'_>,
    key: Key,
    count_too: bool,
) -> Result<(), (Reply, &'static str)> {
    match x.ks.type_of(key) {
        "hash" => Err((
            Reply::Error("WRONGKIND a lock (a hash)".into()),
            "wrong-kind-hash",
        )),
        "none" => Ok(()),
        "string" => match x.ks.get(key) {
            Ok(Some(Str::Int(_))) => Ok(()),
            _ if count_too => Err((
                Reply::Error("WRONGKIND a string that is not a count".into()),
                "not-a-count",
            )),
            _ => Ok(()),
        },
        other => Err((
            Reply::Error(format!("WRONGKIND a Redis {other}")),
            "wrong-kind-other",
        )),
    }
}

/// The count at `key` once [`check_kind`] passed: `None` when absent.
fn available(x: &Exec<'_>, key: Key) -> Cmd<Option<i64>> {
    Ok(match x.ks.get(key)? {
        Some(Str::Int(n)) => Some(n),
        _ => None,
    })
}

/// Lua comparing `tonumber(state)` (nil) with a number: a script error.
const COMPARE_NIL: CommandError = CommandError {
    code: "ERR",
    message: "attempt to compare nil with number",
};

/// The semaphore's scripts.
pub(crate) fn semaphore(x: &mut Exec<'_>, call: &Call) -> Exit {
    match *call {
        Call::SemaphoreAcquire {
            name,
            permits,
            latch,
            latch_ttl,
            attempt,
        } => {
            let (sem, latch) = (Key::Name(name), Key::Latch(name, latch));
            match x.ks.get(latch)? {
                Some(Str::Taken) => return Ok((Reply::Int(1), "replay-taken")),
                Some(state @ (Str::Closed | Str::Int(_))) => {
                    let late = match state {
                        Str::Int(n) => n >= attempt,
                        _ => true,
                    };
                    if late {
                        x.ks.pexpire(latch, latch_ttl);
                        return Ok((Reply::Int(0), "late"));
                    }
                }
                Some(_) => return Err(COMPARE_NIL),
                None => {}
            }
            if let Err(exit) = check_kind(x, sem, true) {
                return Ok(exit);
            }
            if available(x, sem)?.unwrap_or(0) < permits {
                x.ks.set(latch, Str::Int(attempt), Some(latch_ttl));
                return Ok((Reply::Int(0), "too-few"));
            }
            x.ks.incrby(sem, -permits)?;
            x.ks.set(latch, Str::Taken, Some(latch_ttl));
            Ok((Reply::Int(1), "taken"))
        }
        Call::SemaphoreRelease {
            name,
            permits,
            latch,
            latch_ttl,
            publish,
        } => {
            let (sem, latch) = (Key::Name(name), Key::Latch(name, latch));
            if let Some(done) = x.ks.get(latch)? {
                return Ok((latched(done), "replay"));
            }
            if let Err(exit) = check_kind(x, sem, true) {
                return Ok(exit);
            }
            let now = x.ks.incrby(sem, permits)?;
            x.ks.set(latch, Str::Int(now), Some(latch_ttl));
            x.publish(publish, Channel::Semaphore(name), now);
            Ok((Reply::Int(now), "released"))
        }
        Call::SemaphoreSet {
            name,
            op,
            latch,
            latch_ttl,
            publish,
        } => {
            let (sem, latch) = (Key::Name(name), Key::Latch(name, latch));
            if let Some(done) = x.ks.get(latch)? {
                return Ok((latched(done), "replay"));
            }
            if let Err(exit) = check_kind(x, sem, true) {
                return Ok(exit);
            }
            let available = available(x, sem)?;
            let (reply, id) = match op {
                SetOp::TrySet(_) if available.is_some() => (0, "try-set-exists"),
                SetOp::TrySet(n) | SetOp::Set(n) => {
                    x.ks.set(sem, Str::Int(n), None);
                    x.publish(publish, Channel::Semaphore(name), n);
                    match op {
                        SetOp::Set(_) => (n, "set"),
                        _ => (1, "try-set"),
                    }
                }
                SetOp::Remove(n) if available.unwrap_or(0) < n => (-1, "remove-too-many"),
                SetOp::Remove(n) => (x.ks.incrby(sem, -n)?, "remove"),
                SetOp::Drain => match available {
                    Some(n) if n > 0 => {
                        x.ks.set(sem, Str::Int(0), None);
                        (n, "drain")
                    }
                    _ => (0, "drain-none"),
                },
                SetOp::Unknown => {
                    let e = "ERR unknown semaphore operation bogus";
                    return Ok((Reply::Error(e.into()), "unknown-op"));
                }
            };
            x.ks.set(latch, Str::Int(reply), Some(latch_ttl));
            Ok((Reply::Int(reply), id))
        }
        Call::SemaphoreGiveBack {
            name,
            permits,
            latch,
            latch_ttl,
            publish,
        } => {
            let (sem, latch) = (Key::Name(name), Key::Latch(name, latch));
            let taken = x.ks.get(latch)? == Some(Str::Taken);
            x.ks.set(latch, Str::Closed, Some(latch_ttl));
            if !taken {
                return Ok((Reply::Int(0), "nothing-taken"));
            }
            let now = x.ks.incrby(sem, permits)?;
            x.publish(publish, Channel::Semaphore(name), now);
            Ok((Reply::Int(1), "given-back"))
        }
        _ => unreachable!("not a semaphore call"),
    }
}

/// The count-down latch's scripts.
pub(crate) fn latch(x: &mut Exec<'_>, call: &Call) -> Exit {
    let (name, latch) = match *call {
        Call::LatchTrySet { name, latch, .. }
        | Call::LatchCountDown { name, latch, .. }
        | Call::LatchDelete { name, latch, .. } => (name, latch),
        _ => unreachable!("not a latch call"),
    };
    let (counter, latch): (Key, Key) = (Key::Name(name), Key::Latch(name, latch));
    match x.ks.get(latch)? {
        // `tonumber(done) or -1`: a count-down whose call was closed
        // ('closed', the only string but a count its latch holds).
        Some(done)
            if matches!(call, Call::LatchCountDown { .. }) && latched(done) == Reply::Nil =>
        {
            return Ok((Reply::Int(-1), "replay-closed"));
        }
        Some(done) => return Ok((latched(done), "replay")),
        None => {}
    }
    let channel = Channel::CountDown(name);
    match *call {
        Call::LatchTrySet {
            count,
            latch_ttl,
            publish,
            ..
        } => {
            if let Err(exit) = check_kind(x, counter, false) {
                return Ok(exit);
            }
            let (mut reply, mut id) = (0, "exists");
            if !x.ks.exists(counter) {
                x.ks.set(counter, Str::Int(count), None);
                x.publish(publish, channel, 1);
                (reply, id) = (1, "set");
            }
            x.ks.set(latch, Str::Int(reply), Some(latch_ttl));
            Ok((Reply::Int(reply), id))
        }
        Call::LatchCountDown {
            latch_ttl, publish, ..
        } => {
            if let Err(exit) = check_kind(x, counter, true) {
                return Ok(exit);
            }
            let left = x.ks.incrby(counter, -1)?;
            if left <= 0 {
                x.ks.del(counter);
            }
            if left == 0 {
                x.publish(publish, channel, 0);
            }
            let id = match left {
                1.. => "counted",
                0 => "opened",
                _ => "absent",
            };
            x.ks.set(latch, Str::Int(left.max(0)), Some(latch_ttl));
            Ok((Reply::Int(left.max(0)), id))
        }
        Call::LatchDelete {
            latch_ttl, publish, ..
        } => delete(x, name, latch, latch_ttl, publish),
        _ => unreachable!("not a latch call"),
    }
}

/// `latch_delete.lua` past its replay: its kind checks come in their own
/// order (an absent latch first).
fn delete(
    x: &mut Exec<'_>,
    name: Name,
    latch: Key,
    latch_ttl: i64,
    publish: crate::call::Publish,
) -> Exit {
    let counter = Key::Name(name);
    if !x.ks.exists(counter) {
        x.ks.set(latch, Str::Int(0), Some(latch_ttl));
        return Ok((Reply::Int(0), "absent"));
    }
    if let Err(exit) = check_kind(x, counter, true) {
        return Ok(exit);
    }
    x.ks.del(counter);
    x.publish(publish, Channel::CountDown(name), 1);
    x.ks.set(latch, Str::Int(1), Some(latch_ttl));
    Ok((Reply::Int(1), "deleted"))
}

/// `latch_count_down_undo.lua`: closes a failed `count_down` call, and
/// gives back the count its attempt took unless that count opened the
/// latch (or the latch opened since).
pub(crate) fn latch_undo(x: &mut Exec<'_>, call: &Call) -> Exit {
    let Call::LatchCountDownUndo {
        name,
        latch,
        latch_ttl,
    } = *call
    else {
        unreachable!("not a count-down's undo");
    };
    let (counter, latch) = (Key::Name(name), Key::Latch(name, latch));
    let done = x.ks.get(latch)?;
    x.ks.set(latch, Str::Closed, Some(latch_ttl));
    match done {
        None => return Ok((Reply::Int(0), "none-ran")),
        Some(Str::Closed) => return Ok((Reply::Int(0), "closed")),
        Some(Str::Int(0)) => return Ok((Reply::Int(0), "opened")),
        _ => {}
    }
    if x.ks.type_of(counter) != "string" || available(x, counter)?.is_none() {
        return Ok((Reply::Int(0), "no-count"));
    }
    x.ks.incrby(counter, 1)?;
    Ok((Reply::Int(1), "given-back"))
}
