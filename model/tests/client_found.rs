//! Defects of the library as built that the model found (issue 40:
//! "every counterexample the model finds against the code as built is a
//! defect"). Each is excused in the configurations CI explores
//! (`redhold_model::client::Known`) and found here again with its excuse
//! off; each has a deterministic test against a real server in the
//! library's `tests/faults/model_found.rs`, failing until it is fixed.
//! Once it is, the model's mirror of the fix makes the test here fail:
//! then the excuse and this test go.
//!
//! The first two it found (a lost reply before a late retry, a wake-up
//! taken by another waiter) are fixed and mirrored; their fixes left out
//! are mutations now (`tests/client_mutations.rs`). The two here are what
//! those fixes leave.

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

/// A cut after the first attempt ran, the retry held back, then its
/// connection cut before it runs: three faults (`plain_faults` has two).
#[test]
fn the_give_back_of_a_cut_attempt_is_lost_with_the_late_retrys_connection() {
    let cfg = Config {
        fault_budget: 3,
        ..Config::plain_faults()
    };
    counterexample(
        "cut attempts' undo lost",
        unexcused(Known::CutAttemptsUndoLost, cfg),
        &["at rest, Redis counts the holds the guards stand for"],
    );
}
