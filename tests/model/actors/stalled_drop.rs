//! A guard dropped while its release request is stuck (issue 22, part 3):
//! the fault proxy holds the release's first request back longer than the
//! response timeout, as a stalled server would, so the drop returns and the
//! client's release worker carries the release on, while the stuck request
//! still reaches Redis later. Then the same thread takes the same lock
//! again at once (its acquire must wait for the pending release: the
//! release decrements the same hash field as the new hold), or the client
//! is shut down with the release pending. The oracle judges the new hold
//! like any other: a late release that took it away shows as two holders,
//! a lost hold or a wrong hold count.

use std::time::Duration;

use super::{release_matcher, Actor};
use crate::fault_proxy::{Action, Rule};
use crate::history::Event;
use crate::targets::{Kind, Method};

impl Actor {
    /// See the module doc: drop held guard `index` with its release
    /// request held back `delay`; then `reacquire` the same target, or
    /// `restart` the client (shutdown with the release pending).
    pub(super) fn stalled_drop(
        &mut self,
        index: usize,
        delay: Duration,
        reacquire: Option<Method>,
        restart: bool,
    ) {
        let Some(proxy) = self.spec.proxy.as_ref() else {
            return self.release(index, true, None);
        };
        let (set, target) = {
            let h = &self.held[index];
            (h.set.clone(), h.target.clone())
        };
        if target.kind == Kind::Red || self.held[index].guard.is_none() {
            return self.release(index, true, None);
        }
        let armed = proxy.arm(Rule {
            matcher: release_matcher(&set, &target),
            action: Action::DelayRequest(delay),
        });
        self.release(index, true, None);
        if armed.disarm() {
            self.record(Event::Note {
                text: format!(
                    "{}: the fault proxy held the release's first request of {} {} back {} ms",
                    self.spec.label,
                    target.kind.as_str(),
                    target.joined(),
                    delay.as_millis()
                ),
            });
        }
        if restart {
            return self.spec.slot.restart(&self.spec.recorder);
        }
        if let Some(method) = reacquire {
            let reentrant = self.held.iter().any(|h| h.target == target);
            self.acquire(target, method, reentrant);
        }
    }
}
