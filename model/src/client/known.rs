//! Defects of the library as built that the model found, each excused by
//! name in the configurations CI explores (so that they find anything
//! else), and each found again by a test of its own with its excuse off
//! (`tests/client_found.rs`), beside a deterministic test against a real
//! server (`tests/faults/model_found.rs`, failing until fixed). Once one
//! is fixed in `src/`, the model's mirror of the fix makes its test here
//! fail: then the entry goes.
//!
//! Fixed so far, and mirrored (each now a [`super::ClientMutation`]): a
//! lost acquire reply before a late retry (42393ed,
//! `UndoIgnoresCutAttempts`). `CutAttemptsUndoLost` is what that fix
//! leaves.

/// A defect the model found in the library as built.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Known {
    /// The holds of attempts cut before their reply are given back by
    /// extra releases on the last late attempt's connection
    /// (`undo_behind`, 42393ed), and the settling look is skipped while a
    /// late attempt may run (`settle_unsure`, `unsure_is_late`). When that
    /// connection dies before its undo runs (a partition: the attempt's
    /// reply lost as it begins, the retry on a connection that is never
    /// answered and closed at the heal), nothing gives them back: a hold
    /// with no guard until its lease or watchdog timeout runs out.
    CutAttemptsUndoLost,
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
    pub const ALL: &'static [Known] =
        &[Known::CutAttemptsUndoLost, Known::WakeUpTakenByOtherWaiter];
}
