//! The fair lock: threads and processes get the lock in arrival order.

use std::time::{SystemTime, UNIX_EPOCH};

use super::sealed::KindOps;
use super::{AcquireReply, AcquireRequest, Target};
use crate::config::{saturating_millis, Config};
use crate::error::Result;
use crate::names;
use crate::scripts;

/// A first-come, first-served lock: the kind of [`FairLock`](crate::FairLock).
///
/// Waiters queue in Redis in arrival order, across threads and processes,
/// and only the head of the queue is woken (each waiter listens on its own
/// channel). A waiter that gives up leaves the queue at once; one that dies
/// is dropped once its deadline passes, the fair wait timeout after its turn
/// was due (see the builder's `fair_wait_timeout`).
#[derive(Debug, Clone)]
pub struct Fair {
    queue: String,
    deadlines: String,
    channel_prefix: String,
    wait_timeout_ms: u64,
}

/// The client's clock in ms since the epoch: deadlines in the queue are
/// absolute times, as in Redisson.
fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(saturating_millis)
        .unwrap_or(0)
}

impl KindOps for Fair {
    type Grant = ();

    const DESCRIPTION: &'static str = "fair lock";

    fn for_name(name: &str, config: &Config) -> Self {
        Fair {
            queue: names::prefixed("redisson_lock_queue", name),
            deadlines: names::prefixed("redisson_lock_timeout", name),
            channel_prefix: names::lock_channel(name),
            // At most a century: checked by `build()`.
            wait_timeout_ms: saturating_millis(config.fair_wait_timeout),
        }
    }

    fn wait_channel(&self, field: &str) -> Option<String> {
        Some(format!("{}:{field}", self.channel_prefix))
    }

    fn try_acquire(&self, at: Target<'_>, request: AcquireRequest<'_>) -> Result<AcquireReply<()>> {
        let reply: Vec<i64> = at.run_acquire(
            |conn| {
                scripts::FAIR_ACQUIRE
                    .key(at.name)
                    .key(&self.queue)
                    .key(&self.deadlines)
                    .arg(request.lease_ms)
                    .arg(request.field)
                    .arg(self.wait_timeout_ms)
                    .arg(now_ms())
                    .arg(if request.may_queue { "1" } else { "0" })
                    .arg(request.holds_here_arg())
                    .invoke(conn)
            },
            |reply: &Vec<i64>| reply.first() == Some(&1),
        )?;
        AcquireReply::from_reply(at.name, &reply)
    }

    fn release(&self, at: Target<'_>, field: &str, request_id: &str) -> Result<Option<i64>> {
        let (latch, latch_ttl_ms) = at.unlock_latch(request_id);
        let mut attempts = at.release_attempts();
        at.run_release(
            |conn| {
                scripts::FAIR_RELEASE
                    .key(at.name)
                    .key(&self.queue)
                    .key(&self.deadlines)
                    .key(&self.channel_prefix)
                    .key(&latch)
                    .arg(scripts::WAKE_ONE)
                    .arg(field)
                    .arg(now_ms())
                    .arg(latch_ttl_ms)
                    .arg(at.server.publish_command())
                    .arg(attempts.next())
                    .invoke(conn)
            },
            |reply: &Option<i64>| reply.is_some(),
        )
    }

    fn force_release(&self, at: Target<'_>) -> Result<bool> {
        let deleted: i64 = at.server.run_write(
            at.name,
            |conn| {
                scripts::FAIR_FORCE_RELEASE
                    .key(at.name)
                    .key(&self.queue)
                    .key(&self.deadlines)
                    .key(&self.channel_prefix)
                    .arg(scripts::WAKE_ONE)
                    .arg(now_ms())
                    .arg(at.server.publish_command())
                    .invoke(conn)
            },
            |deleted: &i64| *deleted == 1,
        )?;
        Ok(deleted == 1)
    }

    fn give_up(&self, at: Target<'_>, field: &str) -> Result<()> {
        let _: i64 = at.run_cleanup(|conn| {
            scripts::FAIR_GIVE_UP
                .key(at.name)
                .key(&self.queue)
                .key(&self.deadlines)
                .key(&self.channel_prefix)
                .arg(field)
                .arg(self.wait_timeout_ms)
                .arg(scripts::WAKE_ONE)
                .arg(at.server.publish_command())
                .invoke(conn)
        })?;
        Ok(())
    }
}
