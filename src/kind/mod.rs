//! The kinds of lock a [`Lock`](crate::Lock) handle can stand for.
//!
//! Every kind is waited for, renewed and released by the same machinery in
//! `engine.rs`; a kind only says which scripts run and on which keys, and
//! reaches Redis through the [`Server`] alone:
//!
//! | kind         | Redis keys (see `docs/wire-format.md`)        | wakes waiters by              |
//! |--------------|-----------------------------------------------|-------------------------------|
//! | [`Reentrant`] | hash `name`                                  | pub/sub, one waiter           |
//! | [`Fenced`]   | hash `name`, counter `redisson_lock_token:{name}` | pub/sub, one waiter       |
//! | [`Spin`]     | hash `name`                                   | nothing: exponential backoff  |
//! | [`Fair`]     | hash, queue list, deadline zset               | pub/sub, the queue's head only |
//! | [`Read`] / [`Write`] | hash with `mode`, read-hold string keys | pub/sub; a write release wakes all |

// `KindOps` is public only to seal `LockKind`: no one outside the crate can
// name it, so its methods may take the crate's own `Config` and `Server`.
#![allow(private_interfaces)]

mod attempt;
mod fair;
mod fenced;
mod hash;
mod read_write;
mod reentrant;
mod spin;
mod target;

use std::fmt;

use crate::config::Config;
use crate::error::{Error, Result};
use crate::renewals::RenewKind;

pub use fair::Fair;
pub use fenced::Fenced;
pub use read_write::{Read, Write};
pub use reentrant::Reentrant;
pub use spin::Spin;

/// A kind of distributed lock: [`Reentrant`], [`Fair`], [`Fenced`],
/// [`Spin`], [`Read`] or [`Write`]. `Lock<K>` offers the same methods for
/// every kind.
///
/// The trait is sealed: only this crate defines kinds.
pub trait LockKind: sealed::KindOps {}

impl<K: sealed::KindOps> LockKind for K {}

pub(crate) use sealed::{
    wrong_kind, AcquireReply, AcquireRequest, Attempt, Handover, ReleasedTo, Successor, Target,
    ANNOUNCED, GONE_ON_RETRY, HANDED_OVER, HOLDS_REMAIN,
};

pub(crate) mod sealed {
    //! The operations behind [`LockKind`](super::LockKind), out of users' reach.
    #![allow(unreachable_pub)]

    use super::*;

    pub use super::attempt::{AcquireReply, AcquireRequest, Attempt};
    pub use super::target::Target;

    /// A hash lock's release reply when holds of the caller's field remain
    /// (a read release says 0 when anyone's holds remain).
    pub const HOLDS_REMAIN: i64 = 0;

    /// A release's reply when it freed the lock and announced it.
    pub const ANNOUNCED: i64 = 1;

    /// A release's reply when it handed the lock to its [`Successor`].
    pub const HANDED_OVER: i64 = 2;

    /// A release's reply when a retry finds the caller's field gone and no
    /// latch: every release of a hold latches its reply, so no earlier
    /// attempt of the same request released anything, and the hold was
    /// lost before (an expiry, a restart, a forced unlock).
    pub const GONE_ON_RETRY: i64 = 3;

