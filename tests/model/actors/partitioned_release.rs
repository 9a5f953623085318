//! A background release that outlives its latch (issue 33, defect 2): the
//! actor takes one lock twice (guards `a` and `b`, a lease far longer
//! than the case) through a client of its own behind a fault proxy of its
//! own (chained to the schedule's proxy, so no other client is cut off),
//! drops `b` while that proxy loses the release's reply and at the same
//! moment partitions for longer than the unlock latch lives. The client's
//! release worker resends the release; when the partition heals, the
//! latch is gone. While `a` still stands, a thread of the actor's usual
//! client tries the lock: a resend that released a second time would let
//! it in (the oracle's mutual exclusion: two holders), and `a`'s unlock
//! would then say `LockLost` before its lease ran out.

use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use super::{build_set, release_matcher, Actor};
use crate::config::{LATCH_TTL, PARTITIONED_LEASE_MS};
use crate::fault_proxy::{Action, FaultProxy, Rule};
use crate::history::Event;
use crate::targets::{Kind, Method, Target};

/// The words of the case's note once the partition began: the schedule's
/// summary counts them.
pub(crate) const PARTITIONED: &str = "and partitioned its client";

/// The lease of both guards: longer than the whole case, so nothing but
/// a release can free the lock while `a` stands.
const LEASE: Duration = Duration::from_millis(PARTITIONED_LEASE_MS);
/// How long each acquire may wait: other actors use the same names.
const WAIT: Duration = Duration::from_millis(500);
/// How long `a` stands after the partition healed, and the other client
/// tries meanwhile: time for the release worker's resend to land.
const STAND: Duration = Duration::from_millis(2500);

impl Actor {
    /// See the module doc: the partition lasts `partition` past the
    /// unlock latch's life.
    pub(super) fn partitioned_release(&mut self, target: Target, partition: Duration) {
        if !self.held.is_empty() || !target.kind.single() || self.spec.proxy.is_none() {
            return;
        }
        let slot = Arc::clone(&self.spec.slot);
        let Some(port) = slot.urls[0]
            .trim_end_matches('/')
            .rsplit(':')
            .next()
            .and_then(|p| p.parse::<u16>().ok())
        else {
            return;
        };
        let proxy = FaultProxy::start(port);
        let tag = format!("{}.n{}", self.spec.label, self.next_fork);
        self.next_fork += 1;
        let Ok(mine) = build_set(&tag, &[proxy.url()], &slot.prefix, &slot.recorder) else {
            return;
        };
        let mine = Arc::new(mine);
        let method = Method::TryForLease(WAIT, LEASE);
        self.acquire_with(Arc::clone(&mine), target.clone(), method, false, None);
        if self.held.len() == 1 {
            self.acquire_with(Arc::clone(&mine), target.clone(), method, true, None);
        }
        if self.held.len() == 2 {
            let arming = proxy.arming();
            let armed = arming.arm(Rule {
                matcher: release_matcher(&mine, &target),
                action: Action::LoseReplyAndPartition,
            });
            self.release(1, true, None);
            // The drop returns once its own attempts failed: the partition
            // began with the lost reply (if the rule fired at all).
            let fired = armed.wait_fired(Duration::from_secs(3));
            let began = Instant::now();
            if fired {
                let length = LATCH_TTL + partition;
                self.record(Event::Note {
                    text: format!(
                        "{}: lost the reply of the release of {} {} (one of two holds) {} {} \
                         for {} ms",
                        self.spec.label,
                        target.kind.as_str(),
                        target.joined(),
                        PARTITIONED,
                        mine.tag,
                        length.as_millis()
                    ),
                });
                // Healed whether or not the schedule stops meanwhile.
                thread::sleep(length.saturating_sub(began.elapsed()));
            }
            armed.disarm();
            arming.heal();
            if fired {
                // Another client's try, while `a` stands: a writer for a
                // reader's lock.
                let other = Target {
                    kind: if target.kind == Kind::Read {
                        Kind::Write
                    } else {
                        target.kind
                    },
                    names: target.names.clone(),
                };
                let set = slot.current();
                let intruder = self.helper(4, "pr", &set, &other, Method::TryFor(STAND));
                self.pause(STAND);
                if let Some(t) = intruder {
                    let _ = crate::joins::join_within(t, STAND + Duration::from_secs(3));
                }
            }
        }
        while !self.held.is_empty() {
            self.release(0, false, None);
        }
        self.spec.recorder.record(Event::ClientDown {
            client: mine.tag.clone(),
        });
        mine.shutdown();
        crate::remains::scan_after_shutdown(
            &mine,
            &[proxy.url()],
            &slot.prefix,
            &self.spec.recorder,
        );
    }
}
