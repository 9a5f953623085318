//! The toy model checked exhaustively: two clients, one plain lock, lost
//! release replies and their retries; and the deliberate faults it must
//! find.

use redhold_model::scripts::Mutation;
use redhold_model::search::{check, Bounds, Outcome};
use redhold_model::toy::Toy;
use std::time::Duration;

const BOUNDS: Bounds = Bounds {
    max_depth: 60,
    time_limit: Duration::from_secs(20),
    max_states: Bounds::NO_STATE_LIMIT,
};

fn toy(mutation: Option<Mutation>) -> Toy {
    Toy {
        clients: 2,
        max_holds: 2,
        lost_replies: 2,
        mutation,
        symmetry: true,
    }
}

#[test]
fn two_clients_keep_mutual_exclusion_and_every_lock_has_a_ttl() {
    let report = check(&toy(None), BOUNDS);
    println!(
        "toy: {} states, {} transitions, depth {}, {:.1?}",
        report.states, report.transitions, report.depth, report.elapsed
    );
    report.assert_exhausted();
    assert!(
        matches!(report.outcome, Outcome::Exhausted),
        "the toy's states are finite: the bound should not be reached"
    );
}

#[test]
fn a_release_that_skips_its_latch_lets_a_retry_release_twice() {
    let report = check(&toy(Some(Mutation::ReleaseSkipsLatch)), BOUNDS);
    let trace = report
        .violation("mutual exclusion")
        .unwrap_or_else(|| panic!("the mutation went unnoticed: {:?}", report.outcome));
    println!("release.lua without its latch read:\n{trace}");
    // The shortest way: a re-entered hold, a release whose reply is lost,
    // its retry releasing the last hold too, and the other client taking it.
    assert!(format!("{trace}").contains("LoseReply"));
}

#[test]
fn an_acquire_that_sets_no_ttl_is_caught() {
    let report = check(&toy(Some(Mutation::AcquireWithoutTtl)), BOUNDS);
    let trace = report
        .violation("no lock without a TTL")
        .unwrap_or_else(|| panic!("the mutation went unnoticed: {:?}", report.outcome));
    assert_eq!(trace.steps.len(), 2, "acquire, then serve it:\n{trace}");
}

#[test]
#[should_panic(expected = "stopped on its time (or state) limit")]
fn a_run_stopped_by_its_time_limit_fails() {
    let big = Toy {
        clients: 4,
        max_holds: 3,
        lost_replies: 3,
        mutation: None,
        symmetry: false,
    };
    let bounds = Bounds {
        max_depth: 100,
        time_limit: Duration::from_millis(1),
        max_states: Bounds::NO_STATE_LIMIT,
    };
    check(&big, bounds).assert_exhausted();
}

#[test]
fn symmetry_explores_fewer_states_and_finds_the_same() {
    let mut plain = toy(None);
    plain.symmetry = false;
    let (with, without) = (check(&toy(None), BOUNDS), check(&plain, BOUNDS));
    with.assert_exhausted();
    without.assert_exhausted();
    assert!(
        with.states < without.states,
        "{} vs {}",
        with.states,
        without.states
    );
}

/// The search's speed on larger toys (`cargo test -p redhold-model --test
/// toy -- --ignored --nocapture`).
#[test]
#[ignore]
fn speed() {
    for (clients, holds, lost, symmetry) in [
        (3, 3, 3, false),
        (5, 3, 3, false),
        (5, 3, 3, true),
        (6, 3, 3, true),
    ] {
        let model = Toy {
            clients,
            max_holds: holds,
            lost_replies: lost,
            mutation: None,
            symmetry,
        };
        let bounds = Bounds {
            max_depth: 1000,
            time_limit: Duration::from_secs(120),
            max_states: Bounds::NO_STATE_LIMIT,
        };
        let report = check(&model, bounds);
        report.assert_exhausted();
        println!(
            "clients {clients}, holds {holds}, lost {lost}, symmetry {symmetry}: {} states, {} transitions, {:.2?}, {:.0} states/s",
            report.states,
            report.transitions,
            report.elapsed,
            report.states_per_second()
        );
    }
}
