//! A small explicit-state checker: breadth-first over every reachable
//! state up to a depth bound, each state checked against every property.
//!
//! - **States** are stored once, as 64-bit fingerprints of their canonical
//!   form ([`Model::canonical`], the symmetry reduction: identity unless a
//!   model says otherwise), each with its parent's fingerprint, so that a
//!   counterexample is rebuilt by replaying the model from an initial state
//!   ([`Trace`]). A collision (two states, one fingerprint) would hide a
//!   state: at 10^7 states its chance is about 3 in a million.
//! - **Breadth-first**, so a counterexample is a shortest one.
//! - **Bounds**: `max_depth` stops the search at that many actions; a run
//!   reports whether it exhausted the reachable states or only the bound.
//!   `time_limit` stops it too, and a stopped run is [`Outcome::TimedOut`],
//!   which [`Report::assert_exhausted`] fails: a sample is not a proof.
//!
//! The model's step function names nothing of this module: a model is a
//! plain `step(&State, &Action) -> Option<State>` behind [`Model`].

mod fingerprint;
mod trace;

pub use fingerprint::fingerprint;
pub use trace::Trace;

use fingerprint::Fingerprints;
use std::collections::hash_map::Entry;
use std::collections::VecDeque;
use std::fmt::Debug;
use std::hash::Hash;
use std::time::{Duration, Instant};

/// A model to check: its states, the actions possible in each, and what
/// must hold in every reachable state.
pub trait Model {
    /// A whole state of the system.
    type State: Clone + Hash + Eq + Debug;
    /// One atomic step.
    type Action: Clone + Debug;

    /// The states the system starts in.
    fn init(&self) -> Vec<Self::State>;

    /// Every action possible in `state`, appended to `out`.
    fn actions(&self, state: &Self::State, out: &mut Vec<Self::Action>);

    /// The state after `action`, or `None` when it changes nothing.
    fn step(&self, state: &Self::State, action: &Self::Action) -> Option<Self::State>;

    /// What must hold in every reachable state.
    fn properties(&self) -> Vec<Property<Self>>;

    /// A representative of `state`'s symmetry class (for example with
    /// clients sorted): states with one representative are explored once.
    fn canonical(&self, state: &Self::State) -> Self::State {
        state.clone()
    }

    /// The fingerprint of `state`'s canonical form (a model whose states
    /// are canonical already may hash them as they are).
    fn fingerprint(&self, state: &Self::State) -> u64 {
        fingerprint(&self.canonical(state))
    }

    /// What the step that led to `state` did that reachability checks
    /// look for, as bits (see [`Report::events`]).
    fn events(&self, _state: &Self::State) -> u64 {
        0
    }

    /// The names of the events in `mask`, for reports.
    fn event_names(&self, _mask: u64) -> Vec<&'static str> {
        Vec::new()
    }

    /// One step of a counterexample, as a reader wants it.
    fn describe(
        &self,
        _before: &Self::State,
        action: &Self::Action,
        _after: &Self::State,
    ) -> String {
        format!("{action:?}")
    }
}

/// A property that must hold in every reachable state.
pub struct Property<M: Model + ?Sized> {
    /// Its name, as reports give it.
    pub name: &'static str,
    /// Whether it holds in a state.
    pub holds: fn(&M, &M::State) -> bool,
}

impl<M: Model + ?Sized> Debug for Property<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

/// How far a run may go.
#[derive(Clone, Copy, Debug)]
pub struct Bounds {
    /// The most actions from an initial state.
    pub max_depth: usize,
    /// The most time the run may take; past it the run fails.
    pub time_limit: Duration,
    /// The most states the run may keep (each costs memory, those still to
    /// expand a whole state each); past it the run fails like a timeout.
    pub max_states: usize,
}

impl Bounds {
    /// No limit on states: CI's configurations are small.
    pub const NO_STATE_LIMIT: usize = usize::MAX;
}

