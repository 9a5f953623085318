//! What the in-flight cases share (issue 39, "Safety IV": one ordered lane
//! per lock and holder). In each, a request of the thread's own on one
//! lock is held back by the fault proxy past the response timeout, so the
//! library cannot know whether or when it runs: a release (the guard's
//! drop goes on in the background, `release_in_flight.rs`) or an acquire
//! (the pool's retry takes the lock, an undo follows the late request,
//! `undo_in_flight.rs`). The same thread then goes on with the lock at
//! once: acquires, re-entries, `hold_count()`, the other guard's
//! `unlock()`, a shutdown, a fork. Each may wait for the request or fail
//! like an outage; none may let the late request act on a newer hold.
//!
//! The judge, once every held-back request has run (they and what
//! follows them on their connections reached Redis):
//!
//! - the thread's `hold_count()` must equal the guards it holds of the
//!   lock: more is a hold no guard stands for, which keeps the lock held
//!   until its TTL (the rule "left held"); fewer is a hold of a guard that
//!   a late request took away (the rule "hold taken away": another
//!   holder may come in under the guard);
//! - while a guard stands, a thread of another client tries the lock
//!   (the mutual exclusion rule judges it);
//! - once the thread released its guards, its `hold_count()` must be 0
//!   (the rule "left held").
//!
//! Where the actor's client sits behind the schedule's proxy (the test
//! process) the case uses it, so that the client's release worker serves
//! the other threads' requests too; in a child process (no proxy of the
//! schedule's to arm) the case builds a client of its own behind a proxy
//! of its own, chained to the schedule's, and may fork mid-path.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{build_set, Actor, Interrupter};
use crate::fault_proxy::{Arming, FaultProxy};
use crate::forks;
use crate::history::Event;
use crate::ops::Next;
use crate::targets::{self, ClientSet, Kind, Method, Target};

/// The first flag word of a thread's count above its guards once every
/// request an in-flight case held back has run (the oracle's rule "left
/// held"): a hold no guard stands for keeps the lock until its TTL.
pub(crate) const LEFT_HELD: &str = "[left held]";

/// The first flag word of a thread's count below its guards then (the
/// oracle's rule "hold taken away"): a late request released a newer
/// hold, under its guard.
pub(crate) const TAKEN_AWAY: &str = "[hold taken away]";

/// How long before its flag an in-flight case may have begun: a fault on
/// the main server since then excuses the flag (a killed connection takes
/// an undo with it, a documented limit; a stall or a restart moves
/// everything), and a force-unlock of the lock since then excuses a
/// count below the guards.
pub(crate) const IN_FLIGHT_SPAN: Duration = Duration::from_secs(10);

/// Waited past the last held-back request's run before the judge: the
/// server has run it and whatever followed it on its connection.
pub(super) const SETTLE: Duration = Duration::from_millis(300);

/// About how long the judge takes (two counts, another client's try, the
/// releases), for the case's bound: only a case that can be judged before
/// the schedule stops begins (one cut short judges nothing, and its
/// held-back requests hold the wind-down up).
pub(super) const JUDGE: Duration = Duration::from_millis(500);

/// How long a call of a case usually takes (a call that waits for a
/// request still on its way takes longer, and its case may then be cut
/// short), for the case's bound.
pub(super) const CALL: Duration = Duration::from_millis(1000);

/// How close to its end a lease makes a count not judged.
const LEASE_MARGIN: Duration = Duration::from_millis(500);

/// The pause between two tries of [`Next::TryLoop`].
const TRY_PAUSE: Duration = Duration::from_millis(25);

/// The client and proxy one in-flight case uses.
pub(super) struct Path {
    pub(super) set: Arc<ClientSet>,
    pub(super) arming: Arming,
    /// In a child process: the case's own proxy (its set is the case's own
    /// too, shut down when the case ends).
    own: Option<FaultProxy>,
}

impl Actor {
    /// The path of a case: the actor's client behind the schedule's proxy,
    /// or in a child process a client of its own behind a proxy of its own
    /// chained to the schedule's; `None` when neither can be had.
    pub(super) fn in_flight_path(&mut self) -> Option<Path> {
        if let Some(arming) = self.spec.proxy.clone() {
            let set = self.spec.slot.current();
            // Between a restart's shutdown and its rebuild.
            if set.clients[0].is_shut_down() {
                return None;
            }
            return Some(Path {
                set,
                arming,
                own: None,
            });
        }
        let slot = Arc::clone(&self.spec.slot);
        let port = slot.urls[0]
            .trim_end_matches('/')
            .rsplit(':')
            .next()
            .and_then(|p| p.parse::<u16>().ok())?;
        let proxy = FaultProxy::start(port);
        let tag = format!("{}.i{}", self.spec.label, self.next_fork);
        self.next_fork += 1;
        let set = build_set(&tag, &[proxy.url()], &slot.prefix, &slot.recorder).ok()?;
        Some(Path {
            set: Arc::new(set),
            arming: proxy.arming(),
            own: Some(proxy),
        })
    }

