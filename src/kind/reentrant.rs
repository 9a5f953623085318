//! The plain reentrant lock (Redisson's `RLock`), also the base of the
//! fenced and spin locks, which share its hash, scripts and channel.

use super::sealed::KindOps;
use super::{Attempt, Target};
use crate::client::Client;
use crate::error::Result;
use crate::names;
use crate::scripts;

/// The plain reentrant lock: [`Lock`](crate::Lock), made by
/// [`Client::lock`](crate::Client::lock). Waiters are woken one at a time by
/// pub/sub, in no particular order.
#[derive(Debug)]
pub struct Reentrant {
    channel: String,
}

impl Reentrant {
    /// The plain lock called `name`.
    pub(super) fn new(name: &str) -> Self {
        Reentrant {
            channel: names::lock_channel(name),
        }
    }
}

impl KindOps for Reentrant {
    type Grant = ();

    const DESCRIPTION: &'static str = "plain lock";

    fn for_name(name: &str, _client: &Client) -> Self {
        Reentrant::new(name)
    }

    fn shared_channel(&self) -> Option<&str> {
        Some(&self.channel)
    }

    fn try_acquire(
        &self,
        at: Target<'_>,
        lease_ms: u64,
        field: &str,
        _: bool,
    ) -> Result<Attempt<()>> {
        Attempt::from_reply(at.name, &acquire_hash(at, lease_ms, field)?)
    }

    fn release(&self, at: Target<'_>, field: &str, request_id: &str) -> Result<Option<i64>> {
        release_hash(at, &self.channel, field, request_id)
    }

    fn force_release(&self, at: Target<'_>) -> Result<bool> {
        force_release_hash(at, &self.channel)
    }
}

/// `lua/acquire.lua`: `{1, holds}` when acquired, else `{0, PTTL}`.
pub(crate) fn acquire_hash(at: Target<'_>, lease_ms: u64, field: &str) -> Result<Vec<i64>> {
    at.client.run_write(
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

/// `lua/release.lua` with the unlock latch.
pub(crate) fn release_hash(
    at: Target<'_>,
    channel: &str,
    field: &str,
    request_id: &str,
) -> Result<Option<i64>> {
    let (latch, latch_ttl_ms) = at.unlock_latch(request_id);
    at.client.run_write(
        at.name,
        |conn| {
            scripts::RELEASE
                .key(at.name)
                .key(channel)
                .key(&latch)
                .arg(scripts::WAKE_ONE)
                .arg(field)
                .arg(latch_ttl_ms)
                .arg(at.client.publish_command())
                .invoke(conn)
        },
        |reply: &Option<i64>| reply.is_some(),
    )
}

/// `lua/force_release.lua`.
pub(crate) fn force_release_hash(at: Target<'_>, channel: &str) -> Result<bool> {
    let deleted: i64 = at.client.run_write(
        at.name,
        |conn| {
            scripts::FORCE_RELEASE
                .key(at.name)
                .key(channel)
                .arg(scripts::WAKE_ONE)
                .arg(at.client.publish_command())
                .invoke(conn)
        },
        |deleted: &i64| *deleted == 1,
    )?;
    Ok(deleted == 1)
}
