//! The defect of the library as built that the latch model found (issue
//! 40: "every counterexample the model finds against the code as built is
//! a defect"), found here again. Once it is fixed, the model's mirror of
//! the fix makes the test here fail: then this test goes.
//!
//! Reproduced against `redis-server` with the fault proxy by
//! `tests/faults/model_found.rs`
//! (`a_failed_count_down_that_runs_late_does_not_count_the_next_round`,
//! ignored while open).

use redhold_model::latch::model::{NOT_EARLY, REDIS_COUNT};
use redhold_model::latch::{Config, LatchModel};
use redhold_model::search::{check, Bounds, Report};
use std::time::Duration;

fn run(cfg: Config) -> Report<LatchModel> {
    let bounds = Bounds {
        max_depth: 200,
        time_limit: Duration::from_secs(120),
        max_states: Bounds::NO_STATE_LIMIT,
    };
    check(&LatchModel { cfg }, bounds)
}

fn found(cfg: Config, property: &str) -> usize {
    let report = run(cfg);
    let trace = report
        .violation(property)
        .unwrap_or_else(|| panic!("not found: {:?}", report.outcome));
    eprintln!(
        "{property}: {} steps, {} states\n{trace}",
        trace.steps.len(),
        report.states
    );
    trace.steps.len()
}

/// `Config::rearm()`: a count of 1; c0 and c1 call `count_down`; c0's
/// runs and opens the latch; c1's first attempt is cut before it runs,
/// the pool's retry is held back past the response timeout, and the call
/// fails (the retries are spent). c0 arms the latch again
/// (`try_set_count(1)`, a second round) and c1 waits; the set runs; then
/// c1's held-back attempt runs: no attempt of its call ran before it, so
/// its request latch is absent, and it counts the new round down. c1's
/// wait looks and returns "opened" though no `count_down` was called in
/// the round (14 steps, 57,015 states). The Redis-side check stops
/// sooner (10 steps, 16,496 states): c0's own failed count-down runs
/// late in the round c0 armed again after c1's opened the first.
#[test]
fn a_failed_count_down_that_runs_late_counts_the_next_round() {
    let redis = found(Config::rearm(), REDIS_COUNT);
    let waiter = found(
        Config {
            check_redis_count: false,
            ..Config::rearm()
        },
        NOT_EARLY,
    );
    assert!(redis < waiter);
}