    /// A parked thread of the releasing client that a release may hand the
    /// lock to directly, when it frees it (see [`KindOps::release_to`]).
    #[derive(Clone, Copy, Debug)]
    pub struct Successor<'a> {
        /// The successor's holder field.
        pub field: &'a str,
        /// The lease its own acquire would have set, in ms.
        pub lease_ms: u64,
        /// The fencing-token counter its own acquire would have drawn a
        /// token from (a fenced lock's waiter), if any.
        pub token_key: Option<&'a str>,
    }

    /// How a kind's lock is handed to a parked thread of the releasing
    /// client (see `pubsub/handover.rs`): what the successor's own acquire
    /// would have done, which the release script does instead.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum Handover<'a> {
        /// Write the successor's field: one hold, its lease.
        Field,
        /// The same, and draw the successor's fencing token from this
        /// counter.
        Token {
            /// The counter key.
            token_key: &'a str,
        },
    }

    /// What a release that could hand the lock over replied: the script's
    /// reply (see [`KindOps::release`]); when it handed the lock to a
    /// successor that needs one, the fencing token it drew for it; when it
    /// announced the lock, how many subscribers heard it (if the script
    /// says).
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct ReleasedTo {
        pub reply: Option<i64>,
        pub token: Option<u64>,
        pub heard: Option<u64>,
    }

    impl ReleasedTo {
        /// A reply with nothing but its code.
        pub fn code(reply: Option<i64>) -> Self {
            ReleasedTo {
                reply,
                token: None,
                heard: None,
            }
        }
    }

    /// A lock script answered something no script of ours answers: the
    /// server runs other code under our script's SHA, or the key was changed
    /// behind our back.
    pub fn unexpected_reply(name: &str, reply: &(impl fmt::Debug + ?Sized)) -> Error {
        Error::Redis(redis::RedisError::from((
            redis::ErrorKind::UnexpectedReturnType,
            "unexpected reply from a lock script",
            format!("{reply:?} for lock {:?}", crate::names::shorten(name)),
        )))
    }

    /// Turns the `WRONGKIND` error of our scripts (and Redis' own
    /// `WRONGTYPE`) into [`Error::WrongKind`] naming the lock; other errors
    /// pass through.
    pub fn wrong_kind(name: &str, expected: &'static str, e: Error) -> Error {
        let found = match &e {
            Error::Redis(inner) if inner.code() == Some("WRONGKIND") => inner
                .detail()
                .unwrap_or("a lock of another kind")
                .trim()
                .to_owned(),
            Error::Redis(inner)
                if inner.code() == Some("WRONGTYPE") || inner.to_string().contains("WRONGTYPE") =>
            {
                "a value that is not a lock".to_owned()
            }
            _ => return e,
        };
        Error::WrongKind {
            lock: crate::names::shorten(name),
            expected,
            found,
        }
    }

    /// The scripts and keys of one kind of lock.
    pub trait KindOps: Send + Sync + Sized + Clone + fmt::Debug + 'static {
        /// What a successful acquire hands to the guard (the fencing token).
        type Grant: Copy + Send + Sync + fmt::Debug + 'static;

        /// The kind in words, for errors ("plain lock", "read lock", ...).
        const DESCRIPTION: &'static str;

        /// The fencing token a grant carries, for kinds that draw one.
        fn token_of(_grant: &Self::Grant) -> Option<u64> {
            None
        }

        /// The kind's key names for the lock called `name`, under the
        /// client's settings.
        fn for_name(name: &str, config: &Config) -> Self;

        /// The hash field of a holder whose plain field is `base`.
        fn holder_field(&self, base: &std::sync::Arc<str>) -> std::sync::Arc<str> {
            std::sync::Arc::clone(base)
        }

        /// Another field of the same thread (whose plain field is `base`)
        /// whose holds let it take this lock at once, whoever waits: a
        /// thread that holds the write lock takes the read lock. `None` for
        /// most kinds.
        fn entered_through(&self, _base: &std::sync::Arc<str>) -> Option<std::sync::Arc<str>> {
            None
        }

        /// How the watchdog renews holds of this kind.
        fn renew_kind(&self) -> RenewKind {
            RenewKind::Hash
        }

        /// The channel a waiter with holder field `field` listens on, or
        /// `None` when the kind does not use pub/sub.
        /// By default the [`shared_channel`](Self::shared_channel).
        fn wait_channel(&self, _field: &str) -> Option<String> {
            self.shared_channel().map(str::to_owned)
        }

        /// The one channel every waiter of this lock listens on, when there
        /// is one (not for the fair lock's per-waiter channels, nor for the
        /// spin lock): local hand-offs are arranged on it.
        fn shared_channel(&self) -> Option<&str> {
            None
        }

        /// The longest pause between two attempts when the kind does not use
        /// pub/sub, given how many attempts failed so far.
        fn backoff(&self, _failures: u32) -> Option<std::time::Duration> {
            None
        }

        /// One acquire attempt.
        fn try_acquire(
            &self,
            at: Target<'_>,
            request: AcquireRequest<'_>,
        ) -> Result<AcquireReply<Self::Grant>>;

        /// Releases one hold; `Some(_)` when released, `None` when `field`
        /// did not hold the lock. `request_id` makes a retry harmless. The
        /// holds that remain keep the TTL they need: a release never
        /// shortens it.
        fn release(&self, at: Target<'_>, field: &str, request_id: &str) -> Result<Option<i64>>;

        /// How a release hands this kind's lock to a parked thread, or
        /// `None` when the kind is never handed over that way: its acquire
        /// does more than a release script can do for it (a queue), or its
        /// waiters do not park.
        fn handover(&self) -> Option<Handover<'_>> {
            None
        }

        /// What the guard of a lock handed over by a release gets, given
        /// the fencing token the release drew for it (with a
        /// [`Handover::Token`]); `None` when it cannot be had.
        fn handed_over_grant(&self, _token: Option<u64>) -> Option<Self::Grant> {
            None
        }

        /// [`release`](Self::release), except that a release that frees the
        /// lock gives it to `successor`, if one is named, instead (one hold,
        /// its lease, its token when it names a counter; nothing published)
        /// and replies [`HANDED_OVER`]; and a release that announces the
        /// lock tells how many subscribers heard it, if the kind's script
        /// says. A successor is named only for kinds with a
        /// [`handover`](Self::handover).
        fn release_to(
            &self,
            at: Target<'_>,
            field: &str,
            request_id: &str,
            _successor: Option<Successor<'_>>,
        ) -> Result<ReleasedTo> {
            self.release(at, field, request_id).map(ReleasedTo::code)
        }

        /// Deletes the lock whoever holds it and wakes waiters.
        fn force_release(&self, at: Target<'_>) -> Result<bool>;

        /// Whether anyone holds the lock.
        fn is_locked(&self, at: Target<'_>) -> Result<bool> {
            at.server
                .run(|conn| redis::cmd("EXISTS").arg(at.name).query(conn))
        }

        /// A waiter gives up before getting the lock.
        fn give_up(&self, _at: Target<'_>, _field: &str) -> Result<()> {
            Ok(())
        }
    }
}
