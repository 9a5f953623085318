//! Defects of the library as built that the model found (issue 40:
//! "every counterexample the model finds against the code as built is a
//! defect"), each found here again. Once it is fixed, the model's mirror
//! of the fix makes the test here fail: then this test goes.
//!
//! Defect 9 (an unconfirmed undo of an unreplicated acquire run after the
//! thread's next acquire) is fixed in 08de4f2 and is now
//! `ClientMutation::UnreplicatedUndoOffLane` (`client_mutations.rs`).

#[allow(dead_code)] // Each test file uses part of the support.
mod client {
    pub(crate) mod support;
}

use client::support::counterexample;
use redhold_model::client::Config;

/// With `sync_replicas` (08de4f2 mirrored): c1.t0's hold expires in
/// Redis; its next `try_lock` takes the free lock, its `WAIT` counts no
/// replica, then the replica catches up; the undo (`above:0`) frees the
/// hold on the master, c0.t0's acquire takes the lock, and the failover
/// promotes the replica, which brings c1's undone hold back (c0's acquire
/// lost, never told `Ok`). c1.t0's unlock of its expired hold finds it and
/// says `Ok` though c0 entered the lock since (defect 10, not excused:
/// found in `deep_failover(true)`, 22 steps, 804,627 states, which is
/// therefore not explored to its end).
#[test]
fn a_failover_brings_back_an_undone_unreplicated_acquire() {
    counterexample(
        "undone unreplicated acquire brought back",
        Config::deep_failover(true),
        &["no unlock says Ok for a hold another holder entered"],
    );
}
