//! Every exit of every script: the id its model function reports and the
//! line of the `return` in the Lua file. Some `return`s lead to more than
//! one id (a reply that differs by a branch taken just before it), so the
//! conformance test can insist on each; a few `return`s are inside a
//! helper function, not exits of the script ([`helper_returns`]).
//!
//! The conformance test checks that every line named here holds a
//! `return`, that every `return` in the file is named here or a helper's,
//! and that its walks reach every id.

use super::Script;

/// One exit of one script.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Branch {
    /// The id the model's function reports.
    pub id: &'static str,
    /// The line of its `return` in the Lua file.
    pub line: u16,
}

macro_rules! table {
    ($($id:literal $line:literal),* $(,)?) => {
        &[$(Branch { id: $id, line: $line }),*]
    };
}

/// Every exit of `script`.
pub fn branches(script: Script) -> &'static [Branch] {
    match script {
        Script::Acquire => table![
            "reentry-lost" 14, "new" 19, "wrong-kind" 22, "reentry" 32, "busy" 34,
        ],
        Script::FencedAcquire => table![
            "reentry-lost" 25, "corrupt-new" 29, "new" 32, "wrong-kind" 35,
            "corrupt-reentry" 39, "reentry" 47, "busy" 49,
        ],
        Script::Release => table![
            "replay-token" 42, "replay" 44, "undo-nothing" 52, "read-write" 66,
            "retry-gone" 73, "not-held" 75, "holds-remain" 81, "hand-over-fenced" 103,
            "hand-over" 106, "hand-over-given-a-ttl" 106, "freed" 110,
        ],
        Script::ForceRelease => table!["deleted" 7, "absent" 9],
        Script::Renew => table!["renewed" 56, "read-keys-gone" 56],
        Script::FairAcquire => table![
            "reentry-lost" 17, "wrong-kind" 34, "new" 51, "new-from-queue" 51,
            "reentry" 63, "queued-head" 75, "queued-behind" 78, "queued-behind-free" 79,
            "try-busy" 82, "queued" 95,
        ],
        Script::FairRelease => table![
            "replay" 23, "undo-nothing" 31, "free-retry-gone" 65, "free-not-held" 65,
            "read-write" 69, "retry-gone" 72, "not-held" 72, "holds-remain" 77, "freed" 82,
        ],
        Script::FairGiveUp => table!["not-queued" 8, "left" 29],
        Script::FairForceRelease => table!["deleted" 21, "absent" 21],
        Script::ReadAcquire => table![
            "reentry-lost" 46, "reentry-lost-expired" 46, "wrong-kind" 51, "new" 57,
            "new-after-expired" 57, "shared" 70, "shared-after-expired" 70, "busy" 72,
        ],
        Script::ReadRelease => table![
            "replay" 21, "undo-nothing" 29, "retry-gone" 37, "not-held" 39,
            "writer-holds" 116, "others-remain" 116, "others-remain-sooner" 116,
            "others-remain-given-a-ttl" 116, "others-remain-for-ever" 116, "freed-others-expired" 116, "freed" 116,
        ],
        Script::WriteAcquire => table![
            "reentry-lost" 16, "wrong-kind" 21, "new" 26, "reentry" 36, "upgrade" 39,
            "busy" 41,
        ],
        Script::WriteRelease => table![
            "replay" 19, "undo-nothing" 27, "retry-gone" 34, "not-held" 36,
            "holds-remain" 41, "freed" 53, "downgraded" 53,
        ],
        Script::RwForceRelease => table!["deleted" 9, "absent" 11],
        Script::SemaphoreAcquire => table![
            "replay-taken" 19, "late" 25, "wrong-kind-hash" 29, "wrong-kind-other" 32,
            "not-a-count" 38, "too-few" 44, "taken" 48,
        ],
        Script::SemaphoreRelease => table![
            "replay" 15, "wrong-kind-hash" 19, "wrong-kind-other" 22, "not-a-count" 25,
            "released" 30,
        ],
        Script::SemaphoreSet => table![
            "replay" 18, "wrong-kind-hash" 22, "wrong-kind-other" 25, "not-a-count" 31,
            "unknown-op" 64, "try-set" 67, "try-set-exists" 67, "set" 67, "remove" 67,
            "remove-too-many" 67, "drain" 67, "drain-none" 67,
        ],
        Script::SemaphoreGiveBack => table!["nothing-taken" 12, "given-back" 16],
        Script::ExpirableAcquire => table![
            "replay-taken" 18, "late" 24, "wrong-kind-hash" 28, "wrong-kind-other" 31,
            "not-a-count" 39, "too-few-lease" 54, "too-few" 56, "taken" 68,
        ],
        Script::ExpirableRelease => table![
            "replay" 12, "released" 25, "released-ended" 25, "not-out" 25,
        ],
        Script::ExpirableLease => table![
            "wrong-kind-hash" 11, "wrong-kind-other" 14, "not-a-count" 17, "available" 28,
            "updated" 39, "updated-sooner" 39, "not-out" 41, "unknown-op" 43,
        ],
        Script::ExpirableGiveBack => table!["nothing-taken" 13, "given-back" 24, "none-out" 24],
        Script::LatchTrySet => table![
            "replay" 11, "wrong-kind-hash" 15, "wrong-kind-other" 18, "set" 27, "exists" 27,
        ],
        Script::LatchCountDown => table![
            "replay" 17, "replay-closed" 17, "wrong-kind-hash" 21, "wrong-kind-other" 24,
            "not-a-count" 27, "counted" 38, "opened" 38, "absent" 38,
        ],
        Script::LatchCountDownUndo => table![
            "none-ran" 15, "closed" 15, "opened" 15, "no-count" 19, "given-back" 22,
        ],
        Script::LatchDelete => table![
            "replay" 13, "absent" 18, "wrong-kind-hash" 21, "wrong-kind-other" 24,
            "not-a-count" 27, "deleted" 32,
        ],
        Script::Inspect => table!["read" 28],
        Script::InspectCounter => table!["read" 16],
    }
}

/// The lines of `return`s inside a script's helper functions: they hand a
/// value back to the script, which exits at a line of [`branches`].
pub fn helper_returns(script: Script) -> &'static [u16] {
    match script {
        // `check_counter`'s CORRUPT and nil.
        Script::FencedAcquire => &[20, 22],
        // `latch_gone`'s.
        Script::FairRelease => &[61],
        // `sooner`'s.
        Script::ReadRelease => &[45, 47],
        // `type_of`'s.
        Script::Inspect => &[9],
        _ => &[],
    }
}
