//! Redisson's `RPermitExpirableSemaphore`: permits with an id and a lease,
//! which go back to the pool on their own when the lease ends.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::{permit_count, set_permits, wrong_kind};
use crate::client::Client;
use crate::config::lease_millis;
use crate::error::{Error, Result};
use crate::names;
use crate::scripts;

/// The kind's name in errors.
pub(super) const EXPIRABLE: &str = "permit-expirable semaphore";

/// A distributed semaphore whose permits expire, wire-compatible with
/// Redisson's `RPermitExpirableSemaphore`.
///
/// Each permit taken has a random id ([`ExpirablePermit::id`](crate::ExpirablePermit::id))
/// and a lease: when the lease ends, the permit goes back to the pool by
/// itself (the next call that looks at the semaphore, from any client,
/// gives it back), so a process that dies holding permits does not keep
/// them. [`release`](Self::release) gives one back by its id, from any
/// thread or process.
///
/// ```no_run
/// # fn main() -> redhold::Result<()> {
/// use std::time::Duration;
/// let client = redhold::Client::open("redis://127.0.0.1:6379/")?;
/// let slots = client.permit_expirable_semaphore("render-slots");
/// slots.try_set_permits(2)?;
/// let permit = slots.acquire(Duration::from_secs(60))?;
/// println!("holding {}", permit.id());
/// // ... gone after a minute at most, whatever happens to this process ...
/// drop(permit);
/// # Ok(()) }
/// ```
///
/// Lease ends are wall-clock times (ms since the epoch) from the clock of
/// the client that took or renewed the permit, as in Redisson: clients on
/// hosts whose clocks disagree see leases end early or late by as much.
/// Waiters park until a release is announced or the earliest lease ends.
#[derive(Clone)]
pub struct PermitExpirableSemaphore {
    pub(super) client: Client,
    pub(super) name: Arc<str>,
    /// The sorted set of permits out, scored by lease end.
    pub(super) leases: Arc<str>,
    pub(super) channel: Arc<str>,
}

impl Client {
    /// A handle on the permit-expirable semaphore called `name` (Redisson's
    /// `RPermitExpirableSemaphore`). No I/O happens until the handle is
    /// used.
    pub fn permit_expirable_semaphore(&self, name: impl Into<String>) -> PermitExpirableSemaphore {
        let name: String = name.into();
        PermitExpirableSemaphore {
            leases: Arc::from(names::suffixed(&name, "timeout")),
            channel: Arc::from(names::semaphore_channel(&name)),
            name: Arc::from(name),
            client: self.clone(),
        }
    }
}

impl PermitExpirableSemaphore {
    /// The semaphore's name: its key in Redis.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Sets the number of permits when the semaphore does not exist yet;
    /// whether it did so.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] above `i32::MAX`; [`Error::WrongKind`];
    /// Redis errors.
    pub fn try_set_permits(&self, permits: u32) -> Result<bool> {
        self.check_name()?;
        let permits = permit_count(permits)?;
        let set = set_permits(
            &self.client,
            &self.name,
            &self.channel,
            EXPIRABLE,
            "try_set",
            permits,
        )?;
        Ok(set == 1)
    }

    /// How many permits are available now, after giving back those whose
    /// lease ended.
    ///
    /// # Errors
    ///
    /// [`Error::WrongKind`]; Redis errors.
    pub fn available_permits(&self) -> Result<u64> {
        let available = self.lease_script(&["available"])?;
        Ok(u64::try_from(available).unwrap_or(0))
    }

    /// Gives back the permit `id` (from [`ExpirablePermit::id`](crate::ExpirablePermit::id),
    /// of this or another client, Java's included) and wakes waiters.
    /// `Ok(true)` when it was out and its lease had not ended; `Ok(false)`
    /// when it was not out, or its lease had ended (it goes back then too).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] when `id` is not 32 hex digits; Redis
    /// errors.
    pub fn release(&self, id: &str) -> Result<bool> {
        let id = parse_id(id)?;
        self.check_name()?;
        self.client.engine().server().check_open()?;
        self.give(&id)
    }

