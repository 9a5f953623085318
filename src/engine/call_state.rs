//! What one acquire call keeps between its steps, whichever thread runs
//! them (a thread's call on that thread; an async call on the client's
//! I/O threads, one step after another).

use std::cell::{Cell, RefCell};
use std::sync::Arc;
use std::time::Duration;

use crate::holding::Holder;
use crate::server::LateRequests;

/// What one acquire call keeps between its steps: the holder's field, the
/// lease, and what its attempts left unknown.
#[derive(Debug)]
pub(crate) struct CallState {
    /// Names the call for the lane it keeps while its late attempts have
    /// no undo yet (see `lane.rs`).
    pub(super) id: u64,
    /// Who takes the lock: the calling thread or an owner.
    pub(super) holder: Holder,
    pub(super) lease: Option<Duration>,
    pub(super) lease_ms: u64,
    pub(super) field: Arc<str>,
    /// Whether the last attempt's outcome is unknown (see `attempt.rs`).
    pub(super) unsure: Cell<bool>,
    /// Whether that attempt's connection is among `late` (its request may
    /// still run, and its undo will follow it there).
    pub(super) unsure_is_late: Cell<bool>,
    /// The connections of the call's attempts whose reply did not come in
    /// time: a stalled server may run them late (see `attempt.rs`).
    pub(super) late: RefCell<LateRequests>,
}