/// How a run ended.
#[derive(Debug)]
pub enum Outcome<M: Model> {
    /// Every reachable state was checked.
    Exhausted,
    /// Every state within `max_depth` actions was checked; some have
    /// successors beyond it.
    BoundReached,
    /// The time limit (or the state limit) stopped the run: not every
    /// state was checked.
    TimedOut,
    /// A property failed; the trace leads to a state where it does not hold.
    Violated(&'static str, Trace<M>),
}

/// What a run found, and how much it explored.
#[derive(Debug)]
pub struct Report<M: Model> {
    /// How it ended.
    pub outcome: Outcome<M>,
    /// Distinct (canonical) states checked.
    pub states: usize,
    /// Transitions taken (successors computed).
    pub transitions: usize,
    /// The deepest level reached.
    pub depth: usize,
    /// How long it took.
    pub elapsed: Duration,
    /// Every event a transition explored had ([`Model::events`]).
    pub events: u64,
}

impl<M: Model> Report<M> {
    /// States checked per second.
    pub fn states_per_second(&self) -> f64 {
        self.states as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// Panics unless the run checked everything within its bound and found
    /// no violation (the message holds the counterexample).
    pub fn assert_exhausted(&self) {
        match &self.outcome {
            Outcome::Exhausted | Outcome::BoundReached => {}
            Outcome::TimedOut => panic!(
                "the search stopped on its time (or state) limit after {} states ({:.1?}, \
                 depth {}): the bound was not exhausted; raise the limit or lower the bound",
                self.states, self.elapsed, self.depth
            ),
            Outcome::Violated(name, trace) => panic!("{name} does not hold:\n{trace}"),
        }
    }

    /// The counterexample for `property`, if the run found one.
    pub fn violation(&self, property: &str) -> Option<&Trace<M>> {
        match &self.outcome {
            Outcome::Violated(name, trace) if *name == property => Some(trace),
            _ => None,
        }
    }
}

/// Explores `model` breadth-first within `bounds`.
pub fn check<M: Model>(model: &M, bounds: Bounds) -> Report<M> {
    let started = Instant::now();
    let properties = model.properties();
    // Each canonical state's fingerprint -> its parent's (itself for roots).
    let mut seen: Fingerprints<u64> = Fingerprints::default();
    let mut queue: VecDeque<(M::State, u64, usize)> = VecDeque::new();
    let (mut transitions, mut depth, mut beyond) = (0, 0, false);
    let mut actions = Vec::new();
    let mut events = 0u64;
    let done = |outcome, seen: &Fingerprints<u64>, transitions, depth, events| Report {
        outcome,
        states: seen.len(),
        transitions,
        depth,
        elapsed: started.elapsed(),
        events,
    };
    let violated = |state: &M::State, fp: u64, seen: &Fingerprints<u64>| {
        properties
            .iter()
            .find(|p| !(p.holds)(model, state))
            .map(|p| Outcome::Violated(p.name, Trace::rebuild(model, seen, fp)))
    };
    for state in model.init() {
        let fp = model.fingerprint(&state);
        if seen.insert(fp, fp).is_none() {
            if let Some(v) = violated(&state, fp, &seen) {
                return done(v, &seen, transitions, depth, events);
            }
            queue.push_back((state, fp, 0));
        }
    }
    let mut expanded = 0u64;
    while let Some((state, fp, level)) = queue.pop_front() {
        depth = depth.max(level);
        expanded += 1;
        // The clock is read every 256 states: cheap, and often enough.
        if expanded % 256 == 1
            && (started.elapsed() > bounds.time_limit || seen.len() > bounds.max_states)
        {
            return done(Outcome::TimedOut, &seen, transitions, depth, events);
        }
        actions.clear();
        model.actions(&state, &mut actions);
        for action in &actions {
            let Some(next) = model.step(&state, action) else {
                continue;
            };
            transitions += 1;
            events |= model.events(&next);
            if level == bounds.max_depth {
                beyond = true;
                continue;
            }
            let next_fp = model.fingerprint(&next);
            if let Entry::Vacant(slot) = seen.entry(next_fp) {
                slot.insert(fp);
                if let Some(v) = violated(&next, next_fp, &seen) {
                    return done(v, &seen, transitions, level + 1, events);
                }
                queue.push_back((next, next_fp, level + 1));
            }
        }
    }
    let outcome = if beyond {
        Outcome::BoundReached
    } else {
        Outcome::Exhausted
    };
    done(outcome, &seen, transitions, depth, events)
}
