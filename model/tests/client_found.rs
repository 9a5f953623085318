//! Defects of the library as built that the model found (issue 40:
//! "every counterexample the model finds against the code as built is a
//! defect"). Each is excused in the configurations CI explores
//! (`redhold_model::client::Known`) and found here again with its excuse
//! off. Once it is fixed, the model's mirror of the fix makes the test
//! here fail: then the excuse and this test go.

#[allow(dead_code)] // Each test file uses part of the support.
mod client {
    pub(crate) mod support;
}

use client::support::counterexample;
use redhold_model::client::{Config, Known};

fn unexcused(known: Known, cfg: Config) -> Config {
    Config {
        excused: Known::ALL.iter().copied().filter(|k| *k != known).collect(),
        ..cfg
    }
}

/// With `sync_replicas`: a re-entry the replica did not acknowledge is
/// undone by a plain release of one hold; the master dies before its
/// reply, and the pool's retry runs it on the promoted replica, which
/// never had the re-entry: it frees the hold the thread was told `Ok`
/// for, and replicated.
#[test]
fn an_unreplicated_reentry_undone_across_a_failover_frees_a_guarded_hold() {
    counterexample(
        "give-back across a failover",
        unexcused(Known::GiveBackAcrossFailover, Config::failover(true)),
        &[
            "at rest, Redis counts the holds the guards stand for",
            "mutual exclusion",
        ],
    );
}

/// With `sync_replicas` and no failover: an acquire runs and the `WAIT`
/// behind it is cut before its reply; the pool's retry runs the acquire
/// again (two holds) and its `WAIT` counts no replica: the undo gives
/// back one hold and the call fails, leaving the cut attempt's hold with
/// no guard until its lease runs out (not excused: found in
/// `deep_failover(true)`, which is therefore not explored to its end).
#[test]
fn a_cut_wait_then_an_unreplicated_retry_leaves_the_first_hold() {
    counterexample(
        "cut WAIT, unreplicated retry",
        Config::deep_failover(true),
        &["at rest, Redis counts the holds the guards stand for"],
    );
}