    /// Ends a case: releases what the thread still holds through the
    /// path's client and, for a client of the case's own, shuts it down
    /// and scans what it left (then its proxy stops, once every request it
    /// holds back ran).
    pub(super) fn end_path(&mut self, path: Path) {
        while let Some(index) = self
            .held
            .iter()
            .position(|h| Arc::ptr_eq(&h.set, &path.set))
        {
            self.release(index, false, None);
        }
        let Some(proxy) = path.own else { return };
        if path.set.shutdown_began.get().is_none() {
            self.shut_down_own(&path.set, &proxy);
        }
    }

    /// Shuts the case's client down while a request is on its way: the
    /// slot's (every thread of it gets a new one) or the case's own.
    pub(super) fn shut_down_mid_path(&mut self, path: &Path) {
        match &path.own {
            None => self.spec.slot.restart(&self.spec.recorder),
            Some(proxy) => self.shut_down_own(&path.set, proxy),
        }
    }

    fn shut_down_own(&self, set: &Arc<ClientSet>, proxy: &FaultProxy) {
        self.record(Event::ClientDown {
            client: set.tag.clone(),
        });
        set.shutdown();
        crate::remains::scan_after_shutdown(
            set,
            &[proxy.url()],
            &self.spec.slot.prefix,
            &self.spec.recorder,
        );
    }

    /// Whether the case may still be judged: the schedule goes on and the
    /// path's client is the one in use, not shut down.
    pub(super) fn path_alive(&self, path: &Path) -> bool {
        !self.spec.stop.load(Ordering::SeqCst)
            && path.set.shutdown_began.get().is_none()
            && !path.set.clients[0].is_shut_down()
            && (path.own.is_some() || Arc::ptr_eq(&self.spec.slot.current(), &path.set))
    }

    /// Sleeps until `at`, or until the schedule stops.
    pub(super) fn pause_until(&self, at: Instant) {
        self.pause(at.saturating_duration_since(Instant::now()));
    }

    /// One call of the thread's own on `target` while a request of it may
    /// still be on its way; a [`Next::TryLoop`] goes on until `until`.
    pub(super) fn next_call(&mut self, path: &Path, target: &Target, call: Next, until: Instant) {
        if !self.path_alive(path) {
            return;
        }
        match call {
            Next::Acquire(method) => {
                let reentrant = self.guards_of(path, target) > 0;
                self.acquire_with(
                    Arc::clone(&path.set),
                    target.clone(),
                    method,
                    reentrant,
                    None,
                );
            }
            Next::HoldCount => {
                self.count_of(path, target);
            }
            Next::UnlockOther => {
                if let Some(index) = self.held_index(path, target) {
                    self.release(index, false, None);
                }
            }
            Next::TryLoop => loop {
                let reentrant = self.guards_of(path, target) > 0;
                let before = self.held.len();
                self.acquire_with(
                    Arc::clone(&path.set),
                    target.clone(),
                    Method::TryLock,
                    reentrant,
                    None,
                );
                if self.held.len() > before {
                    // Given back at once: the lock is free again when the
                    // late request runs, unless the order holds.
                    let drop_it = self.rng.chance(50);
                    self.release(self.held.len() - 1, drop_it, None);
                }
                if Instant::now() + TRY_PAUSE >= until || !self.path_alive(path) {
                    break;
                }
                self.pause(TRY_PAUSE);
            },
        }
    }

    /// The first guard the thread holds of `target` through the path.
    fn held_index(&self, path: &Path, target: &Target) -> Option<usize> {
        self.held.iter().position(|h| {
            h.target == *target && Arc::ptr_eq(&h.set, &path.set) && h.guard.is_some()
        })
    }

    /// How many guards the thread holds of `target` through the path.
    fn guards_of(&self, path: &Path, target: &Target) -> u32 {
        let n = self
            .held
            .iter()
            .filter(|h| h.target == *target && Arc::ptr_eq(&h.set, &path.set) && h.guard.is_some())
            .count();
        u32::try_from(n).unwrap_or(u32::MAX)
    }

