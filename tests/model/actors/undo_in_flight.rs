//! A late acquire's undo still on its way while the same thread gives
//! the lock back and goes on with it (issue 39, defect 2: a release that
//! overtakes the undo frees the lock before the late acquire runs; the
//! late acquire then takes it, and the undo, which gives back only holds
//! above the guards the call left, leaves it held with no guard).
//!
//! The actor, holding nothing, has the fault proxy hold back the next
//! request naming a single lock (of any kind) with this thread's holder
//! field 0.9 to 2.5 s, past the response timeout, and calls an acquire:
//! the pool's retry takes the lock while the first request waits, and the
//! call writes an undo behind that request on its connection. The guard
//! is given back at once (mostly dropped: its release must wait for the
//! undo, so it goes on in the background), and while the request is still
//! held back the same thread goes on: `try_lock()` again and again (each
//! guard given back at once, so that the lock is free when the late
//! request runs unless the order holds), `lock()`, `try_lock_for`,
//! `hold_count()`. Each may wait for the undo or fail like an outage.
//! Once the request has run, `in_flight.rs` judges the thread's count.
//! Now and then the client is shut down, or (in a child process) the
//! process forks, with the undo on its way. And now and then the
//! held-back request's connection is cut as its hold-back ends, the
//! request run first or not, so that the undo behind it never arrives:
//! the undo must go again on another connection (its copy held back too,
//! now and then past the response timeout), or the late hold stays
//! ("left held"); half the time the guard stands until the judge, so
//! that no release of the field cleans up after the undo.
use std::time::Duration;

use std::sync::Arc;
use std::time::Instant;

use super::in_flight::{CALL, JUDGE, SETTLE};
use super::Actor;
use crate::fault_proxy::{Action, Matcher, Rule};
use crate::history::Event;
use crate::ops::{CaseEnd, UndoCase, UndoCut};
use crate::targets;

/// The words of the case's note: the schedule's summary counts them.
pub(crate) const UNDO_IN_FLIGHT: &str = "undo in flight";

impl Actor {
    /// See the module doc and [`UndoCase`].
    pub(super) fn undo_in_flight(&mut self, case: UndoCase) {
        let UndoCase {
            target,
            method,
            delay,
            unlock,
            next,
            end,
            cut,
        } = case;
        if !self.held.is_empty() || !target.kind.single() {
            return;
        }
        // Only a case that can be judged before the schedule stops.
        if Instant::now() + CALL + delay + SETTLE + JUDGE >= self.spec.stops_at {
            return;
        }
        let Some(path) = self.in_flight_path() else {
            return;
        };
        let field = targets::holder_id(&path.set, target.kind, target.names[0]);
        // The thread holds nothing of the lock: its next script naming it
        // is this acquire's first request (its retry goes through).
        let armed = path.arming.arm(Rule {
            matcher: Matcher::script(&path.set.full(target.names[0]), &[&field]),
            action: match cut {
                None => Action::DelayRequest(delay),
                Some(UndoCut { ran: true, .. }) => Action::DelayRequestThenCut(delay),
                Some(UndoCut { ran: false, .. }) => Action::LoseRequestAfter(delay),
            },
        });
        if let Some(c) = cut {
            // Its undo goes on a copy once the connection is cut: a
            // shutdown before that copy ran leaves the late hold to it.
            let for_ms = (CALL + delay + c.copy_held + SETTLE).as_millis() as u64;
            self.record(Event::HeldBack {
                actor: self.spec.id,
                client: path.set.tag.clone(),
                name: target.names[0].to_string(),
                for_ms,
            });
        }
        let called = Instant::now();
        self.acquire_with(Arc::clone(&path.set), target.clone(), method, false, None);
        let returned = Instant::now();
        let fired = armed.disarm();
        // The undo's next copy: the first script naming the lock with the
        // thread's field and an undo's condition (`above:N`) once the call
        // is over (never a renewal: a renewal held back is a fault the
        // case does not account for).
        let copy = cut.filter(|c| fired && !c.copy_held.is_zero()).map(|c| {
            path.arming.arm(Rule {
                matcher: Matcher::script(&path.set.full(target.names[0]), &[&field, "above:"]),
                action: Action::DelayRequest(c.copy_held),
            })
        });
        let copy_held = cut.map_or(Duration::ZERO, |c| c.copy_held);
        let took = self.held.len() == 1;
        let keep = cut.is_some_and(|c| c.keep_guard);
        if took && !keep {
            self.release(0, !unlock, None);
        }
        if !fired {
            return self.end_path(path);
        }
        // Held back from when it was sent (after the call began) on: it
        // runs no earlier than this, and has run by the quiet point.
        let held_until = called + delay;
        let quiet = returned + delay + copy_held + SETTLE;
        match end {
            CaseEnd::Shutdown => self.shut_down_mid_path(&path),
            CaseEnd::Fork => self.fork_mid_path(&path, &target),
            CaseEnd::Judge => {}
        }
        if end != CaseEnd::Shutdown {
            for call in &next {
                self.next_call(&path, &target, *call, held_until);
            }
            self.pause_until(quiet);
        }
        self.record(Event::Note {
            text: format!(
                "{}: {UNDO_IN_FLIGHT} on {} {}: the fault proxy held back the first request of \
                 {} {} ms{} ({}; given back by {}); then {}",
                self.spec.label,
                target.kind.as_str(),
                target.joined(),
                method.label(),
                delay.as_millis(),
                match cut {
                    None => String::new(),
                    Some(c) => format!(
                        ", then cut its connection ({}; the undo's next copy held back {} ms)",
                        if c.ran { "run first" } else { "never run" },
                        c.copy_held.as_millis()
                    ),
                },
                if took {
                    "it took the lock"
                } else {
                    "it did not"
                },
                if keep {
                    "kept until judged"
                } else if unlock {
                    "unlock()"
                } else {
                    "a drop"
                },
                match end {
                    CaseEnd::Shutdown => "a shutdown".to_owned(),
                    CaseEnd::Fork => format!("a fork, {next:?}"),
                    CaseEnd::Judge => format!("{next:?}"),
                }
            ),
        });
        if let Some(copy) = copy {
            copy.disarm();
        }
        if end != CaseEnd::Shutdown {
            self.judge_in_flight(&path, &target, UNDO_IN_FLIGHT);
        }
        self.end_path(path);
    }
}
