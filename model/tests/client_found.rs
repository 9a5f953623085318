//! Defects of the library as built that the model found (issue 40:
//! "every counterexample the model finds against the code as built is a
//! defect"), each found here again. Once it is fixed, the model's mirror
//! of the fix makes the test here fail: then this test goes.

#[allow(dead_code)] // Each test file uses part of the support.
mod client {
    pub(crate) mod support;
}

use client::support::counterexample;
use redhold_model::client::Config;

/// With `sync_replicas` (d847eb6): an acquire the replica did not confirm
/// is undone by a release `above:0`; a failover cuts it, the pool's retry
/// (the same `above:0`, the same id) is held back and times out, and the
/// undo ends unconfirmed, kept nowhere (`undo_unreplicated` returns the
/// error, nothing on the lane). The thread's next acquire takes the lock
/// (told `Ok`, one guard), then the held-back retry runs: Redis counts 1,
/// above 0, and it frees the guarded hold (not excused: found in
/// `deep_failover(true)`, 14 steps, 44,673 states, which is therefore
/// not explored to its end).
#[test]
fn an_unconfirmed_unreplicated_undo_runs_after_the_next_acquire() {
    counterexample(
        "unreplicated undo run late",
        Config::deep_failover(true),
        &["at rest, Redis counts the holds the guards stand for"],
    );
}