    /// `hold_count()` of `target` through the path, recorded as a probe
    /// (the oracle's hold count rule sees it too); `None` when it failed.
    fn count_of(&mut self, path: &Path, target: &Target) -> Option<u32> {
        self.record(Event::Probe {
            actor: self.spec.id,
        });
        let observed = targets::hold_count(&path.set, target.kind, target.names[0], false).ok()?;
        self.record(Event::Count {
            actor: self.spec.id,
            client: path.set.tag.clone(),
            kind: target.kind,
            name: target.names[0].to_owned(),
            what: "hold_count".into(),
            observed,
        });
        Some(observed)
    }

    /// The thread's count of `target` against its guards, flagged when
    /// they differ (`when`: at which point of the case).
    fn judge_count(&mut self, path: &Path, target: &Target, case: &str, when: &str) {
        let guards = self.guards_of(path, target);
        let Some(observed) = self.count_of(path, target) else {
            return;
        };
        let word = match observed.cmp(&guards) {
            std::cmp::Ordering::Equal => return,
            std::cmp::Ordering::Greater => LEFT_HELD,
            std::cmp::Ordering::Less => TAKEN_AWAY,
        };
        self.record(Event::Flag {
            actor: self.spec.id,
            text: format!(
                "{word} hold_count() of {} {} is {observed} {when} ({case}), for a thread \
                 whose guards of it stand for {guards} (client {})",
                target.kind.as_str(),
                target.names[0],
                path.set.tag
            ),
        });
    }

    /// The judge (see the module doc), once every held-back request of the
    /// case has run; `case` names it in the flags.
    pub(super) fn judge_in_flight(&mut self, path: &Path, target: &Target, case: &str) {
        if !self.path_alive(path) {
            return;
        }
        // A lease about to end makes the count's moment matter: not judged.
        let now = Instant::now();
        let lease_ends = self.held.iter().any(|h| {
            h.target == *target
                && Arc::ptr_eq(&h.set, &path.set)
                && h.lease.is_some_and(|l| now + LEASE_MARGIN >= h.called + l)
        });
        if !lease_ends {
            self.judge_count(path, target, case, "once every request held back had run");
        }
        if self.guards_of(path, target) > 0 {
            if let Some(other) = self.other_client("x") {
                // A writer for a reader's lock.
                let intruder = Target {
                    kind: if target.kind == Kind::Read {
                        Kind::Write
                    } else {
                        target.kind
                    },
                    names: target.names.clone(),
                };
                if let Some(t) = self.helper(4, "xi", &other, &intruder, Method::TryLock) {
                    let _ = crate::joins::join_within(t, Duration::from_secs(5));
                }
                self.end_other_client(&other);
            }
        }
        while let Some(index) = self.held_index(path, target) {
            self.release(index, false, None);
        }
        if self.path_alive(path) {
            self.judge_count(path, target, case, "after its last guard was released");
        }
    }

    /// `fork()` while a request of the case is on its way (child
    /// processes only): in the forked process an acquire and a
    /// `hold_count()` of `target` must fail with `ForkedProcess`, and the
    /// inherited guards are dropped (which must release nothing); flagged
    /// otherwise. The parent's case goes on and is judged.
    pub(super) fn fork_mid_path(&mut self, path: &Path, target: &Target) {
        if !self.spec.may_fork {
            return;
        }
        let set = Arc::clone(&path.set);
        let held = &mut self.held;
        let in_the_fork = move || -> Result<(), String> {
            let forked = |e: &redhold::Error| matches!(e, redhold::Error::ForkedProcess { .. });
            match targets::acquire(&set, target, Method::TryLock, &Interrupter::default()) {
                Err(e) if forked(&e) => {}
                other => {
                    return Err(format!(
                        "try_lock on {} {} with a request of the parent's on its way gave {}",
                        target.kind.as_str(),
                        target.joined(),
                        match other {
                            Ok(Some(_)) => "a guard".into(),
                            Ok(None) => "busy".into(),
                            Err(e) => targets::error_word(&e),
                        }
                    ))
                }
            }
            match targets::hold_count(&set, target.kind, target.names[0], false) {
                Err(e) if forked(&e) => {}
                other => {
                    return Err(format!(
                        "hold_count() of {} {} with a request of the parent's on its way gave \
                         {}",
                        target.kind.as_str(),
                        target.joined(),
                        match other {
                            Ok(n) => n.to_string(),
                            Err(e) => targets::error_word(&e),
                        }
                    ))
                }
            }
            // Its guards' drops must do nothing (the parent's go on).
            held.clear();
            Ok(())
        };
        if let Err(text) = forks::fork_and_wait(in_the_fork) {
            self.record(Event::Flag {
                actor: self.spec.id,
                text: format!(
                    "{} a forked process, with a request of its parent's on lock {} {} on its \
                     way: {text}",
                    forks::FORK,
                    target.kind.as_str(),
                    target.joined()
                ),
            });
        }
    }
}
