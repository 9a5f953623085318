//! A multi-lock or RedLock member whose server stalls as its acquire is
//! sent: the fault proxy holds back that member's acquire request and its
//! retry (a stalled server runs both late), each past the response
//! timeout, so the call gives up on the member: a multi-lock fails, a
//! RedLock takes the majority on the two other servers. When the requests
//! run, the late acquire takes the member with the call's lease (longer
//! than the liveness bound); the library's undo, written behind each
//! request on its own connection, must give it straight back. While the
//! member is still stalled the same thread tries the lock again (its
//! acquire waits for the undos) and lets it go at once; once the requests
//! ran, the actor asks its own `hold_count()` of the stalled member (a
//! plain lock on the main server, the same key), and a thread of another
//! client takes it. A member left held with no guard shows in the count
//! (the rule "late member kept", flagged here; the hold count rule too
//! where no failed acquire excuses it) and starves that waiter for most
//! of the lease (the liveness rule); one taken from a guard would show as
//! two holders.
//!
//! In every other case only the first request is held back, and the call
//! (with a wait of up to 300 ms) ends with the locks: the pool's retry or
//! the wait's next try took the member while the first request still
//! waits. The actor releases at once, before that request runs: the
//! release must wait for the undo behind it, or the late request takes the
//! freed member and the undo (one hold above the guards) leaves it held.
//!
//! The stall is the proxy's, not the server's: only the member's requests
//! wait, so nothing else in the schedule is slowed down or excused.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::Actor;
use crate::fault_proxy::{Action, Matcher, Rule};
use crate::history::Event;
use crate::targets::{self, ClientSet, Kind, Method, Target};

/// The words of the case's note: the schedule's summary counts them.
pub(crate) const STALLED_MEMBER: &str = "stalled member";

/// The first flag word of a thread's count of a stalled member it holds
/// no guard of, asked once the member's late requests ran (the oracle's
/// rule of that name): the undo behind a late acquire did not give it back.
pub(crate) const LATE_MEMBER_KEPT: &str = "[late member kept]";

/// How long before its flag a case may have begun: a fault on the main
/// server since then excuses it (a killed connection takes the undo with
/// it, a documented limit; a stall runs it later still).
pub(crate) const CASE_SPAN: Duration = Duration::from_secs(6);

/// Set while a case runs in this process: one at a time. Two threads of
/// one client arm rules that match each other's requests, and one
/// thread's disarm can leave the other's retry unheld, which would make
/// the case's variants (every attempt held back, or the first only) no
/// longer its own to choose.
static RUNNING: AtomicBool = AtomicBool::new(false);

/// Clears [`RUNNING`] when the case ends, however it ends.
struct OneCase;

impl Drop for OneCase {
    fn drop(&mut self) {
        RUNNING.store(false, Ordering::SeqCst);
    }
}

/// About how long the case's two calls take before its wait begins (two
/// timed-out attempts, then a settle that may time out).
const CALLS: Duration = Duration::from_millis(2000);

/// Waited past the late requests' run before the other client tries: they
/// and the undos behind them have reached Redis by then.
const SETTLE: Duration = Duration::from_millis(250);

