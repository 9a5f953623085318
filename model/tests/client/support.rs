//! What the client model's tests share: a run of one configuration, its
//! figures, and a counterexample printed as the Redis commands and client
//! steps that lead to it.

use redhold_model::client::{ClientModel, Config};
use redhold_model::search::{check, Bounds, Model, Outcome, Report, Trace};
use std::time::Duration;

/// The most actions from the initial state: far beyond every
/// configuration's depth, so that a run exhausts its states.
const MAX_DEPTH: usize = 400;

fn env(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

/// A run's bounds: past its time limit (`REDHOLD_MODEL_LIMIT_SECS`, 120 s
/// by default) or its state limit (`REDHOLD_MODEL_MAX_STATES`, none by
/// default; a deep run's memory grows with it) the run fails: a sample is
/// not a proof.
fn bounds() -> Bounds {
    Bounds {
        max_depth: MAX_DEPTH,
        time_limit: Duration::from_secs(env("REDHOLD_MODEL_LIMIT_SECS").unwrap_or(120)),
        max_states: env("REDHOLD_MODEL_MAX_STATES").map_or(Bounds::NO_STATE_LIMIT, |n| n as usize),
    }
}

/// Explores `cfg` to the end and checks every property in every state;
/// asserts that it exhausted its states and that every event in `events`
/// happened somewhere (else the bounds are too small to mean anything).
pub(crate) fn explore(name: &str, cfg: Config, events: &[&str]) -> Report<ClientModel> {
    let model = ClientModel::new(cfg);
    let report = check(&model, bounds());
    println!(
        "{name}: {} states, {} transitions, depth {}, {:.1?} ({:.0} states/s)",
        report.states,
        report.transitions,
        report.depth,
        report.elapsed,
        report.states_per_second()
    );
    if let Outcome::Violated(property, trace) = &report.outcome {
        panic!(
            "{name}: {property} does not hold:\n{}",
            render(&model, trace)
        );
    }
    report.assert_exhausted();
    assert!(
        matches!(report.outcome, Outcome::Exhausted),
        "{name}: the depth bound was reached"
    );
    let reached = model.event_names(report.events);
    for event in events {
        assert!(
            reached.contains(event),
            "{name}: \"{event}\" never happened: the bounds are too small (reached: {reached:?})"
        );
    }
    report
}

/// Explores `cfg` until a property fails, and returns the counterexample
/// (shortest: breadth first); panics unless the property is one of
/// `expected`. Prints it.
pub(crate) fn counterexample(name: &str, cfg: Config, expected: &[&str]) -> (String, usize) {
    let model = ClientModel::new(cfg);
    let report = check(&model, bounds());
    let Outcome::Violated(property, trace) = &report.outcome else {
        panic!(
            "{name}: no counterexample ({} states, {:.1?}): the defect went unnoticed",
            report.states, report.elapsed
        );
    };
    let text = render(&model, trace);
    println!(
        "{name}: \"{property}\" fails after {} steps ({} states, {:.1?}):\n{text}",
        trace.steps.len(),
        report.states,
        report.elapsed
    );
    assert!(
        expected.contains(property),
        "{name}: expected one of {expected:?}, found \"{property}\":\n{text}"
    );
    (text, trace.steps.len())
}

/// A trace as numbered steps, then what Redis holds at its end.
pub(crate) fn render(model: &ClientModel, trace: &Trace<ClientModel>) -> String {
    let mut out: Vec<String> = trace
        .notes
        .iter()
        .enumerate()
        .map(|(i, note)| format!("  {:>2}. {note}", i + 1))
        .collect();
    let last = trace.last();
    let keys: Vec<String> = last
        .redis
        .keys
        .iter()
        .map(|(k, e)| format!("{k:?} = {:?} (ttl {:?} ms)", e.value, e.expires_at))
        .collect();
    out.push(format!("  at the end, Redis has: {}", keys.join("; ")));
    for (c, client) in last.clients.iter().enumerate() {
        for (t, thread) in client.threads.iter().enumerate() {
            out.push(format!(
                "  c{c}.t{t}: holds {:?}, lane {:?}",
                thread.gen, thread.lane.entries
            ));
        }
    }
    let _ = model;
    out.join("\n")
}
