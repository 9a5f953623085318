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
//! `UndoIgnoresCutAttempts`), a wake-up taken by another waiter
//! (0d18fa5, `NoBoundOnLocalTake`), a TTL read before a local taking
//! (`TtlReadBeforeLocalTake`, 2bbaed6, `NoTakeMark`).

/// A defect the model found in the library as built.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Known {
    /// The holds of attempts cut before their reply are given back by
    /// extra releases on the last late attempt's connection
    /// (`undo_behind`, 42393ed), and the settling look is skipped while a
    /// late attempt may run (`settle_unsure`, `unsure_is_late`). When that
    /// connection is cut before its undo runs (the first attempt's reply
    /// lost to a cut, the retry held back, then its connection cut too),
    /// nothing gives them back: a hold with no guard until its lease or
    /// watchdog timeout runs out.
    CutAttemptsUndoLost,
}

impl Known {
    /// Every known defect.
    pub const ALL: &'static [Known] = &[Known::CutAttemptsUndoLost];
}
