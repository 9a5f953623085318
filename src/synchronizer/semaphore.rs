//! Redisson's `RSemaphore`: a count of permits in Redis that any thread of
//! any process may take and give back.

use std::fmt;
use std::sync::Arc;

use super::{check_permits, delete_count, permit_count, read_count, set_permits, wrong_kind};
use crate::client::Client;
use crate::error::{Error, Result};
use crate::names;
use crate::scripts;

/// The kind's name in errors.
pub(super) const SEMAPHORE: &str = "semaphore";

/// A distributed counting semaphore, wire-compatible with Redisson's
/// `RSemaphore`: Rust and Java services may share one.
///
/// Its key holds the number of permits available. [`acquire`](Self::acquire)
/// takes one (waiting while none is left) and returns a [`Permit`](crate::Permit) that
/// gives it back when dropped. Permits belong to no thread or process: any
/// caller may [`release`](Self::release) permits, and a permit taken here
/// may be given back by a Java service. A semaphore that does not exist has
/// no permits: set them first with [`try_set_permits`](Self::try_set_permits).
///
/// A waiting thread parks until a release is announced on the semaphore's
/// channel (`redisson_sc:{name}`), then looks once; it never polls.
///
/// ```no_run
/// # fn main() -> redhold::Result<()> {
/// let client = redhold::Client::open("redis://127.0.0.1:6379/")?;
/// let downloads = client.semaphore("downloads");
/// downloads.try_set_permits(4)?; // once, by whoever comes first
/// let permit = downloads.acquire()?;
/// // ... at most four of these run at once, across every process ...
/// drop(permit); // the permit goes back, and waiters hear of it
/// # Ok(()) }
/// ```
///
/// Cloning is cheap; clones are handles on the same semaphore. No I/O
/// happens until a method is called; an invalid name is reported then
/// ([`Error::InvalidName`]). A name that holds a lock or another value is
/// refused with [`Error::WrongKind`]; a name that holds a count-down latch
/// cannot be told from a semaphore (both are a number).
#[derive(Clone)]
pub struct Semaphore {
    pub(super) client: Client,
    pub(super) name: Arc<str>,
    pub(super) channel: Arc<str>,
}

impl Client {
    /// A handle on the semaphore called `name` (Redisson's `RSemaphore`).
    /// No I/O happens until the handle is used.
    pub fn semaphore(&self, name: impl Into<String>) -> Semaphore {
        let name: String = name.into();
        Semaphore {
            channel: Arc::from(names::semaphore_channel(&name)),
            name: Arc::from(name),
            client: self.clone(),
        }
    }
}

impl Semaphore {
    /// The semaphore's name: its key in Redis.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Sets the number of permits when the semaphore does not exist yet;
    /// whether it did so. `Ok(false)` leaves an existing semaphore as it is,
    /// so every process may call this at start-up.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] above `i32::MAX` permits;
    /// [`Error::WrongKind`]; Redis errors.
    pub fn try_set_permits(&self, permits: u32) -> Result<bool> {
        let reply = self.set("try_set", permit_count(permits)?)?;
        Ok(reply == 1)
    }

    /// Sets the number of permits available, whatever it was, and wakes
    /// waiters. Permits taken meanwhile are still given back on release, on
    /// top of this number.
    ///
    /// # Errors
    ///
    /// As [`try_set_permits`](Self::try_set_permits).
    pub fn set_permits(&self, permits: u32) -> Result<()> {
        self.set("set", permit_count(permits)?).map(drop)
    }

    /// Adds `delta` permits (creating the semaphore when absent), or with a
    /// negative `delta` takes that many away from those available.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] when fewer than `-delta` permits are
    /// available (nothing is taken), or `delta` is beyond `i32`;
    /// [`Error::WrongKind`]; Redis errors.
    pub fn add_permits(&self, delta: i64) -> Result<()> {
        let amount = i32::try_from(delta.unsigned_abs())
            .ok()
            .and_then(|n| u32::try_from(n).ok())
            .ok_or_else(|| Error::InvalidArgument {
                what: "permits",
                reason: format!("cannot add {delta} permits: beyond a Java int"),
            })?;
        if delta > 0 {
            return self.release(amount);
        }
        if delta == 0 {
            return Ok(());
        }
        if self.set("remove", amount)? < 0 {
            return Err(Error::InvalidArgument {
                what: "permits",
                reason: format!(
                    "cannot take away {amount} permits of semaphore {:?}: fewer are available",
                    names::shorten(&self.name)
                ),
            });
        }
        Ok(())
    }

