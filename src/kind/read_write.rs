//! The two kinds of a read-write lock: many readers or one writer.

use std::sync::Arc;

use super::sealed::KindOps;
use super::{AcquireReply, AcquireRequest, Target};
use crate::config::Config;
use crate::error::{Error, Result};
use crate::names;
use crate::renewals::RenewKind;
use crate::scripts;

/// Suffix of a writer's field: `<client-uuid>:<thread-id>:write`.
const WRITE_SUFFIX: &str = ":write";
/// `write_acquire.lua`'s reply when the caller holds only read holds.
const UPGRADE_REFUSED: i64 = -3;

/// The read side of a [`ReadWriteLock`](crate::ReadWriteLock): the kind of
/// [`ReadLock`](crate::ReadLock).
#[derive(Debug, Clone)]
pub struct Read {
    channel: String,
    /// What every holder's read-hold keys start with.
    base: String,
}

/// The write side of a [`ReadWriteLock`](crate::ReadWriteLock): the kind of
/// [`WriteLock`](crate::WriteLock).
#[derive(Debug, Clone)]
pub struct Write {
    channel: String,
}

/// `{name}`, or the name itself when it carries a hash tag.
fn hold_key_base(name: &str) -> String {
    if name.contains('{') {
        name.to_owned()
    } else {
        format!("{{{name}}}")
    }
}

fn rw_channel(name: &str) -> String {
    names::prefixed("redisson_rwlock", name)
}

fn force_release_mode(at: Target<'_>, channel: &str, mode: &str, message: &str) -> Result<bool> {
    let deleted: i64 = at.server.run_write(
        at.name,
        |conn| {
            scripts::RW_FORCE_RELEASE
                .key(at.name)
                .key(channel)
                .arg(mode)
                .arg(message)
                .arg(at.server.publish_command())
                .invoke(conn)
        },
        |deleted: &i64| *deleted == 1,
    )?;
    Ok(deleted == 1)
}

fn mode_is(at: Target<'_>, mode: &str) -> Result<bool> {
    let current: Option<String> = at
        .server
        .run(|conn| redis::cmd("HGET").arg(at.name).arg("mode").query(conn))?;
    Ok(current.as_deref() == Some(mode))
}

impl KindOps for Read {
    type Grant = ();

    const DESCRIPTION: &'static str = "read lock";

    fn for_name(name: &str, _config: &Config) -> Self {
        Read {
            channel: rw_channel(name),
            base: hold_key_base(name),
        }
    }

    fn entered_through(&self, base: &Arc<str>) -> Option<Arc<str>> {
        // The write lock's holder may take the read lock whoever waits.
        Some(Arc::from(format!("{base}{WRITE_SUFFIX}")))
    }

    fn renew_kind(&self) -> RenewKind {
        RenewKind::Read
    }

    fn shared_channel(&self) -> Option<&str> {
        Some(&self.channel)
    }

    fn try_acquire(&self, at: Target<'_>, request: AcquireRequest<'_>) -> Result<AcquireReply<()>> {
        let field = request.field;
        let prefix = format!("{}:{field}:rwlock_timeout", self.base);
        let writer = format!("{field}{WRITE_SUFFIX}");
        let reply: Vec<i64> = at.run_acquire(
            |conn| {
                scripts::READ_ACQUIRE
                    .key(at.name)
                    .key(&prefix)
                    .arg(request.lease_ms)
                    .arg(field)
                    .arg(&writer)
                    .arg(request.holds_here_arg())
                    .invoke(conn)
            },
            |reply: &Vec<i64>| reply.first() == Some(&1),
        )?;
        AcquireReply::from_reply(at.name, &reply)
    }

    fn release(&self, at: Target<'_>, field: &str, request_id: &str) -> Result<Option<i64>> {
        let prefix = format!("{}:{field}:rwlock_timeout", self.base);
        let (latch, latch_ttl_ms) = at.unlock_latch(request_id);
        let mut attempts = at.release_attempts();
        at.run_release(
            |conn| {
                scripts::READ_RELEASE
                    .key(at.name)
                    .key(&self.channel)
                    .key(&prefix)
                    .key(&self.base)
                    .key(&latch)
                    .arg(scripts::WAKE_ONE)
                    .arg(field)
                    .arg(latch_ttl_ms)
                    .arg(at.server.publish_command())
                    .arg(attempts.next())
                    .invoke(conn)
            },
            |reply: &Option<i64>| reply.is_some(),
        )
    }

    fn force_release(&self, at: Target<'_>) -> Result<bool> {
        force_release_mode(at, &self.channel, "read", scripts::WAKE_ONE)
    }

    /// Read holds exist: in mode `read`, or in mode `write` when the writer
    /// also reads (a field besides `mode` and the writer's), as Redisson's
    /// `readLock().isLocked()` says.
    fn is_locked(&self, at: Target<'_>) -> Result<bool> {
        let (mode, fields): (Option<String>, usize) = at.server.run(|conn| {
            redis::pipe()
                .cmd("HGET")
                .arg(at.name)
                .arg("mode")
                .cmd("HLEN")
                .arg(at.name)
                .query(conn)
        })?;
        Ok(match mode.as_deref() {
            Some("read") => true,
            Some("write") => fields > 2,
            _ => false,
        })
    }
}

impl KindOps for Write {
    type Grant = ();

    const DESCRIPTION: &'static str = "write lock";

    fn for_name(name: &str, _config: &Config) -> Self {
        Write {
            channel: rw_channel(name),
        }
    }

    fn holder_field(&self, base: &Arc<str>) -> Arc<str> {
        Arc::from(format!("{base}{WRITE_SUFFIX}"))
    }

    fn shared_channel(&self) -> Option<&str> {
        Some(&self.channel)
    }

    fn try_acquire(&self, at: Target<'_>, request: AcquireRequest<'_>) -> Result<AcquireReply<()>> {
        let field = request.field;
        let reader = field.strip_suffix(WRITE_SUFFIX).unwrap_or(field);
        let reply: Vec<i64> = at.run_acquire(
            |conn| {
                scripts::WRITE_ACQUIRE
                    .key(at.name)
                    .arg(request.lease_ms)
                    .arg(field)
                    .arg(reader)
                    .arg(request.holds_here_arg())
                    .invoke(conn)
            },
            |reply: &Vec<i64>| reply.first() == Some(&1),
        )?;
        if reply == [0, UPGRADE_REFUSED] {
            return Err(Error::UpgradeNotSupported {
                lock: names::shorten(at.name),
            });
        }
        AcquireReply::from_reply(at.name, &reply)
    }

    fn release(&self, at: Target<'_>, field: &str, request_id: &str) -> Result<Option<i64>> {
        let (latch, latch_ttl_ms) = at.unlock_latch(request_id);
        let mut attempts = at.release_attempts();
        at.run_release(
            |conn| {
                scripts::WRITE_RELEASE
                    .key(at.name)
                    .key(&self.channel)
                    .key(&latch)
                    .arg(scripts::WAKE_ALL)
                    .arg(field)
                    .arg(latch_ttl_ms)
                    .arg(at.server.publish_command())
                    .arg(attempts.next())
                    .invoke(conn)
            },
            |reply: &Option<i64>| reply.is_some(),
        )
    }

    fn force_release(&self, at: Target<'_>) -> Result<bool> {
        force_release_mode(at, &self.channel, "write", scripts::WAKE_ALL)
    }

    fn is_locked(&self, at: Target<'_>) -> Result<bool> {
        mode_is(at, "write")
    }
}
