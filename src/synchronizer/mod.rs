//! Redisson's synchronizers beside the locks: the [`Semaphore`] (with its
//! [`Permit`] guard) and the [`CountDownLatch`].
//!
//! Each is one string key holding a count, in Redisson's layout (see
//! `docs/wire-format.md`), changed by one Lua script per operation and
//! announced on the name's channel. Waiters use the client's pub/sub like
//! lock waiters do, with one difference: a message on a synchronizer's
//! channel wakes every local waiter of the name once (see
//! `pubsub/subscriber.rs`), because it does not say who may go on — a
//! semaphore's message is the number of permits available, which a waiter
//! for many permits may not be able to use while one for few can.
//!
//! - `wait.rs`: the waiting loop both share.
//! - `semaphore.rs`, `acquire.rs` and `permit.rs`: `RSemaphore`.
//! - `expirable.rs`, `expirable_acquire.rs` and `expirable_permit.rs`:
//!   `RPermitExpirableSemaphore`.
//! - `latch.rs`: `RCountDownLatch`.

mod acquire;
mod expirable;
mod expirable_acquire;
mod expirable_permit;
mod futures;
mod latch;
mod permit;
mod semaphore;
mod wait;
mod wait_async;

pub use expirable::PermitExpirableSemaphore;
pub use expirable_permit::ExpirablePermit;
pub use futures::WaitFuture;
pub use latch::CountDownLatch;
pub use permit::Permit;
pub use semaphore::Semaphore;

use std::sync::Arc;

use crate::client::Client;
use crate::engine::Engine;
use crate::error::{is_transient, Error, Result};
use crate::names;
use crate::scripts;
use crate::server::Request;

/// What a name that holds something else than a count is reported as
/// holding when Redis itself refuses the command (`WRONGTYPE`).
const NOT_A_COUNT: &str = "a value that is not a count (a lock, or another Redis type)";

/// Turns Redis' `WRONGTYPE` and our scripts' `WRONGKIND` into
/// [`Error::WrongKind`] for the synchronizer called `name`, of kind
/// `expected` ("semaphore", "count-down latch"); other errors pass.
fn wrong_kind(name: &str, expected: &'static str, e: Error) -> Error {
    if let Error::Redis(inner) = &e {
        if inner.code() == Some("WRONGTYPE") {
            return Error::WrongKind {
                lock: names::shorten(name),
                expected,
                found: NOT_A_COUNT.to_owned(),
            };
        }
    }
    crate::kind::wrong_kind(name, expected, e)
}

/// Reads a synchronizer's count with `GET`: 0 when the key is absent,
/// negative counts (a Java `addPermits` with a negative number) as 0.
fn read_count(value: Option<String>, name: &str, expected: &'static str) -> Result<u64> {
    let Some(text) = value else {
        return Ok(0);
    };
    match text.parse::<i64>() {
        Ok(count) => Ok(u64::try_from(count).unwrap_or(0)),
        Err(_) => Err(Error::WrongKind {
            lock: names::shorten(name),
            expected,
            found: "a string that is not a count".to_owned(),
        }),
    }
}

/// Checks a number of permits asked for: at least one, and at most what a
/// Java `int` holds (Redisson's clients count permits in one).
fn check_permits(permits: u32) -> Result<u32> {
    if permits == 0 {
        return Err(Error::InvalidArgument {
            what: "permits",
            reason: "the number of permits must be at least 1".to_owned(),
        });
    }
    if i32::try_from(permits).is_err() {
        return Err(Error::InvalidArgument {
            what: "permits",
            reason: format!(
                "{permits} permits is more than {} (Redisson counts permits in a Java int)",
                i32::MAX
            ),
        });
    }
    Ok(permits)
}

/// Checks a number of permits to set: 0 allowed, at most a Java `int`.
fn permit_count(permits: u32) -> Result<u32> {
    if permits == 0 {
        return Ok(0);
    }
    check_permits(permits)
}

