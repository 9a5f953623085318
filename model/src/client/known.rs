//! Defects of the library as built that the model found, each excused by
//! name in the configurations CI explores (so that they find anything
//! else), and each found again by a test of its own with its excuse off
//! (`tests/client_found.rs`), beside a deterministic test against a real
//! server (`tests/faults/model_found.rs`, failing until fixed). Once one
//! is fixed in `src/`, the model's mirror of the fix makes its test here
//! fail: then the entry goes.

/// A defect the model found in the library as built.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Known {
    /// An acquire call whose attempt took the lock but lost its reply to
    /// a cut connection, and whose retry then timed out, gives back only
    /// the late retry's hold (its undo, `above:N`, releases one hold) and
    /// skips `settle_unsure`'s look (`unsure_is_late`): the first
    /// attempt's hold stays with no guard until its lease or watchdog
    /// timeout runs out.
    LostReplyBeforeLateRetry,
    /// A waiter whose attempt found the lock busy while a release was
    /// being announced parks on that (old) TTL: the release's one wake-up
    /// per client went to another waiter of its client, parked already
    /// (`Waiters::wake_one`), which took the lock with a shorter lease;
    /// when that hold expires unreleased, the first waiter sleeps on past
    /// it, the lock free and no message coming.
    WakeUpTakenByOtherWaiter,
}

impl Known {
    /// Every known defect.
    pub const ALL: &'static [Known] = &[
        Known::LostReplyBeforeLateRetry,
        Known::WakeUpTakenByOtherWaiter,
    ];
}
