//! A counterexample: the actions from an initial state to a state where a
//! property fails, rebuilt by replaying the model along the fingerprints
//! the search kept.

use super::fingerprint::Fingerprints;
use super::Model;
use std::fmt;

/// The actions and states from an initial state to the last one.
pub struct Trace<M: Model> {
    /// The initial state.
    pub init: M::State,
    /// Each action and the state it led to.
    pub steps: Vec<(M::Action, M::State)>,
    /// Each step as the model describes it ([`Model::describe`]).
    pub notes: Vec<String>,
}

impl<M: Model> Trace<M> {
    /// Rebuilds the path to `last` from `parents` (fingerprint -> parent's,
    /// a root its own).
    pub(super) fn rebuild(model: &M, parents: &Fingerprints<u64>, last: u64) -> Trace<M> {
        let mut path = vec![last];
        while let Some(&parent) = parents.get(path.last().expect("a path")) {
            if parent == *path.last().expect("a path") {
                break;
            }
            path.push(parent);
        }
        path.reverse();
        let canon = |s: &M::State| model.fingerprint(s);
        let init = model
            .init()
            .into_iter()
            .find(|s| canon(s) == path[0])
            .expect("the trace starts at an initial state");
        let mut steps = Vec::new();
        let mut notes = Vec::new();
        let mut state = init.clone();
        let mut actions = Vec::new();
        for &want in &path[1..] {
            actions.clear();
            model.actions(&state, &mut actions);
            let (action, next) = actions
                .iter()
                .find_map(|a| {
                    let next = model.step(&state, a)?;
                    (canon(&next) == want).then(|| (a.clone(), next))
                })
                .expect("each step of the trace replays");
            notes.push(model.describe(&state, &action, &next));
            steps.push((action, next.clone()));
            state = next;
        }
        Trace { init, steps, notes }
    }

    /// The state the trace ends in.
    pub fn last(&self) -> &M::State {
        self.steps.last().map_or(&self.init, |(_, s)| s)
    }
}

impl<M: Model> fmt::Display for Trace<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "  from {:?}", self.init)?;
        for (i, note) in self.notes.iter().enumerate() {
            writeln!(f, "  {}. {note}", i + 1)?;
        }
        write!(f, "  ending in {:?}", self.last())
    }
}

impl<M: Model> fmt::Debug for Trace<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}