    /// How many permits are available now (0 when the semaphore does not
    /// exist). One `GET`.
    ///
    /// # Errors
    ///
    /// [`Error::WrongKind`]; Redis errors.
    pub fn available_permits(&self) -> Result<u64> {
        self.check_name()?;
        let value: Option<String> = self
            .client
            .engine()
            .server()
            .run(|conn| redis::cmd("GET").arg(&*self.name).query(conn))
            .map_err(|e| wrong_kind(&self.name, SEMAPHORE, e))?;
        read_count(value, &self.name, SEMAPHORE)
    }

    /// Takes every available permit and says how many; they are gone until
    /// someone releases or sets permits again.
    ///
    /// # Errors
    ///
    /// [`Error::WrongKind`]; Redis errors.
    pub fn drain_permits(&self) -> Result<u64> {
        let drained = self.set("drain", 0)?;
        Ok(u64::try_from(drained).unwrap_or(0))
    }

    /// Gives `permits` permits to the semaphore (creating it when absent)
    /// and wakes waiters. Anyone may release, whoever took them: the count
    /// is not checked against what was set, as in Redisson.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for 0 or more than `i32::MAX` permits;
    /// [`Error::WrongKind`]; Redis errors.
    pub fn release(&self, permits: u32) -> Result<()> {
        check_permits(permits)?;
        self.check_name()?;
        self.client.engine().server().check_open()?;
        self.give(permits)
    }

    /// Deletes the semaphore with its permits, whoever holds them; whether
    /// there was one (Redisson's `RSemaphore.delete`). Permits taken before
    /// are still given back on release, which creates the semaphore again
    /// with those permits, as in Redisson. Waiters are told on the channel,
    /// look once, find no permits and keep waiting, as Java's do.
    ///
    /// # Errors
    ///
    /// [`Error::WrongKind`] when the name holds a lock or another value
    /// (nothing is deleted); Redis errors.
    pub fn delete(&self) -> Result<bool> {
        self.check_name()?;
        // The latch's script fits a semaphore as it is: both are a count
        // under the name, checked for kind and deleted in one step.
        delete_count(&self.client, &self.name, &self.channel, SEMAPHORE)
    }

    /// Releases `permits` (checked) permits, also after shutdown began
    /// (a [`Permit`] going back): one request, retried harmlessly.
    pub(super) fn give(&self, permits: u32) -> Result<()> {
        let server = self.client.engine().server();
        let (latch, latch_ttl) =
            server.unlock_latch(&self.name, &self.client.engine().next_request_id());
        server
            .run_write(
                &self.name,
                |conn| {
                    scripts::SEMAPHORE_RELEASE
                        .key(&*self.name)
                        .key(&*self.channel)
                        .key(&latch)
                        .arg(permits)
                        .arg(server.publish_command())
                        .arg(latch_ttl)
                        .invoke::<i64>(conn)
                },
                |_| true,
            )
            .map(drop)
            .map_err(|e| wrong_kind(&self.name, SEMAPHORE, e))
    }

    /// Runs one `semaphore_set.lua` operation with `permits`.
    fn set(&self, op: &str, permits: u32) -> Result<i64> {
        self.check_name()?;
        set_permits(
            &self.client,
            &self.name,
            &self.channel,
            SEMAPHORE,
            op,
            permits,
        )
    }

    /// Refuses a name no key can have.
    pub(super) fn check_name(&self) -> Result<()> {
        names::validate(&self.name)
    }
}

impl fmt::Debug for Semaphore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Semaphore")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}
