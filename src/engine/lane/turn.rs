//! What the holder of a lane's turn may do: add what the server has not
//! confirmed, count the releases the lane keeps, keep the lane for a call
//! with late attempts, settle it (see `lane.rs`).

use std::sync::Arc;
use std::time::Instant;

use super::entry::{Entry, NoRoom};
use super::registry::Turn;
use crate::error::Result;

impl Turn<'_> {
    /// Records `entry`, a request of this step the server has not confirmed
    /// (or a release not sent yet), for whoever takes the turn next.
    /// Gives it back when the client keeps too many already.
    pub(crate) fn push(&self, entry: Entry) -> std::result::Result<(), NoRoom> {
        self.shared.push(&self.lane, entry)
    }

    /// Runs `count` with the lane's lock held, given how many releases
    /// the lane keeps that were not sent yet, and how many the server has
    /// not confirmed (sent or not): holds Redis may still count that no
    /// guard counts any more. A release that forgets its hold without the
    /// turn does it under the same lock, with its entry (see
    /// [`Lanes::hand_to_worker_with`]), so `count` never sees it half done.
    pub(crate) fn with_state<T>(&self, count: impl FnOnce(u32, u32) -> T) -> T {
        let state = self.lane.state.lock();
        count(state.unsent_releases(), state.releases())
    }

    /// Keeps the lane for this turn's call, whose attempts' replies never
    /// came, until [`late_undone`](Self::late_undone).
    pub(crate) fn keep_for_late_call(&self) {
        if let Some(call) = self.call {
            self.lane.state.lock().late_call = Some(call);
        }
    }

    /// The call's late attempts have their undos: other steps may go.
    pub(crate) fn late_undone(&self) {
        let mut state = self.lane.state.lock();
        if state.late_call.is_some() && state.late_call == self.call {
            state.late_call = None;
            drop(state);
            self.lane.turn_free.notify_all();
        }
    }

    /// Drops the releases the lane keeps that were not sent yet: the step
    /// found that Redis holds none of the field's holds any more, so they
    /// have nothing of theirs to release (sent later, they would release a
    /// hold taken since).
    pub(crate) fn drop_unsent_releases(&self) {
        let mut dropped = Vec::new();
        self.lane.state.lock().entries.retain(|entry| {
            let unsent = entry.is_unsent_release();
            if unsent {
                dropped.push(Arc::clone(entry));
            }
            !unsent
        });
        for entry in &dropped {
            self.shared.entry_settled(entry);
        }
    }

    /// Settles the lane's entries within `deadline` (see [`Lane::settle`]).
    pub(crate) fn settle(&self, deadline: Instant) -> Result<()> {
        self.shared.settle(&self.lane, deadline)
    }

    /// Whether the lane holds entries the server has not confirmed.
    pub(crate) fn has_entries(&self) -> bool {
        self.lane.has_entries()
    }
}
