//! Redisson's `RCountDownLatch`: a count in Redis that opens the latch for
//! every waiter, in every process, when it reaches zero.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use super::wait::{Look, WaitOn};
use super::{delete_count, end_call, read_count, wrong_kind};
use crate::client::Client;
use crate::error::{Error, Result};
use crate::interrupt::Interrupt;
use crate::names;
use crate::scripts;
use crate::server::Resends;

/// The kind's name in errors.
const LATCH: &str = "count-down latch";

/// A distributed count-down latch, wire-compatible with Redisson's
/// `RCountDownLatch`: Rust and Java services may share one.
///
/// [`try_set_count`](Self::try_set_count) arms it with a count;
/// [`count_down`](Self::count_down) takes one off; at zero the key is
/// deleted and every thread in [`wait`](Self::wait) (Java's `await`), in
/// any process, goes on. A latch that does not exist is open (count 0).
///
/// ```no_run
/// # fn main() -> redhold::Result<()> {
/// let client = redhold::Client::open("redis://127.0.0.1:6379/")?;
/// let ready = client.count_down_latch("workers-ready");
/// ready.try_set_count(3)?;
/// // ... each of three workers calls ready.count_down()? when ready ...
/// ready.wait()?; // returns once all three have
/// # Ok(()) }
/// ```
///
/// Waiters park until a message on the latch's channel
/// (`redisson_countdownlatch__channel__{name}`), then look at the count
/// once; they never poll. Cloning is cheap. A name that holds a lock or
/// another value is refused with [`Error::WrongKind`]; a name that holds a
/// semaphore cannot be told from a latch (both are a number).
#[derive(Clone)]
pub struct CountDownLatch {
    pub(super) client: Client,
    pub(super) name: Arc<str>,
    pub(super) channel: Arc<str>,
}

impl Client {
    /// A handle on the count-down latch called `name` (Redisson's
    /// `RCountDownLatch`). No I/O happens until the handle is used.
    pub fn count_down_latch(&self, name: impl Into<String>) -> CountDownLatch {
        let name: String = name.into();
        CountDownLatch {
            channel: Arc::from(names::latch_channel(&name)),
            name: Arc::from(name),
            client: self.clone(),
        }
    }
}

impl CountDownLatch {
    /// The latch's name: its key in Redis.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Arms the latch with `count` when it is not armed (its count is 0);
    /// whether it did so.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for a count of 0 (the latch would be
    /// open already) or above `i64::MAX`; [`Error::WrongKind`]; Redis errors.
    pub fn try_set_count(&self, count: u64) -> Result<bool> {
        if count == 0 || i64::try_from(count).is_err() {
            return Err(Error::InvalidArgument {
                what: "count",
                reason: format!("a latch's count must be between 1 and {}", i64::MAX),
            });
        }
        self.check_name()?;
        let server = self.client.engine().server();
        let (latch, latch_ttl) =
            server.unlock_latch(&self.name, &self.client.engine().next_request_id());
        let set: i64 = server
            .run_write(
                &self.name,
                |conn| {
                    scripts::LATCH_TRY_SET
                        .key(&*self.name)
                        .key(&*self.channel)
                        .key(&latch)
                        .arg(count)
                        .arg(server.publish_command())
                        .arg(latch_ttl)
                        .invoke(conn)
                },
                |set: &i64| *set == 1,
            )
            .map_err(|e| wrong_kind(&self.name, LATCH, e))?;
        Ok(set == 1)
    }

