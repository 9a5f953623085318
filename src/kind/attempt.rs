//! What one acquire attempt sends and what its script replies, the same
//! for every kind.

// `pub` only because the sealed `KindOps` trait names these types; the
// module is private.
#![allow(unreachable_pub)]

use super::sealed::unexpected_reply;
use crate::error::Result;

/// What one acquire attempt found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attempt<G> {
    /// The caller holds the lock now.
    Acquired {
        /// What the kind hands to the guard (the fencing token).
        grant: G,
        /// The holder's hold count in Redis after this acquire. `1` is
        /// the holder's first hold, not a re-entry: a new generation of
        /// holds, which makes guards of any earlier one stale (their
        /// holds expired or were deleted meanwhile).
        holds: u32,
    },
    /// Someone else holds it; the reply is the lock's PTTL in ms, or for a
    /// fair lock the time until this waiter's turn is due.
    Busy(i64),
}

/// What an acquire script replied: the attempt, or that the holds the
/// caller counts are gone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AcquireReply<G> {
    /// The script tried to take or re-enter the lock.
    Ran(Attempt<G>),
    /// The caller counts holds of its own ([`AcquireRequest::holds_here`])
    /// and Redis has none under its field: they were lost (an expiry, a
    /// restart, a force-unlock). The script changed nothing: taking a
    /// free lock in their name would look to Redis like the holds
    /// themselves, so that a spoiled reply could not be settled, and a
    /// guard of the lost holds could release the new hold and say `Ok`.
    HoldsGone,
}

impl<G> AcquireReply<G> {
    /// The reply code of [`AcquireReply::HoldsGone`] (`{2, 0}`).
    const HOLDS_GONE: i64 = 2;

    /// Whether `reply` is [`AcquireReply::HoldsGone`]'s.
    pub fn is_holds_gone(reply: &[i64]) -> bool {
        *reply == [Self::HOLDS_GONE, 0]
    }
}

/// One acquire attempt's arguments.
#[derive(Debug, Clone, Copy)]
pub struct AcquireRequest<'a> {
    /// The lease Redis gives the hold, in ms.
    pub lease_ms: u64,
    /// The caller's holder field.
    pub field: &'a str,
    /// False for a try that will not wait (a fair lock then does not
    /// join its queue).
    pub may_queue: bool,
    /// The caller counts holds of its own under `field`: the attempt is
    /// a re-entry only, and replies [`AcquireReply::HoldsGone`] rather
    /// than take the lock anew when Redis has none.
    pub holds_here: bool,
}

impl AcquireRequest<'_> {
    /// The script argument for [`holds_here`](Self::holds_here).
    pub fn holds_here_arg(&self) -> &'static str {
        if self.holds_here {
            "1"
        } else {
            "0"
        }
    }
}

impl AcquireReply<()> {
    /// Reads the reply of an acquire script: `{1, holds}` when the lock
    /// was taken (`holds` = the holder's hold count now), `{0, ttl}`
    /// when it is busy, `{2, 0}` when the caller's holds are gone.
    pub fn from_reply(name: &str, reply: &[i64]) -> Result<Self> {
        match *reply {
            [1, holds, ..] if holds > 0 => Ok(AcquireReply::Ran(Attempt::Acquired {
                grant: (),
                holds: u32::try_from(holds).unwrap_or(u32::MAX),
            })),
            [0, ttl, ..] => Ok(AcquireReply::Ran(Attempt::Busy(ttl))),
            [Self::HOLDS_GONE, 0] => Ok(AcquireReply::HoldsGone),
            _ => Err(unexpected_reply(name, reply)),
        }
    }
}
