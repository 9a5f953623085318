//! A re-entry after the thread's hold was wiped, at the worst moment: the
//! actor takes a lock, has it force-unlocked (as another process, or a
//! restart without persistence, would), lets another thread of its client
//! take and release it, and then re-enters it with the reply garbled, cut
//! or lost (the fault proxy). Had the re-entry taken the free lock, Redis
//! would count exactly the hold the thread had, and nothing could tell
//! the new hold from the wiped one: the first guard's release would then
//! say `Ok` although the other thread held the lock in between. The
//! oracle's "silent loss" rule judges that release, and the spoiled-reply
//! judge (`spoiled.rs`) the count the re-entry left in Redis.

use std::time::Duration;

use super::Actor;
use crate::history::Event;
use crate::targets::{Kind, Method, Target};

/// How long each acquire of the case may wait: other actors use the same
/// names, and a busy lock only makes the case end early.
const WAIT: Duration = Duration::from_millis(300);

impl Actor {
    /// See the module doc: `spoil` picks how the re-entry's reply is
    /// spoiled (`spoiled::arm`).
    pub(super) fn wiped_reentry(&mut self, target: Target, spoil: u8) {
        if !self.held.is_empty() || !target.kind.single() {
            return;
        }
        self.acquire(target.clone(), Method::TryFor(WAIT), false);
        let Some(first) = self.held.iter().position(|h| h.target == target) else {
            return;
        };
        let set = std::sync::Arc::clone(&self.held[first].set);
        if self.force_unlock(&target) {
            // A reader's hold is taken from it by a writer.
            let other = Target {
                kind: if target.kind == Kind::Read {
                    Kind::Write
                } else {
                    target.kind
                },
                names: target.names.clone(),
            };
            if let Some(t) = self.helper(7, "wr", &set, &other, Method::TryFor(WAIT)) {
                let _ = crate::joins::join_within(t, Duration::from_secs(5));
            }
            self.record(Event::Note {
                text: format!(
                    "{}: re-entering {} {} after its hold was force-unlocked, the reply spoiled",
                    self.spec.label,
                    target.kind.as_str(),
                    target.joined()
                ),
            });
            self.acquire_with(set, target.clone(), Method::TryFor(WAIT), true, Some(spoil));
        }
        // The first guard by `unlock()`, so that its result is recorded;
        // then the re-entry's guard, if it returned one.
        if let Some(first) = self.held.iter().position(|h| h.target == target) {
            self.release(first, false, None);
        }
        while let Some(index) = self.held.iter().position(|h| h.target == target) {
            self.release(index, false, None);
        }
    }
}
