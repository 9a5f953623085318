//! Defects of the library as built that the model found (issue 40:
//! "every counterexample the model finds against the code as built is a
//! defect"). Each is excused in the configurations CI explores
//! (`redhold_model::client::Known`) and found here again with its excuse
//! off; each has a deterministic test against a real server in the
//! library's `tests/faults/model_found.rs`, failing until it is fixed.
//! Once it is, the model's mirror of the fix makes the test here fail:
//! then the excuse and this test go.

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

#[test]
fn a_lost_acquire_reply_then_a_late_retry_leaves_a_hold_with_no_guard() {
    let cfg = unexcused(Known::LostReplyBeforeLateRetry, Config::plain_faults());
    counterexample(
        "lost reply before a late retry",
        cfg,
        &["at rest, Redis counts the holds the guards stand for"],
    );
}

#[test]
fn a_waiter_sleeps_past_a_free_lock_when_its_wake_up_went_to_another() {
    let cfg = unexcused(Known::WakeUpTakenByOtherWaiter, Config::handover());
    counterexample(
        "wake-up taken by another waiter",
        cfg,
        &["no waiter parked on a free lock with nothing on its way"],
    );
}