    /// Sets the lease of permit `id` to end `lease` from now; whether the
    /// permit was out (a permit whose lease ended cannot be renewed).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for a bad id or a zero lease;
    /// [`Error::WrongKind`]; Redis errors.
    pub fn update_lease(&self, id: &str, lease: Duration) -> Result<bool> {
        let id = parse_id(id)?;
        let ends = now_ms().saturating_add(lease_millis(lease)?);
        let server = self.client.engine().server();
        self.check_name()?;
        let updated: i64 = server
            .run_write(
                &self.name,
                |conn| {
                    scripts::EXPIRABLE_LEASE
                        .key(&*self.name)
                        .key(&*self.leases)
                        .key(&*self.channel)
                        .arg(now_ms())
                        .arg(server.publish_command())
                        .arg("update")
                        .arg(&id[..])
                        .arg(ends)
                        .invoke(conn)
                },
                |_| true,
            )
            .map_err(|e| wrong_kind(&self.name, EXPIRABLE, e))?;
        Ok(updated == 1)
    }

    /// Gives back permit `id` (raw bytes), also after shutdown began (a
    /// guard going back): one request, retried harmlessly.
    pub(super) fn give(&self, id: &[u8]) -> Result<bool> {
        let server = self.client.engine().server();
        let (latch, latch_ttl) =
            server.unlock_latch(&self.name, &self.client.engine().next_request_id());
        let released: i64 = server
            .run_write(
                &self.name,
                |conn| {
                    scripts::EXPIRABLE_RELEASE
                        .key(&*self.name)
                        .key(&*self.leases)
                        .key(&*self.channel)
                        .key(&latch)
                        .arg(id)
                        .arg(now_ms())
                        .arg(server.publish_command())
                        .arg(latch_ttl)
                        .invoke(conn)
                },
                |_| true,
            )
            .map_err(|e| wrong_kind(&self.name, EXPIRABLE, e))?;
        Ok(released == 1)
    }

    /// Runs `lua/expirable_lease.lua` with `op`.
    fn lease_script(&self, op: &[&str]) -> Result<i64> {
        self.check_name()?;
        let server = self.client.engine().server();
        server
            .run_write(
                &self.name,
                |conn| {
                    scripts::EXPIRABLE_LEASE
                        .key(&*self.name)
                        .key(&*self.leases)
                        .key(&*self.channel)
                        .arg(now_ms())
                        .arg(server.publish_command())
                        .arg(op)
                        .invoke(conn)
                },
                |_| true,
            )
            .map_err(|e| wrong_kind(&self.name, EXPIRABLE, e))
    }

    /// Refuses a name no key can have.
    pub(super) fn check_name(&self) -> Result<()> {
        names::validate(&self.name)
    }
}

/// Now on this host's clock, in ms since the epoch: what lease ends are
/// counted in (Redisson's `System.currentTimeMillis()`).
pub(super) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// A permit id as Redisson writes it, 32 lowercase hex digits, to the 16
/// bytes stored in the lease set.
pub(super) fn parse_id(id: &str) -> Result<[u8; 16]> {
    let bad = || Error::InvalidArgument {
        what: "permit id",
        reason: format!(
            "{:?} is not a permit id (32 hex digits)",
            names::shorten(id)
        ),
    };
    if id.len() != 32 || !id.is_ascii() {
        return Err(bad());
    }
    let mut bytes = [0u8; 16];
    for (i, byte) in bytes.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&id[2 * i..2 * i + 2], 16).map_err(|_| bad())?;
    }
    Ok(bytes)
}

/// The id of a permit: its 16 bytes as 32 lowercase hex digits.
pub(super) fn format_id(bytes: &[u8; 16]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl fmt::Debug for PermitExpirableSemaphore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PermitExpirableSemaphore")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_go_to_bytes_and_back() {
        let id = "00ff10a0b1c2d3e4f5061728394a5b6c";
        assert_eq!(format_id(&parse_id(id).unwrap()), id);
        assert_eq!(
            parse_id("00FF10A0B1C2D3E4F5061728394A5B6C").unwrap()[1],
            0xff
        );
        for bad in [
            "",
            "00ff",
            "zz".repeat(16).as_str(),
            "é".repeat(16).as_str(),
        ] {
            assert!(
                matches!(parse_id(bad), Err(Error::InvalidArgument { .. })),
                "{bad}"
            );
        }
    }
}
