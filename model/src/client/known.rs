//! Defects of the library as built that the model found, each excused by
//! name in the configurations CI explores (so that they find anything
//! else), and each found again by a test of its own with its excuse off
//! (`tests/client_found.rs`, gone while none is known), beside a deterministic test against a real
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
//! 2bbaed6, `NoUndoResend`), an undo that cannot follow its cut late
//! attempt (`UndoCannotFollowCut`, 3fc6f44, `UndoNotWrittenLost`), the
//! undo of an unreplicated acquire resent across a failover
//! (`GiveBackAcrossFailover`, d847eb6, `UnreplicatedUndoUnconditional`),
//! an unreplicated acquire the pool ran twice undone by one release
//! (defect 8, d847eb6, `UnreplicatedUndoOnce`) and an unconfirmed undo
//! of an unreplicated acquire run after the thread's next acquire (defect
//! 9, 08de4f2, `UnreplicatedUndoOffLane`) and a stale guard's unlock of
//! a hold its thread took since its lease ran out (defect 10,
//! `ExpiredGenerationOutlivesAcquire`).

/// A defect the model found in the library as built, excused (none).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Known {}

impl Known {
    /// Every known defect.
    pub const ALL: &'static [Known] = &[];
}
