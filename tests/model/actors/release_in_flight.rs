//! A release still on its way while the same thread goes on with the lock
//! (issue 39, defect 1: an acquire that marks such a release settled takes
//! the lock while the release is on its way, and the release then frees
//! the new hold).
//!
//! The actor takes a single lock of any kind (watched, or leased past the
//! case), twice with `reentry` (two guards of one generation), then has
//! the fault proxy hold back every release request of that lock by this
//! thread (the lock's key, the thread's holder field and the unlock
//! latch name them) 1 to 2.5 s, for a window of 0.8 to 2.5 s (a standing
//! rule), and drops the last guard: the drop's attempt times out, the
//! client's release worker carries the release on (its resends within the
//! window held back too), and the first request still reaches Redis
//! later. After a pause of 0 to 2 s the same thread makes its next calls
//! on the lock while the worker runs: `lock()`, `try_lock_for`,
//! `try_lock`, `hold_count()`, a re-entry while the generation's other
//! guard stands, or that guard's `unlock()` (from about 1 s after the
//! drop on, a release's retry bound reaches past the unlock latch's life,
//! so only waiting for the dropped release keeps the two apart). Each may
//! wait for the release or fail like an outage. Once every held-back
//! request has run, `in_flight.rs` judges the thread's count. Now and
//! then the client is shut down, or (in a child process) the process
//! forks, with the release on its way.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::in_flight::{CALL, JUDGE, SETTLE};
use super::Actor;
use crate::fault_proxy::{Action, Matcher, Rule};
use crate::history::Event;
use crate::ops::{CaseEnd, ReleaseCase};
use crate::targets;

/// The words of the case's note: the schedule's summary counts them.
pub(crate) const RELEASE_IN_FLIGHT: &str = "release in flight";

/// How long the takes and the drop (one response timeout) usually take,
/// for the case's bound.
const TAKE_AND_DROP: Duration = Duration::from_millis(800);

impl Actor {
    /// See the module doc and [`ReleaseCase`].
    pub(super) fn release_in_flight(&mut self, case: ReleaseCase) {
        let ReleaseCase {
            target,
            method,
            reentry,
            delay,
            window,
            pause,
            next,
            end,
        } = case;
        if !self.held.is_empty() || !target.kind.single() {
            return;
        }
        // Only a case that can be judged before the schedule stops: one
        // cut short judges nothing and holds the wind-down up.
        let bound = TAKE_AND_DROP + (pause + CALL).max(window + delay) + SETTLE + JUDGE;
        if Instant::now() + bound >= self.spec.stops_at {
            return;
        }
        let Some(path) = self.in_flight_path() else {
            return;
        };
        let guards = if reentry { 2 } else { 1 };
        for k in 0..guards {
            self.acquire_with(Arc::clone(&path.set), target.clone(), method, k > 0, None);
            if self.held.len() != k + 1 {
                return self.end_path(path);
            }
        }
        let field = targets::holder_id(&path.set, target.kind, target.names[0]);
        let armed_at = Instant::now();
        let armed = path.arming.arm_for(
            Rule {
                matcher: Matcher::script(
                    &path.set.full(target.names[0]),
                    &["redisson_unlock_latch:", &field],
                ),
                action: Action::DelayRequest(delay),
            },
            window,
        );
        self.release(guards - 1, true, None);
        let dropped = Instant::now();
        let quiet = armed_at + window + delay + SETTLE;
        match end {
            CaseEnd::Shutdown => self.shut_down_mid_path(&path),
            CaseEnd::Fork => self.fork_mid_path(&path, &target),
            CaseEnd::Judge => {}
        }
        if end != CaseEnd::Shutdown {
            self.pause_until(dropped + pause);
            for call in &next {
                self.next_call(&path, &target, *call, quiet);
            }
            self.pause_until(quiet);
        }
        let fired = armed.times_fired();
        armed.disarm();
        if fired > 0 {
            self.record(Event::Note {
                text: format!(
                    "{}: {RELEASE_IN_FLIGHT} on {} {}{}: the fault proxy held back {fired} \
                     release request(s) {} ms each, for {} ms; then {}",
                    self.spec.label,
                    target.kind.as_str(),
                    target.joined(),
                    if reentry { " (one of two guards)" } else { "" },
                    delay.as_millis(),
                    window.as_millis(),
                    match end {
                        CaseEnd::Shutdown => "a shutdown".to_owned(),
                        CaseEnd::Fork => format!("a fork, {next:?} after {} ms", pause.as_millis()),
                        CaseEnd::Judge => format!("{next:?} after {} ms", pause.as_millis()),
                    }
                ),
            });
            if end != CaseEnd::Shutdown {
                self.judge_in_flight(&path, &target, RELEASE_IN_FLIGHT);
            }
        }
        self.end_path(path);
    }
}
