//! The read-write lock: many readers or one writer.

use once_cell::sync::Lazy;
use redis::Script;

use super::sealed::KindOps;
use super::{Attempt, Target};
use crate::client::Client;
use crate::error::{Error, Result};
use crate::lock::Lock;
use crate::names;
use crate::renewals::RenewKind;
use crate::scripts;

static READ_ACQUIRE: Lazy<Script> =
    Lazy::new(|| Script::new(include_str!("../../lua/read_acquire.lua")));
static READ_RELEASE: Lazy<Script> =
    Lazy::new(|| Script::new(include_str!("../../lua/read_release.lua")));
static WRITE_ACQUIRE: Lazy<Script> =
    Lazy::new(|| Script::new(include_str!("../../lua/write_acquire.lua")));
static WRITE_RELEASE: Lazy<Script> =
    Lazy::new(|| Script::new(include_str!("../../lua/write_release.lua")));
static RW_FORCE_RELEASE: Lazy<Script> =
    Lazy::new(|| Script::new(include_str!("../../lua/rw_force_release.lua")));

/// Suffix of a writer's field: `<client-uuid>:<thread-id>:write`.
const WRITE_SUFFIX: &str = ":write";
/// Wakes one waiter (a read release) / every waiter (a write release).
const WAKE_ALL: &str = "1";
/// `write_acquire.lua`'s reply when the caller holds only read holds.
const UPGRADE_REFUSED: i64 = -3;

/// A pair of locks on one name: shared read holds, or one exclusive write
/// hold. Made by [`Client::read_write_lock`](crate::Client::read_write_lock).
///
/// ```no_run
/// # fn main() -> redhold::Result<()> {
/// let client = redhold::Client::open("redis://127.0.0.1:6379/")?;
/// let rw = client.read_write_lock("config");
/// {
///     let _r1 = rw.read().lock()?;   // readers share the lock
/// }
/// let _w = rw.write().lock()?;        // the writer excludes everyone
/// let _r = rw.read().lock()?;         // ...but may read too (and keep
///                                     // reading after writing: a downgrade)
/// # Ok(()) }
/// ```
///
/// A thread that holds only read holds and asks for the write lock gets
/// [`Error::UpgradeNotSupported`] at once: it could never be granted while
/// the thread itself reads.
#[derive(Clone, Debug)]
pub struct ReadWriteLock {
    read: Lock<Read>,
    write: Lock<Write>,
}

impl ReadWriteLock {
    pub(crate) fn new(client: &Client, name: String) -> Self {
        ReadWriteLock {
            read: Lock::new(client.clone(), name.clone()),
            write: Lock::new(client.clone(), name),
        }
    }

    /// The lock's name.
    pub fn name(&self) -> &str {
        self.read.name()
    }

    /// The shared (read) side.
    pub fn read(&self) -> Lock<Read> {
        self.read.clone()
    }

    /// The exclusive (write) side.
    pub fn write(&self) -> Lock<Write> {
        self.write.clone()
    }
}

/// The read side of a [`ReadWriteLock`]: [`ReadLock`](crate::ReadLock).
#[derive(Debug)]
pub struct Read {
    channel: String,
    /// What every holder's read-hold keys start with.
    base: String,
}

/// The write side of a [`ReadWriteLock`]: [`WriteLock`](crate::WriteLock).
#[derive(Debug)]
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
    let deleted: i64 = at.client.run_write(
        at.name,
        |conn| {
            RW_FORCE_RELEASE
                .key(at.name)
                .key(channel)
                .arg(mode)
                .arg(message)
                .arg(at.client.publish_command())
                .invoke(conn)
        },
        |deleted: &i64| *deleted == 1,
    )?;
    Ok(deleted == 1)
}

fn mode_is(at: Target<'_>, mode: &str) -> Result<bool> {
    let current: Option<String> = at
        .client
        .run(|conn| redis::cmd("HGET").arg(at.name).arg("mode").query(conn))?;
    Ok(current.as_deref() == Some(mode))
}

impl KindOps for Read {
    type Grant = ();

    const DESCRIPTION: &'static str = "read lock";

    fn for_name(name: &str, _client: &Client) -> Self {
        Read {
            channel: rw_channel(name),
            base: hold_key_base(name),
        }
    }

    fn renew_kind(&self) -> RenewKind {
        RenewKind::Read
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
        let prefix = format!("{}:{field}:rwlock_timeout", self.base);
        let writer = format!("{field}{WRITE_SUFFIX}");
        let reply: Vec<i64> = at.client.run_write(
            at.name,
            |conn| {
                READ_ACQUIRE
                    .key(at.name)
                    .key(&prefix)
                    .arg(lease_ms)
                    .arg(field)
                    .arg(&writer)
                    .invoke(conn)
            },
            |reply: &Vec<i64>| reply.first() == Some(&1),
        )?;
        Attempt::from_reply(at.name, &reply)
    }

    fn release(&self, at: Target<'_>, field: &str, request_id: &str) -> Result<Option<i64>> {
        let prefix = format!("{}:{field}:rwlock_timeout", self.base);
        let (latch, latch_ttl_ms) = at.unlock_latch(request_id);
        at.client.run_write(
            at.name,
            |conn| {
                READ_RELEASE
                    .key(at.name)
                    .key(&self.channel)
                    .key(&prefix)
                    .key(&self.base)
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

    fn force_release(&self, at: Target<'_>) -> Result<bool> {
        force_release_mode(at, &self.channel, "read", scripts::WAKE_ONE)
    }

    /// Read holds exist: in mode `read`, or in mode `write` when the writer
    /// also reads (a field besides `mode` and the writer's), as Redisson's
    /// `readLock().isLocked()` says.
    fn is_locked(&self, at: Target<'_>) -> Result<bool> {
        let (mode, fields): (Option<String>, usize) = at.client.run(|conn| {
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

    fn for_name(name: &str, _client: &Client) -> Self {
        Write {
            channel: rw_channel(name),
        }
    }

    fn holder_field(&self, base: String) -> String {
        base + WRITE_SUFFIX
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
        let reader = field.strip_suffix(WRITE_SUFFIX).unwrap_or(field);
        let reply: Vec<i64> = at.client.run_write(
            at.name,
            |conn| {
                WRITE_ACQUIRE
                    .key(at.name)
                    .arg(lease_ms)
                    .arg(field)
                    .arg(reader)
                    .invoke(conn)
            },
            |reply: &Vec<i64>| reply.first() == Some(&1),
        )?;
        if reply == [0, UPGRADE_REFUSED] {
            return Err(Error::UpgradeNotSupported {
                lock: names::shorten(at.name),
            });
        }
        Attempt::from_reply(at.name, &reply)
    }

    fn release(&self, at: Target<'_>, field: &str, request_id: &str) -> Result<Option<i64>> {
        let (latch, latch_ttl_ms) = at.unlock_latch(request_id);
        at.client.run_write(
            at.name,
            |conn| {
                WRITE_RELEASE
                    .key(at.name)
                    .key(&self.channel)
                    .key(&latch)
                    .arg(WAKE_ALL)
                    .arg(field)
                    .arg(latch_ttl_ms)
                    .arg(at.client.publish_command())
                    .invoke(conn)
            },
            |reply: &Option<i64>| reply.is_some(),
        )
    }

    fn force_release(&self, at: Target<'_>) -> Result<bool> {
        force_release_mode(at, &self.channel, "write", WAKE_ALL)
    }

    fn is_locked(&self, at: Target<'_>) -> Result<bool> {
        mode_is(at, "write")
    }
}