/// Runs one `semaphore_set.lua` operation (`op`: "try_set", "set", …) with
/// `permits` on the semaphore `name` announced on `channel`, a plain or a
/// permit-expirable one (`kind`, for errors): both keep the same count key
/// and channel. Latched, so that a retry does not run it twice.
fn set_permits(
    client: &Client,
    name: &str,
    channel: &str,
    kind: &'static str,
    op: &str,
    permits: u32,
) -> Result<i64> {
    let server = client.engine().server();
    let (latch, latch_ttl) = server.unlock_latch(name, &client.engine().next_request_id());
    server
        .run_write(
            name,
            |conn| {
                scripts::SEMAPHORE_SET
                    .key(name)
                    .key(channel)
                    .key(&latch)
                    .arg(op)
                    .arg(permits)
                    .arg(server.publish_command())
                    .arg(latch_ttl)
                    .invoke(conn)
            },
            |_| true,
        )
        .map_err(|e| wrong_kind(name, kind, e))
}

/// Deletes the count under `name` (a latch's or a semaphore's, `kind` for
/// errors) whatever it is, and publishes `"1"` on `channel`, as Redisson's
/// latch does: waiters look once more. Latched, so that a retry after a
/// lost reply says what the first attempt did.
fn delete_count(client: &Client, name: &str, channel: &str, kind: &'static str) -> Result<bool> {
    let server = client.engine().server();
    let (latch, latch_ttl) = server.unlock_latch(name, &client.engine().next_request_id());
    let deleted: i64 = server
        .run_write(
            name,
            |conn| {
                scripts::LATCH_DELETE
                    .key(name)
                    .key(channel)
                    .key(&latch)
                    .arg(server.publish_command())
                    .arg(latch_ttl)
                    .invoke(conn)
            },
            |deleted: &i64| *deleted == 1,
        )
        .map_err(|e| wrong_kind(name, kind, e))?;
    Ok(deleted == 1)
}

/// Ends a call on `name` (a synchronizer of `kind`) that returns without
/// what its requests may have done: an acquire without the permits they
/// may have taken, a `count_down` with an error. `undo` (a script that
/// reads the call's latch, undoes what it says was done and closes it, so
/// that a late attempt does nothing) goes right behind its late attempts,
/// or on a connection of its own; when Redis is away for that, or when it
/// was only written behind late attempts (a cut connection may have lost
/// it), the client's release worker sends it again until it runs or the
/// latch may be gone. Best effort beyond that, with a warning.
fn end_call(
    engine: &Engine,
    name: &Arc<str>,
    kind: &'static str,
    request: &mut Request,
    undo: redis::Cmd,
) {
    let server = engine.server();
    let error = match server.undo_request(request, &undo) {
        Ok(true) => return,
        // Written behind the late attempts only: sent again from the
        // worker as well, in case a cut connection lost it.
        Ok(false) => {
            if let Some(until) = request.latch_alive_until() {
                // Best effort on top of the one behind the late attempts.
                let _ = engine.give_back_later(name, until, undo);
            }
            return;
        }
        Err(Error::Redis(e)) if is_transient(&e) => {
            let until = request.latch_alive_until();
            if until.is_some_and(|until| engine.give_back_later(name, until, undo)) {
                return;
            }
            Error::Redis(e)
        }
        Err(e) => e,
    };
    log::warn!(
        "redhold: {kind} {:?}: a call whose reply was lost may keep what it did: {}",
        names::shorten(name),
        error.report()
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_read_absent_as_zero_and_refuse_other_strings() {
        assert_eq!(read_count(None, "s", "semaphore").unwrap(), 0);
        assert_eq!(read_count(Some("7".into()), "s", "semaphore").unwrap(), 7);
        assert_eq!(read_count(Some("-3".into()), "s", "semaphore").unwrap(), 0);
        assert!(matches!(
            read_count(Some("x".into()), "s", "semaphore"),
            Err(Error::WrongKind { .. })
        ));
    }

    #[test]
    fn permits_are_checked() {
        assert!(matches!(
            check_permits(0),
            Err(Error::InvalidArgument { .. })
        ));
        assert!(matches!(
            check_permits(u32::MAX),
            Err(Error::InvalidArgument { .. })
        ));
        assert_eq!(check_permits(3).unwrap(), 3);
    }
}
