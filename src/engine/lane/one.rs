//! One lane: its turn, its entries in order, and the settling of them
//! (see `lane.rs` for what a lane is for).

use std::collections::VecDeque;
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;
use std::time::Instant;

use parking_lot::{Condvar, Mutex};

use super::entry::Entry;
use super::pending::{Outcome, Settling};
use crate::error::Result;

/// The lane of one lock name and holder field.
#[derive(Debug)]
pub(crate) struct Lane {
    pub(super) name: Arc<str>,
    pub(super) field: Arc<str>,
    pub(super) state: Mutex<State>,
    /// Signalled when the turn is given back.
    pub(super) turn_free: Condvar,
    /// Handles on the lane (turns, pushes, the worker's visits): counted
    /// under the registry's lock, so an idle lane is dropped from the
    /// registry only when nobody is about to use it.
    pub(super) users: AtomicUsize,
}

#[derive(Debug, Default)]
pub(super) struct State {
    /// Someone sends or settles on the lane now.
    pub(super) taken: bool,
    /// An acquire call whose attempts' replies never came and whose undos
    /// are not written yet: until they are, only its steps may send.
    pub(super) late_call: Option<u64>,
    /// Requests whose outcome the server has not confirmed: every sent one
    /// before every unsent one, each group in the order made.
    pub(super) entries: VecDeque<Arc<Entry>>,
}

impl Lane {
    pub(super) fn new(name: &Arc<str>, field: &Arc<str>) -> Lane {
        Lane {
            name: Arc::clone(name),
            field: Arc::clone(field),
            state: Mutex::default(),
            turn_free: Condvar::new(),
            users: AtomicUsize::new(0),
        }
    }

    /// Whether the lane holds nothing and nobody sends on it.
    pub(super) fn is_idle(&self) -> bool {
        let state = self.state.lock();
        !state.taken && state.late_call.is_none() && state.entries.is_empty()
    }

    pub(super) fn has_entries(&self) -> bool {
        !self.state.lock().entries.is_empty()
    }

    /// Takes the turn for a step of `call` once it is free and no other
    /// call keeps the lane for its late attempts; false at `deadline`.
    pub(super) fn take_turn(&self, call: Option<u64>, deadline: Option<Instant>) -> bool {
        let mut state = self.state.lock();
        loop {
            let kept_by_other = state.late_call.is_some_and(|late| Some(late) != call);
            if !state.taken && !kept_by_other {
                state.taken = true;
                return true;
            }
            match deadline {
                Some(deadline) => {
                    if self.turn_free.wait_until(&mut state, deadline).timed_out() {
                        return false;
                    }
                }
                None => self.turn_free.wait(&mut state),
            }
        }
    }

    /// Takes the turn only if nobody has it (the release worker).
    pub(super) fn try_take_turn(&self) -> bool {
        let mut state = self.state.lock();
        if state.taken {
            return false;
        }
        state.taken = true;
        true
    }

    pub(super) fn give_back_turn(&self) {
        self.state.lock().taken = false;
        self.turn_free.notify_all();
    }

    /// Adds `entry`: a request sent goes before every unsent one (those
    /// run after it), an unsent one at the end.
    pub(super) fn push(&self, entry: Entry) {
        self.state.lock().insert(entry);
    }
}

impl State {
    /// See [`Lane::push`]; the caller holds the lane's lock.
    pub(super) fn insert(&mut self, entry: Entry) {
        let unsent = entry.is_unsent_release();
        let state = self;
        let at = if unsent {
            state.entries.len()
        } else {
            state
                .entries
                .iter()
                .position(|e| e.is_unsent_release())
                .unwrap_or(state.entries.len())
        };
        state.entries.insert(at, Arc::new(entry));
    }

    /// How many releases not sent yet the lane keeps: holds Redis still
    /// counts that no guard counts any more.
    pub(super) fn unsent_releases(&self) -> u32 {
        let count = self
            .entries
            .iter()
            .filter(|e| e.is_unsent_release())
            .count();
        u32::try_from(count).unwrap_or(u32::MAX)
    }