    /// Takes one off the count; the call that brings it to zero opens the
    /// latch for every waiter. On an open latch it does nothing. Returns
    /// the count left.
    ///
    /// All its attempts (the pool's retries) share one request latch, so a
    /// retry never counts down twice. A call that fails closes that latch
    /// before it returns (`latch_count_down_undo.lua` on a connection of
    /// its own; when Redis cannot be reached for that, behind its late
    /// attempts and carried on by the release worker), so that an attempt
    /// still on its way counts nothing when it comes, and gives back the
    /// count an attempt took, unless that count opened the latch: an error
    /// means the count-down did not happen, or it did in the round it was
    /// called in (see `docs/reliability.md` for the window left when the
    /// undo could not be sent at once).
    ///
    /// # Errors
    ///
    /// [`Error::WrongKind`]; Redis errors.
    pub fn count_down(&self) -> Result<u64> {
        self.check_name()?;
        let engine = self.client.engine();
        let server = engine.server();
        let mut request = server.request(&self.name, &engine.next_request_id(), Resends::Retries);
        let counted = server.run_request(
            &self.name,
            &mut request,
            |conn, latch, latch_ttl, _attempt| {
                scripts::LATCH_COUNT_DOWN
                    .key(&*self.name)
                    .key(&*self.channel)
                    .key(latch)
                    .arg(server.publish_command())
                    .arg(latch_ttl)
                    .invoke(conn)
            },
            |_: &i64| true,
        );
        match counted {
            Ok(left) => Ok(u64::try_from(left).unwrap_or(0)),
            Err(e) if !request.unsure() => Err(wrong_kind(&self.name, LATCH, e)),
            Err(e) => {
                // The call fails: close it in Redis, giving back what an
                // unanswered attempt counted. First on a connection of its
                // own, answered before the call returns: an attempt still
                // on its way then counts nothing, whatever round it finds.
                // Else behind the late attempts, and by the release worker.
                let mut undo = scripts::eval(scripts::LATCH_COUNT_DOWN_UNDO_LUA);
                undo.arg(2)
                    .arg(&*self.name)
                    .arg(request.latch())
                    .arg(request.latch_ttl_ms());
                if server
                    .run_cleanup(|conn| undo.query::<redis::Value>(conn))
                    .is_err()
                {
                    end_call(engine, &self.name, LATCH, &mut request, undo);
                }
                Err(wrong_kind(&self.name, LATCH, e))
            }
        }
    }

    /// The count now; 0 when the latch is open (or was never armed). One
    /// `GET`.
    ///
    /// # Errors
    ///
    /// [`Error::WrongKind`]; Redis errors.
    pub fn count(&self) -> Result<u64> {
        self.check_name()?;
        let value: Option<String> = self
            .client
            .engine()
            .server()
            .run(|conn| redis::cmd("GET").arg(&*self.name).query(conn))
            .map_err(|e| wrong_kind(&self.name, LATCH, e))?;
        read_count(value, &self.name, LATCH)
    }

    /// Waits until the count reaches zero, as long as it takes (Java's
    /// `await()`).
    ///
    /// # Errors
    ///
    /// [`Error::WrongKind`]; [`Error::Shutdown`]; [`Error::Unreachable`]
    /// after the outage tolerance; other Redis errors.
    pub fn wait(&self) -> Result<()> {
        self.wait_on(None, None).map(drop)
    }

    /// Waits at most `timeout` for the count to reach zero; whether it did.
    ///
    /// # Errors
    ///
    /// As [`wait`](Self::wait); [`Error::Unreachable`] when `timeout` ran
    /// out while Redis was away.
    pub fn wait_for(&self, timeout: Duration) -> Result<bool> {
        self.wait_on(Some(timeout), None)
    }

    /// Waits until the count reaches zero or `interrupt` is triggered
    /// ([`Error::Interrupted`]).
    ///
    /// # Errors
    ///
    /// As [`wait`](Self::wait), and [`Error::Interrupted`].
    pub fn wait_interruptibly(&self, interrupt: &Interrupt) -> Result<()> {
        self.wait_on(None, Some(interrupt)).map(drop)
    }

    /// Deletes the latch whatever its count, which opens it; whether there
    /// was one. Waiters of this library go on; Redisson's own waiters hear
    /// "a new count" and keep waiting, as they do in Java.
    ///
    /// # Errors
    ///
    /// [`Error::WrongKind`]; Redis errors.
    pub fn delete(&self) -> Result<bool> {
        self.check_name()?;
        delete_count(&self.client, &self.name, &self.channel, LATCH)
    }

    /// The waits' one path: true once the count is zero.
    fn wait_on(&self, wait: Option<Duration>, interrupt: Option<&Interrupt>) -> Result<bool> {
        self.check_name()?;
        let engine = self.client.engine();
        engine.server().check_open()?;
        let opened = WaitOn {
            engine,
            name: &self.name,
            channel: &self.channel,
        }
        .until(wait, interrupt, || {
            Ok(Look::from_option((self.count()? == 0).then_some(())))
        })?;
        Ok(opened.is_some())
    }

    /// Checks that a wait may start: a name a key can have, an open client.
    pub(super) fn check_wait(&self) -> Result<()> {
        self.check_name()?;
        self.client.engine().server().check_open()
    }

    /// Refuses a name no key can have.
    fn check_name(&self) -> Result<()> {
        names::validate(&self.name)
    }
}

impl fmt::Debug for CountDownLatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CountDownLatch")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}
