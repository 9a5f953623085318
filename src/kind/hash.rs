//! The plain lock's layout, a hash of holder fields announced on
//! `redisson_lock__channel:{name}`, shared by the reentrant, fenced and spin
//! locks: the release and force-release every one of them runs, and the
//! plain acquire of the two without tokens.

use super::{ReleaseAttempts, Successor, Target};
use crate::error::Result;
use crate::scripts;

/// `lua/acquire.lua`: `{1, holds}` when acquired, else `{0, PTTL}`.
pub(super) fn acquire(at: Target<'_>, lease_ms: u64, field: &str) -> Result<Vec<i64>> {
    at.server.run_write(
        at.name,
        |conn| {
            scripts::ACQUIRE
                .key(at.name)
                .arg(lease_ms)
                .arg(field)
                .invoke(conn)
        },
        |reply: &Vec<i64>| reply.first() == Some(&1),
    )
}

/// `lua/release.lua` with the unlock latch, handing a freed lock to
/// `successor` when there is one.
pub(super) fn release(
    at: Target<'_>,
    channel: &str,
    field: &str,
    request_id: &str,
    successor: Option<Successor<'_>>,
) -> Result<Option<i64>> {
    let (latch, latch_ttl_ms) = at.unlock_latch(request_id);
    let mut attempts = ReleaseAttempts::default();
    at.server.run_write(
        at.name,
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
            }
            call.invoke(conn)
        },
        |reply: &Option<i64>| reply.is_some(),
    )
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