    /// How many releases the server has not confirmed: sent or not.
    pub(super) fn releases(&self) -> u32 {
        let count = self.entries.iter().filter(|e| e.is_release()).count();
        u32::try_from(count).unwrap_or(u32::MAX)
    }
}

impl Lane {
    /// Settles the entries in order, one attempt each (an entry that moves
    /// on is tried again), until all are settled (`Ok`) or one is not
    /// ready by `deadline` (its error). The caller holds the turn.
    /// `settled` is told of each entry that leaves.
    pub(super) fn settle(
        &self,
        at: &Settling<'_>,
        deadline: Instant,
        settled: impl Fn(&Entry),
    ) -> Result<()> {
        loop {
            // Left in the lane while its attempt runs: nothing is taken
            // out before the server has answered.
            let (head, others) = {
                let state = self.state.lock();
                let Some(head) = state.entries.front().cloned() else {
                    return Ok(());
                };
                let others = state.releases() - u32::from(head.is_release());
                (head, others)
            };
            match head.settle(at, deadline, others) {
                Outcome::Settled => {
                    let removed = {
                        let mut state = self.state.lock();
                        let before = state.entries.len();
                        state.entries.retain(|e| !Arc::ptr_eq(e, &head));
                        state.entries.len() < before
                    };
                    // Unless shutdown forgot it meanwhile.
                    if removed {
                        settled(&head);
                    }
                }
                Outcome::Again => {}
                Outcome::NotYet(e) => return Err(e),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::engine::lane::pending::{PendingRelease, ReleaseFn, Unconfirmed};
    use crate::engine::request_ids::RequestIds;

    fn release(sent: bool) -> Entry {
        let run: ReleaseFn = Arc::new(|_, _, _| Ok(Some(1)));
        let request = Unconfirmed {
            field: Arc::from("f"),
            request_id: "r".into(),
            attempts_made: u32::from(sent),
            first_sent: sent.then(Instant::now),
            latch_ttl: Duration::from_secs(1),
        };
        Entry::Release(Arc::new(PendingRelease::new(
            request,
            None,
            run,
            Arc::new(RequestIds::new("c")),
        )))
    }

    fn lane() -> Lane {
        Lane::new(&Arc::from("l"), &Arc::from("f"))
    }

    #[test]
    fn a_request_sent_goes_before_every_release_not_sent_yet() {
        let lane = lane();
        lane.push(release(false));
        lane.push(release(true));
        lane.push(release(false));
        lane.push(release(true));
        let unsent: Vec<bool> = lane
            .state
            .lock()
            .entries
            .iter()
            .map(|e| e.is_unsent_release())
            .collect();
        assert_eq!(unsent, [false, false, true, true]);
    }

    #[test]
    fn a_call_with_late_attempts_keeps_the_lane_for_its_own_steps() {
        let lane = lane();
        lane.state.lock().late_call = Some(7);
        let soon = Instant::now() + Duration::from_millis(20);
        assert!(!lane.take_turn(Some(8), Some(soon)), "another call's step");
        assert!(!lane.take_turn(None, Some(soon)), "a release");
        assert!(lane.take_turn(Some(7), Some(soon)), "the call's own step");
        // The worker settles entries whoever keeps the lane, but never
        // while someone has the turn.
        assert!(!lane.try_take_turn());
        lane.give_back_turn();
        assert!(lane.try_take_turn());
        lane.give_back_turn();
        lane.state.lock().late_call = None;
        assert!(lane.take_turn(Some(8), Some(soon)));
        assert!(
            !lane.take_turn(Some(8), Some(Instant::now())),
            "one turn at a time"
        );
    }

    #[test]
    fn an_idle_lane_keeps_nothing_and_nobody_holds_it() {
        let lane = lane();
        assert!(lane.is_idle());
        lane.push(release(true));
        assert!(!lane.is_idle());
        lane.state.lock().entries.clear();
        lane.state.lock().late_call = Some(1);
        assert!(!lane.is_idle(), "a call's late attempts keep it");
    }
}
