//! The plain lock's layout, a hash of holder fields announced on
//! `redisson_lock__channel:{name}`, shared by the reentrant, fenced and spin
//! locks: the release and force-release every one of them runs, and the
//! plain acquire of the two without tokens.

use redis::Value;

use super::sealed::unexpected_reply;
use super::{AcquireReply, AcquireRequest, ReleasedTo, Successor, Target, ANNOUNCED, HANDED_OVER};
use crate::error::Result;
use crate::scripts;

/// `lua/acquire.lua`, the plain and the spin lock's acquire.
pub(super) fn acquire(at: Target<'_>, request: AcquireRequest<'_>) -> Result<AcquireReply<()>> {
    let reply: Vec<i64> = at.run_acquire(
        |conn| {
            scripts::ACQUIRE
                .key(at.name)
                .arg(request.lease_ms)
                .arg(request.field)
                .arg(request.holds_here_arg())
                .invoke(conn)
        },
        |reply: &Vec<i64>| reply.first() == Some(&1),
    )?;
    AcquireReply::from_reply(at.name, &reply)
}

/// `lua/release.lua` with the unlock latch.
pub(super) fn release(
    at: Target<'_>,
    channel: &str,
    field: &str,
    request_id: &str,
) -> Result<Option<i64>> {
    Ok(release_to(at, channel, field, request_id, None)?.reply)
}

/// `lua/release.lua` with the unlock latch, handing a freed lock to
/// `successor`, if one is named (and drawing its fencing token when it
/// names a counter).
pub(super) fn release_to(
    at: Target<'_>,
    channel: &str,
    field: &str,
    request_id: &str,
    successor: Option<Successor<'_>>,
) -> Result<ReleasedTo> {
    let (latch, latch_ttl_ms) = at.unlock_latch(request_id);
    let mut attempts = at.release_attempts();
    let reply: Value = at.run_release(
        |conn| {
            let mut call = scripts::RELEASE.prepare_invoke();
            call.key(at.name)
                .key(channel)
                .key(&latch)
                .arg(scripts::WAKE_ONE)
                .arg(field)
                .arg(latch_ttl_ms)
                .arg(at.server.publish_command())
                .arg(attempts.next());
            if let Some(successor) = successor {
                call.arg(successor.field).arg(successor.lease_ms);
                if let Some(token_key) = successor.token_key {
                    call.key(token_key);
                }
            }
            call.invoke(conn)
        },
        |reply: &Value| *reply != Value::Nil,
    )?;
    released_to(at.name, &reply)
}

/// Reads a release reply: nil, a number, `{1, heard}` for a release
/// announced to `heard` subscribers, or `{2, token}` for a hand-over that
/// drew a fencing token.
fn released_to(name: &str, reply: &Value) -> Result<ReleasedTo> {
    match reply {
        Value::Nil => Ok(ReleasedTo::code(None)),
        Value::Int(code) => Ok(ReleasedTo::code(Some(*code))),
        Value::Array(items) => match items.as_slice() {
            [Value::Int(ANNOUNCED), Value::Int(heard)] if *heard >= 0 => Ok(ReleasedTo {
                heard: u64::try_from(*heard).ok(),
                ..ReleasedTo::code(Some(ANNOUNCED))
            }),
            [Value::Int(HANDED_OVER), Value::Int(token)] if *token > 0 => Ok(ReleasedTo {
                token: u64::try_from(*token).ok(),
                ..ReleasedTo::code(Some(HANDED_OVER))
            }),
            _ => Err(unexpected_reply(name, reply)),
        },
        _ => Err(unexpected_reply(name, reply)),
    }
}

/// `lua/force_release.lua`.
pub(super) fn force_release(at: Target<'_>, channel: &str) -> Result<bool> {
    let deleted: i64 = at.server.run_write(
        at.name,
        |conn| {
            scripts::FORCE_RELEASE
                .key(at.name)
                .key(channel)
                .arg(scripts::WAKE_ONE)
                .arg(at.server.publish_command())
                .invoke(conn)
        },
        |deleted: &i64| *deleted == 1,
    )?;
    Ok(deleted == 1)
}
