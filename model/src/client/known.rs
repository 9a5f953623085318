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
//! (`TtlReadBeforeLocalTake`, 2bbaed6, `NoTakeMark`), the cut attempts'
//! undo lost with the late retry's connection (`CutAttemptsUndoLost`,
//! 2bbaed6, `NoUndoResend`). The one below is what the last leaves.

/// A defect the model found in the library as built.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Known {
    /// An undo whose connection fails is sent again (2bbaed6), but only
    /// once it was written: a late attempt's connection that fails after
    /// its response timeout and before the call writes the undo behind it
    /// (`undo_behind`: `Trailing::follow` fails, "its undo could not
    /// follow it") gets no undo and no copy. When the late attempt ran, or
    /// when the undo carried the give-back of attempts cut before their
    /// reply (`1 + cut` releases, the settling look skipped), a hold with
    /// no guard stays until its lease or watchdog timeout runs out.
    /// (Whether `follow` fails on a connection the peer has closed depends
    /// on the socket: a write after a FIN usually succeeds, and then the
    /// undo is read, fails and is sent again; after a reset it fails.)
    /// Not reproduced against a real server yet (no test in
    /// `tests/faults/model_found.rs`).
    UndoCannotFollowCut,
}

impl Known {
    /// Every known defect.
    pub const ALL: &'static [Known] = &[Known::UndoCannotFollowCut];
}
