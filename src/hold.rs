//! One hold on a lock as its guard knows it: the generation of holds it
//! belongs to, and how it is kept alive.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::renewals::HoldRecord;

/// One hold, as its guard knows it: the generation it belongs to and how
/// it is kept alive.
#[derive(Debug, Clone)]
pub(crate) struct Hold {
    /// The generation of holds this one belongs to; once that is no longer
    /// live, this hold is gone and its guard releases nothing.
    pub(crate) record: Arc<HoldRecord>,
    pub(crate) renewal: Renewal,
}

/// How a hold is kept alive.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Renewal {
    /// Renewed by the watchdog until released.
    Watched,
    /// Expires after its lease; `expires_at` is `None` when unknown.
    Leased { expires_at: Option<Instant> },
    /// No guard stands for it: a hold given up with `leak`, released by
    /// `Lock::unlock`.
    Unguarded,
}

impl Hold {
    /// Whether the watchdog renews this hold.
    pub(crate) fn is_watched(&self) -> bool {
        matches!(self.renewal, Renewal::Watched)
    }

    /// Whether the hold is still believed held, without asking Redis.
    pub(crate) fn is_held(&self) -> bool {
        self.record.is_live()
            && match self.renewal {
                Renewal::Watched | Renewal::Unguarded => true,
                Renewal::Leased { expires_at } => expires_at.is_none_or(|at| Instant::now() < at),
            }
    }

    /// Whether the hold is still believed held, given whether the client is
    /// shut down: then nothing renews a watched hold any more, and it runs
    /// out `watchdog_timeout` after its last renewal.
    pub(crate) fn is_held_after(&self, shut_down: bool, watchdog_timeout: Duration) -> bool {
        self.is_held()
            && !(self.is_watched()
                && shut_down
                && self.record.last_confirmed().elapsed() >= watchdog_timeout)
    }
}