impl Actor {
    /// See the module doc: `target` is a multi-lock or a RedLock, `stalled`
    /// its member behind the main server's proxy; the requests of its
    /// acquire are held back `stall`; the call waits `wait` with `lease`.
    pub(super) fn stalled_member(
        &mut self,
        target: Target,
        stalled: &'static str,
        stall: Duration,
        wait: Duration,
        lease: Duration,
    ) {
        if !self.held.is_empty() {
            return;
        }
        // Only a case that can be judged before the schedule stops: one
        // cut short judges nothing and holds the wind-down up (the proxy
        // joins its held-back requests' threads).
        if Instant::now() + CALLS + stall + SETTLE >= self.spec.stops_at {
            return;
        }
        // Child processes have no proxy to arm.
        let Some(proxy) = self.spec.proxy.clone() else {
            return;
        };
        if RUNNING.swap(true, Ordering::SeqCst) {
            return;
        }
        let _one = OneCase;
        // With every attempt held back, the member's call ends with its
        // timed-out attempts: the call fails, or a RedLock has its majority
        // without it, and writes its undos behind them. With only the first
        // held back (every other case), the pool's retry or the wait's next
        // try takes the member while that attempt still waits to run: the
        // call ends with the locks, an undo behind the late attempt, and
        // the actor's release right after must wait for that undo.
        let set = self.spec.slot.current();
        // Between a restart's shutdown and its rebuild: nothing to stall.
        if set.clients[0].is_shut_down() {
            return;
        }
        // The member's acquire script on the main server, sent by this
        // client (its field starts with the client's id): the first attempt
        // and the pool's retry, each on its own connection.
        let matcher = Matcher::script(&set.full(stalled), &[&format!("{}:", set.clients[0].id())]);
        let held_back = if stall.as_millis() % 2 == 1 { 1 } else { 2 };
        let rules: Vec<_> = (0..held_back)
            .map(|_| {
                proxy.arm(Rule {
                    matcher: matcher.clone(),
                    action: Action::DelayRequest(stall),
                })
            })
            .collect();
        self.acquire_with(
            set.clone(),
            target.clone(),
            Method::TryForLease(wait, lease),
            false,
            None,
        );
        let returned = Instant::now();
        let fired: Vec<bool> = rules.into_iter().map(|armed| armed.disarm()).collect();
        let stalled_now = fired.iter().any(|f| *f);
        if stalled_now {
            self.record(Event::Note {
                text: format!(
                    "{}: {STALLED_MEMBER} {stalled} of {} {}: the fault proxy held back {} of its \
                     acquire's requests {} ms each",
                    self.spec.label,
                    target.kind.as_str(),
                    target.joined(),
                    fired.iter().filter(|f| **f).count(),
                    stall.as_millis()
                ),
            });
        }
        // Given up while the member's requests still wait: a RedLock's
        // release of the member it may have taken goes now, before them.
        if let Some(index) = self.held.iter().position(|h| h.target == target) {
            self.release(index, false, None);
        }
        // The same thread again, while they wait: this acquire of the member
        // waits for the undos (or fails like an outage), and lets go at once.
        self.acquire_with(
            set.clone(),
            target.clone(),
            Method::TryForLease(wait, lease),
            false,
            None,
        );
        if let Some(index) = self.held.iter().position(|h| h.target == target) {
            self.release(index, false, None);
        }
        if !stalled_now {
            return;
        }
        // Every held-back request fired before the call returned: all have
        // run by then.
        self.pause((returned + stall + SETTLE).saturating_duration_since(Instant::now()));
        // Not judged when the wait was cut short (the schedule stops) or the
        // client was shut down meanwhile (a restart by another thread).
        let current = self.spec.slot.current();
        if self.spec.stop.load(Ordering::SeqCst)
            || !Arc::ptr_eq(&current, &set)
            || set.clients[0].is_shut_down()
        {
            return;
        }
        // The thread holds nothing of it: Redis must count nothing for it
        // (asked before the other client's try, which would take the late
        // hold's place once it expired).
        self.count_stalled(&set, target.kind, stalled);
        let Some(other) = self.other_client("m") else {
            return;
        };
        let member = Target {
            kind: Kind::Plain,
            names: vec![stalled],
        };
        // Free now: a late hold left standing keeps it most of `lease`.
        let method = Method::TryFor(lease + Duration::from_secs(1));
        if let Some(t) = self.helper(4, "mw", &other, &member, method) {
            let _ = crate::joins::join_within(t, lease + Duration::from_secs(3));
        }
        self.end_other_client(&other);
    }

    /// `hold_count()` of the `stalled` member by this thread, recorded as a
    /// probe (the hold count rule) and flagged when above 0: the thread
    /// holds no guard of it, so any count is a late hold kept.
    fn count_stalled(&mut self, set: &Arc<ClientSet>, kind: Kind, stalled: &'static str) {
        self.record(Event::Probe {
            actor: self.spec.id,
        });
        let Ok(observed) = targets::hold_count(set, kind, stalled, false) else {
            return;
        };
        self.record(Event::Count {
            actor: self.spec.id,
            client: set.tag.clone(),
            kind,
            name: stalled.to_owned(),
            what: "hold_count".into(),
            observed,
        });
        if observed > 0 {
            self.record(Event::Flag {
                actor: self.spec.id,
                text: format!(
                    "{LATE_MEMBER_KEPT} hold_count() of {stalled} is {observed} after its late \
                     acquires ran, for a thread that holds no guard of it (client {})",
                    set.tag
                ),
            });
        }
    }
}
