//! The fenced lock: a plain lock whose every acquire returns a token larger
//! than all tokens handed out before for that name.

use super::hash;
use super::sealed::{unexpected_reply, KindOps};
use super::{AcquireReply, AcquireRequest, Attempt, Handover, ReleasedTo, Successor, Target};
use crate::config::Config;
use crate::error::{Error, Result};
use crate::names;
use crate::scripts;

/// A lock that hands out fencing tokens: the kind of
/// [`FencedLock`](crate::FencedLock).
///
/// Pass [`LockGuard::token`](crate::LockGuard::token) along with every write
/// to the protected storage and have the storage refuse a token smaller than
/// the largest it has seen: a holder that lost its lock (a long GC-like
/// pause, a network partition) is then refused instead of corrupting data.
/// Shares the plain lock's hash and channel, so a fenced lock and a plain
/// lock on the same name exclude each other.
#[derive(Debug, Clone)]
pub struct Fenced {
    channel: String,
    token_key: String,
}

impl Fenced {
    /// Turns the script's `CORRUPT` error (the counter holds what no
    /// fencing token can come from; nothing was written) into
    /// [`Error::Corrupt`] naming the counter; other errors pass through.
    fn corrupt_counter(&self, name: &str, e: Error) -> Error {
        match &e {
            Error::Redis(inner) if inner.code() == Some("CORRUPT") => Error::Corrupt {
                lock: names::shorten(name),
                key: names::shorten(&self.token_key),
                found: format!(
                    "{:?}, where a fencing token counter must be a non-negative integer",
                    inner.detail().unwrap_or_default().trim()
                ),
            },
            _ => e,
        }
    }
}

impl KindOps for Fenced {
    type Grant = u64;

    const DESCRIPTION: &'static str = "fenced lock";

    fn token_of(grant: &u64) -> Option<u64> {
        Some(*grant)
    }

    fn for_name(name: &str, _config: &Config) -> Self {
        Fenced {
            channel: names::lock_channel(name),
            token_key: names::prefixed("redisson_lock_token", name),
        }
    }

    fn shared_channel(&self) -> Option<&str> {
        Some(&self.channel)
    }

    fn try_acquire(
        &self,
        at: Target<'_>,
        request: AcquireRequest<'_>,
    ) -> Result<AcquireReply<u64>> {
        let reply: Vec<i64> = at
            .run_acquire(
                |conn| {
                    scripts::FENCED_ACQUIRE
                        .key(at.name)
                        .key(&self.token_key)
                        .arg(request.lease_ms)
                        .arg(request.field)
                        .arg(request.holds_here_arg())
                        .invoke(conn)
                },
                |reply: &Vec<i64>| reply.first() == Some(&1),
            )
            .map_err(|e| self.corrupt_counter(at.name, e))?;
        match *reply {
            [1, holds, token] if holds > 0 => {
                let token = u64::try_from(token).map_err(|_| Error::Corrupt {
                    lock: names::shorten(at.name),
                    key: names::shorten(&self.token_key),
                    found: format!("{token}, where a fencing token counter must be positive"),
                })?;
                Ok(AcquireReply::Ran(Attempt::Acquired {
                    grant: token,
                    holds: u32::try_from(holds).unwrap_or(u32::MAX),
                }))
            }
            [0, ttl] => Ok(AcquireReply::Ran(Attempt::Busy(ttl))),
            _ if AcquireReply::<u64>::is_holds_gone(&reply) => Ok(AcquireReply::HoldsGone),
            _ => Err(unexpected_reply(at.name, &reply)),
        }
    }

    fn release(&self, at: Target<'_>, field: &str, request_id: &str) -> Result<Option<i64>> {
        hash::release(at, &self.channel, field, request_id)
    }

    /// A parked waiter is handed the lock with a token drawn from the same
    /// counter, in the same script: no holder after it can have a smaller
    /// one.
    fn handover(&self) -> Option<Handover<'_>> {
        Some(Handover::Token {
            token_key: &self.token_key,
        })
    }

    fn handed_over_grant(&self, token: Option<u64>) -> Option<u64> {
        token
    }

    fn release_to(
        &self,
        at: Target<'_>,
        field: &str,
        request_id: &str,
        successor: Option<Successor<'_>>,
    ) -> Result<ReleasedTo> {
        hash::release_to(at, &self.channel, field, request_id, successor)
    }

    fn force_release(&self, at: Target<'_>) -> Result<bool> {
        hash::force_release(at, &self.channel)
    }
}
