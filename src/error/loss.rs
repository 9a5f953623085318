//! Why a held lock was lost, as far as the client can tell, and what to do
//! about each cause.

use std::fmt;

/// Why a lock was lost while held ([`Error::LockLost`](crate::Error::LockLost)).
///
/// Found out when the release (or the watchdog) finds the hold gone: a
/// hold taken with a lease whose lease has passed ran out; otherwise the
/// client asks Redis once whether anyone holds the lock now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LossCause {
    /// The hold's lease ran out before it was released.
    LeaseExpired,
    /// Someone else holds the lock now: it was force-unlocked, or expired
    /// while renewals could not reach Redis, and then taken.
    TakenOver,
    /// Nobody holds the lock now: it was force-unlocked or deleted, the
    /// server lost it (a restart without persistence, a failover before
    /// the write reached the replica), or it expired while renewals could
    /// not reach Redis.
    Vanished,
    /// Redis could not be asked which of the others it was.
    Unknown,
}

impl LossCause {
    /// What happened and what to do, for [`Error`](crate::Error)'s message.
    pub(crate) fn explained(self) -> &'static str {
        match self {
            LossCause::LeaseExpired => {
                "its lease ran out before the release; use a longer lease, or none (the \
                 watchdog then renews the lock while it is held)"
            }
            LossCause::TakenOver => {
                "another holder has it now: it was force-unlocked, or it expired while the \
                 watchdog could not reach Redis, and was then taken"
            }
            LossCause::Vanished => {
                "it is gone from Redis: it was force-unlocked or deleted, the server lost it \
                 (a restart without persistence, a failover before replication; see \
                 sync_replicas), or it expired while the watchdog could not reach Redis"
            }
            LossCause::Unknown => {
                "it expired or was deleted; Redis could not be asked which: the reason is \
                 logged through the `log` crate at warn level, target `redhold` (install a \
                 logger, e.g. env_logger with RUST_LOG=redhold=warn, to see it)"
            }
        }
    }
}

impl fmt::Display for LossCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            LossCause::LeaseExpired => "lease expired",
            LossCause::TakenOver => "taken over",
            LossCause::Vanished => "vanished",
            LossCause::Unknown => "unknown",
        })
    }
}
