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
    /// A release wakes one waiter per client (`Waiters::wake_one`); the
    /// client's other waiters sleep on the TTL they read before it (parked
    /// already, or with an attempt on its way). When the woken waiter
    /// takes the lock with a shorter lease and its hold expires
    /// unreleased, they sleep on past it: the lock free, no message
    /// coming, for up to the old holder's TTL.
    WakeUpTakenByOtherWaiter,
}

impl Known {
    /// Every known defect.
    pub const ALL: &'static [Known] = &[
        Known::LostReplyBeforeLateRetry,
        Known::WakeUpTakenByOtherWaiter,
    ];
}
