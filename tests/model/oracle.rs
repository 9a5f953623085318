//! The oracle: what must hold of every history, and the documented limits
//! that excuse a breach.
//!
//! | check | rule | excused by |
//! |---|---|---|
//! | two holders | valid intervals of different holders (a thread of a client; an owner, whichever of its threads or tasks took the hold) on one name never overlap (readers may share) | a server restart in either session (documented: no persistence); a hold that was reported lost under a stall |
//! | lost while healthy | a watched hold is never reported lost, a leased one never before its lease ran out | a stall (`DEBUG SLEEP` + [`FAULT_TAIL`](crate::config::FAULT_TAIL)), restart or force-unlock in its session; its client shut down. Killed connections excuse nothing: every command is retried at once |
//! | fencing | a token is larger than every token handed out before its acquire was called | a restart of the server in between (documented) |
//! | hold count | `hold_count()` / `is_held_by_current_thread()` match the held guards | leases close to their end, faults, force-unlocks, failed acquires or releases nearby |
//! | loss noticed | a watched guard learns of a restart or force-unlock within a watchdog timeout | re-acquiring in between (documented) |
//! | liveness | a waiter never waits more than [`LIVENESS_BOUND`] while the lock is free (counting every TTL a release may have left behind) | faults, force-unlocks; for fair locks also client shutdowns and failed waits (dead queue entries) |
//! | silent loss | a release that returned `Ok` had no other holder enter its lock while its guard lived (the hold was lost; `unlock()` must say `LockLost`) | its thread taking the lock again before a `Lock::unlock` that released it (a guard's release has no such excuse) |
//! | guard after shutdown | an acquire never returns a guard clearly after its client's `shutdown()` began (flagged by the actor, see `actors::after_shutdown`) | a stall of the main server around it (a script in flight) |
//! | left by shutdown | right after a client's `shutdown()` returned, every holder field of it in a lock hash belongs to a thread with a hold that may still be there: a guard alive at the shutdown, a leaked hold, a release with an unknown outcome, a phantom count, an acquire that failed with an error (`shutdown_rules.rs`, `remains.rs`) | a fault on that server around the shutdown |
//! | release after shutdown | a release (`unlock()`, `Lock::unlock`) sent after its client's `shutdown()` returned does not say `Ok` | none (red locks are left out) |
//! | unlock of a guarded lock | `Lock::unlock()` by a thread that holds the lock only through live guards answers `NotHeld` and leaves the hold (flagged by the actor, see `actors::UNLOCK_GUARDED`) | none |
//! | late member kept | once a multi-lock's or RedLock's member acquire that a stalled server ran late (after the call gave up on it) has run, the thread's `hold_count()` of that member is 0 when it holds no guard of it: the undo behind the late request gave it back (flagged by the actor, see `actors/stalled_member.rs`) | a fault on the main server around the case |
//! | left held | once every request an in-flight case held back has run (a release, or an acquire and the undo behind it), the thread's `hold_count()` of the lock is not above the guards it holds of it, and 0 once it released them: no hold is left that no guard stands for (flagged by the actor, see `actors/in_flight.rs`); likewise an owner's field in Redis once the owner rests (`owners/rest.rs`: its count against every guard of it, whichever thread or task holds them) | a fault on the main server around the case |
//! | hold taken away | then, the thread's `hold_count()` (an owner's field at rest) is not below its guards either: no late request took a newer hold (flagged likewise) | a fault on the main server around the case; a force-unlock of the lock |
//! | dropped future left | once an owner driven by tasks rests (no future in flight, every request held back run), a future of its dropped since the last rest left nothing: its owner's field counts no more than the owner's guards, no fair queue entry or read-hold key of it, no waiter of its client parked (flagged by the actor, see `owners/rest.rs`, `owners/tasks.rs`). An owner driven from threads is judged at rest by "left held" and "hold taken away" | a fault on the main server around the case; for a waiter still parked (leaving the line is the client's own business) only a stall or restart of the main server just before |
//! | fork | a forked process's calls fail with `ForkedProcess`, it exits cleanly, and dropping every handle of a client it inherited leaves the parent's pub/sub connection alone (no reconnect) | a fault around it (for the reconnect only) |
//!
//! Every breach becomes a [`Violation`]; every excused one is counted.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use crate::config::{FAIR_WAIT, LIVENESS_BOUND, RESPONSE_TIMEOUT, WATCHDOG};
use crate::history::{ActorId, HoldId};
use crate::model::{Hold, Model};
use crate::report;
use crate::targets::Kind;

/// What kind of promise a violation breaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Class {
    /// Two holders, a lost lock, a fencing token out of order.
    Safety,
    /// The library's answers disagree with the model.
    Model,
    /// A waiter kept waiting for a free lock.
    Liveness,
    /// A hang or a broken run.
    Robustness,
}

impl Class {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Class::Safety => "SAFETY",
            Class::Model => "MODEL",
            Class::Liveness => "LIVENESS",
            Class::Robustness => "ROBUSTNESS",
        }
    }
}

/// One broken rule, with what is needed to show it.
#[derive(Debug, Clone)]
pub(crate) struct Violation {
    pub(crate) class: Class,
    /// A short rule name, the same for every breach of the rule.
    pub(crate) rule: &'static str,
    /// One line.
    pub(crate) title: String,
    /// Further lines (the holds involved, likely causes).
    pub(crate) details: Vec<String>,
    /// When it happened (for the excerpt).
    pub(crate) at: Instant,
    /// What the excerpt should show.
    pub(crate) names: Vec<String>,
    pub(crate) actors: Vec<ActorId>,
    pub(crate) holds: Vec<HoldId>,
}

/// The oracle's findings on one history.
#[derive(Debug, Default)]
pub(crate) struct Verdict {
    pub(crate) violations: Vec<Violation>,
    /// Breaches a documented limit excuses: reason → count.
    pub(crate) excused: BTreeMap<String, u64>,
    /// Probes compared / skipped as ambiguous.
    pub(crate) probes_checked: u64,
    pub(crate) probes_skipped: u64,
}

impl Verdict {
    /// Counts one breach that `reason` excuses.
    pub(crate) fn excuse(&mut self, reason: impl Into<String>) {
        *self.excused.entry(reason.into()).or_default() += 1;
    }
}

/// Judges the model.
pub(crate) fn judge(m: &Model) -> Verdict {
    let mut v = Verdict::default();
    two_holders(m, &mut v);
    lost_while_healthy(m, &mut v);
    fencing(m, &mut v);
    hold_counts(m, &mut v);
    loss_noticed(m, &mut v);
    liveness(m, &mut v);
    silent_loss(m, &mut v);
    crate::shutdown_rules::left_by_shutdown(m, &mut v);
    crate::shutdown_rules::release_after_shutdown(m, &mut v);
    for (at, actor, text) in &m.flags {
        let (class, rule) = if text.starts_with(crate::actors::AFTER_SHUTDOWN) {
            // A script in flight under a stall may return after the
            // shutdown began; the hand-over path has no such excuse.
            let stalled = m
                .faults
                .iter()
                .any(|f| f.server == 0 && f.start < *at && f.end + RESPONSE_TIMEOUT * 2 > *at);
            if stalled {
                v.excuse("guard after shutdown: a stall of the main server around it");
                continue;
            }
            (Class::Safety, "guard after shutdown")
        } else if text.starts_with(crate::forks::FORK_PUBSUB) {
            // Killed connections and restarts reconnect pub/sub too.
            let faulted = m
                .faults
                .iter()
                .any(|f| f.start < *at && f.tail() + crate::forks::LIMIT > *at);
            if faulted {
                v.excuse("fork: a pub/sub reconnect with a fault around it");
                continue;
            }
            (Class::Robustness, "fork")
        } else if text.starts_with(crate::forks::FORK) {
            (Class::Robustness, "fork")
        } else if text.starts_with(crate::actors::UNLOCK_GUARDED) {
            (Class::Safety, "unlock of a guarded lock")
        } else if text.starts_with(crate::actors::LATE_MEMBER_KEPT) {
            // A killed connection takes the undo behind a late acquire with
            // it (documented: the late hold lasts its lease); a stall or a
            // restart moves everything.
            let faulted = m.faults.iter().any(|f| {
                f.server == 0 && f.start < *at && f.tail() + crate::actors::CASE_SPAN > *at
            });
            if faulted {
                v.excuse("late member kept: a fault on the main server around the case");
                continue;
            }
            (Class::Liveness, "late member kept")
        } else if text.starts_with(crate::owners::DROPPED_PARKED) {
            let stalled = m.faults.iter().any(|f| {
                f.server == 0
                    && f.may_lose_locks()
                    && f.start < *at
                    && f.tail() + crate::owners::REST_BOUND > *at
            });
            if stalled {
                v.excuse("dropped future parked: a stall or restart of the main server");
                continue;
            }
            (Class::Liveness, "dropped future left")
        } else if text.starts_with(crate::owners::DROPPED_LEFT) {
            match in_flight_excuse(m, *at, *actor, true) {
                Some(reason) => {
                    v.excuse(reason);
                    continue;
                }
                None => (Class::Liveness, "dropped future left"),
            }
        } else if let Some(left) = in_flight_flag(text) {
            match in_flight_excuse(m, *at, *actor, left) {
                Some(reason) => {
                    v.excuse(reason);
                    continue;
                }
                None if left => (Class::Liveness, "left held"),
                None => (Class::Safety, "hold taken away"),
            }
        } else {
            (Class::Model, "actor check")
        };
        v.violations.push(Violation {
            class,
            rule,
            title: format!("{}: {text}", m.label(*actor)),
            details: Vec::new(),
            at: *at,
            names: Vec::new(),
            actors: vec![*actor],
            holds: Vec::new(),
        });
    }
    v.violations.sort_by_key(|x| (x.at, x.class));
    v
}

/// Whether `text` is an in-flight case's flag (`actors/in_flight.rs`):
/// `Some(true)` for a count above the guards, `Some(false)` below.
fn in_flight_flag(text: &str) -> Option<bool> {
    if text.starts_with(crate::actors::LEFT_HELD) {
        Some(true)
    } else if text.starts_with(crate::actors::TAKEN_AWAY) {
        Some(false)
    } else {
        None
    }
}

/// What excuses an in-flight case's flag raised at `at` by `actor`: a
/// fault on the main server during the case (a killed connection takes
/// the undo behind a late acquire with it, a documented limit; a stall or
/// a restart moves everything), and, for a count below the guards
/// (`left` false), a force-unlock of the lock the flag's count was of.
fn in_flight_excuse(m: &Model, at: Instant, actor: ActorId, left: bool) -> Option<&'static str> {
    let span = crate::actors::IN_FLIGHT_SPAN;
    if m.faults
        .iter()
        .any(|f| f.server == 0 && f.start < at && f.tail() + span > at)
    {
        return Some("in flight: a fault on the main server around the case");
    }
    // The count the flag judged is the actor's last one before it.
    let count = m
        .probes
        .iter()
        .rev()
        .find(|p| p.actor == actor && p.at <= at);
    let forced = count.is_some_and(|p| {
        m.forces.iter().any(|f| {
            f.kind.family() == p.kind.family()
                && f.names.contains(&p.name)
                && f.start < at
                && f.end + span > at
        })
    });
    (!left && forced).then_some("in flight: a force-unlock of the lock during the case")
}

fn family_of_fault(kind: &str) -> &str {
    if kind.starts_with("sleep") {
        "sleep"
    } else {
        kind
    }
}

/// Two holders on one name at once. One violation per earlier hold and
/// name, listing every later hold that overlapped it.
fn two_holders(m: &Model, v: &mut Verdict) {
    let mut per_name: HashMap<&str, Vec<usize>> = HashMap::new();
    for (i, h) in m.holds.iter().enumerate() {
        if h.valid_end > h.enter {
            for name in &h.names {
                per_name.entry(name).or_default().push(i);
            }
        }
    }
    let mut names: Vec<_> = per_name.into_iter().collect();
    names.sort();
    for (name, mut list) in names {
        list.sort_by_key(|&i| m.holds[i].enter);
        let mut active: Vec<usize> = Vec::new();
        let mut overlapped: Vec<(usize, Vec<usize>)> = Vec::new();
        for &b in &list {
            let hb = &m.holds[b];
            active.retain(|&a| m.holds[a].valid_end > hb.enter);
            for &a in &active {
                let ha = &m.holds[a];
                if !ha.other_holder(hb) || !ha.mode().conflicts(hb.mode()) {
                    continue;
                }
                if let Some(reason) = overlap_excuse(ha, hb) {
                    v.excuse(reason);
                    continue;
                }
                match overlapped.iter_mut().find(|(x, _)| *x == a) {
                    Some((_, later)) => later.push(b),
                    None => overlapped.push((a, vec![b])),
                }
            }
            active.push(b);
        }
        for (a, later) in overlapped {
            let ha = &m.holds[a];
            let hb = &m.holds[later[0]];
            let until = ha.valid_end.min(hb.valid_end);
            let mut details = vec![
                format!("first:  {}", report::describe(m, ha)),
                format!("second: {}", report::describe(m, hb)),
            ];
            for &o in &later[1..] {
                let ho = &m.holds[o];
                details.push(format!(
                    "also overlapped by #{} ({}) from {}",
                    report::hold_id(ho.id),
                    m.label(ho.actor),
                    m.time(ho.enter)
                ));
            }
            for h in [ha, hb] {
                details.extend(report::patterns(m, h, hb.enter));
            }
            let mut actors = vec![ha.actor];
            actors.extend(later.iter().map(|&o| m.holds[o].actor));
            actors.dedup();
            v.violations.push(Violation {
                class: Class::Safety,
                rule: "two holders",
                title: format!(
                    "two holders on lock {name}: hold #{} ({} {}) and hold #{} ({} {}) were both \
                     valid for {:.1} ms from {}{}",
                    report::hold_id(ha.id),
                    m.label(ha.actor),
                    ha.kind.as_str(),
                    report::hold_id(hb.id),
                    m.label(hb.actor),
                    hb.kind.as_str(),
                    until.saturating_duration_since(hb.enter).as_secs_f64() * 1000.0,
                    m.time(hb.enter),
                    if later.len() > 1 {
                        format!(
                            " (and {} more holds overlapped #{})",
                            later.len() - 1,
                            report::hold_id(ha.id)
                        )
                    } else {
                        String::new()
                    }
                ),
                details,
                at: hb.enter,
                names: vec![name.to_owned()],
                actors,
                holds: std::iter::once(ha.id)
                    .chain(later.iter().map(|&o| m.holds[o].id))
                    .collect(),
            });
        }
    }
}

/// Why an overlap is allowed, if it is.
fn overlap_excuse(a: &Hold, b: &Hold) -> Option<String> {
    if a.restart.is_some() || b.restart.is_some() {
        return Some("overlap: a server restart wiped a held lock (documented limit)".into());
    }
    for h in [a, b] {
        if let (Some(_), Some((kind, _, _))) = (h.loss, &h.faulted) {
            return Some(format!(
                "overlap: one hold was lost under a {} fault and the loss was reported",
                family_of_fault(kind)
            ));
        }
    }
    None
}

/// A hold reported lost although nothing disturbed it.
fn lost_while_healthy(m: &Model, v: &mut Verdict) {
    for h in &m.holds {
        let Some((at, how)) = h.loss else { continue };
        // Up to the report: a release sent after the section ended finds
        // whatever happened to the lock in between.
        let servers = h.kind.servers();
        let restarted = h.restart.is_some()
            || m.faults.iter().any(|f| {
                f.kind == "restart"
                    && servers.contains(&f.server)
                    && f.start < at
                    && f.end > h.session_start
            });
        if restarted {
            v.excuse("loss: server restart (documented limit)");
            continue;
        }
        let forced = h.forced.is_some()
            || m.forces.iter().any(|f| {
                f.kind.family() == h.kind.family()
                    && f.names.iter().any(|n| h.names.contains(n))
                    && f.start < at
                    && f.end > h.session_start
            });
        if forced {
            v.excuse("loss: force_unlock");
            continue;
        }
        if let Some((kind, _, _)) = &h.faulted {
            v.excuse(format!(
                "loss of a {} hold under a {} fault",
                if h.lease.is_some() {
                    "leased"
                } else {
                    "watched"
                },
                family_of_fault(kind)
            ));
            continue;
        }
        if h.down.is_some_and(|d| d <= at) {
            v.excuse("loss: after its client was shut down");
            continue;
        }
        let rule = if h.lease.is_some() {
            "leased hold lost early"
        } else {
            "watched hold lost"
        };
        let mut details = vec![format!("hold: {}", report::describe(m, h))];
        details.extend(report::patterns(m, h, at));
        v.violations.push(Violation {
            class: Class::Safety,
            rule,
            title: format!(
                "{rule}: hold #{} ({}, {} {}) was reported lost at {} ({how}) with no fault, \
                 restart, force_unlock or shutdown in its session",
                report::hold_id(h.id),
                m.label(h.actor),
                h.kind.as_str(),
                h.names.join("+"),
                m.time(at)
            ),
            details,
            at,
            names: h.names.clone(),
            actors: vec![h.actor],
            holds: vec![h.id],
        });
    }
}

/// Fencing tokens grow with the order of acquires.
fn fencing(m: &Model, v: &mut Verdict) {
    let mut per_name: HashMap<&str, Vec<&Hold>> = HashMap::new();
    for h in m.holds.iter().filter(|h| h.kind == Kind::Fenced) {
        per_name.entry(&h.names[0]).or_default().push(h);
    }
    for (name, mut list) in per_name {
        list.sort_by_key(|h| h.enter);
        let mut reported = 0;
        for (i, b) in list.iter().enumerate() {
            let mut excused = false;
            for a in &list[..i] {
                if a.enter >= b.call || a.token < b.token {
                    continue;
                }
                let restarted = m.faults.iter().any(|f| {
                    f.kind == "restart" && f.server == 0 && f.start < b.enter && f.end > a.call
                });
                if restarted {
                    excused = true;
                    continue;
                }
                reported += 1;
                if reported > 3 {
                    continue;
                }
                v.violations.push(Violation {
                    class: Class::Safety,
                    rule: "fencing token",
                    title: format!(
                        "fencing token on fenced {name} did not grow: hold #{} got {} and hold \
                         #{}, called after it returned, got {}",
                        report::hold_id(a.id),
                        a.token,
                        report::hold_id(b.id),
                        b.token
                    ),
                    details: vec![
                        format!("earlier: {}", report::describe(m, a)),
                        format!("later:   {}", report::describe(m, b)),
                    ],
                    at: b.enter,
                    names: vec![name.to_owned()],
                    actors: vec![a.actor, b.actor],
                    holds: vec![a.id, b.id],
                });
            }
            if excused {
                v.excuse("fencing token reset by a server restart (documented limit)");
            }
        }
    }
}

/// Whether a release's outcome is known (so the hold is surely gone).
fn settled(h: &Hold) -> bool {
    matches!(h.result.as_str(), "ok" | "lost" | "not-held" | "dropped")
}

/// `hold_count()` and `is_held_by_current_thread()` against the model.
fn hold_counts(m: &Model, v: &mut Verdict) {
    let margin = Duration::from_millis(100);
    for p in &m.probes {
        let mode = p.kind.mode();
        let relevant: Vec<&Hold> = m
            .holds_of(p.actor)
            .filter(|h| h.client == p.client && h.mode() == mode && h.names.contains(&p.name))
            .filter(|h| h.enter <= p.start)
            .collect();
        let present: Vec<&&Hold> = relevant
            .iter()
            .filter(|h| h.exit.is_none_or(|e| e > p.at))
            .collect();
        let since = present
            .iter()
            .map(|h| h.session_start)
            .min()
            .unwrap_or(p.start)
            .min(p.start)
            .checked_sub(WATCHDOG + Duration::from_secs(1))
            .unwrap_or(m.t0);
        let ambiguous = present.iter().any(|h| {
            h.restart.is_some()
                || h.faulted.is_some()
                || h.forced.is_some()
                || h.loss.is_some_and(|(t, _)| t <= p.at)
                || h.deadline().is_some_and(|d| d <= p.at + margin)
        }) || relevant.iter().any(|h| {
            h.exit.is_some_and(|e| e <= p.at)
                && (!settled(h) || h.released.is_none_or(|r| r > p.start))
                && h.lingers_until(m.end) > since
        }) || m
            .faults
            .iter()
            .any(|f| f.server == 0 && f.start < p.at && f.tail() + WATCHDOG > since)
            || m.failed.iter().any(|(at, actor, client, names)| {
                *actor == p.actor
                    && *client == p.client
                    && names.contains(&p.name)
                    && *at > since
                    && *at <= p.at
            })
            || m.forces.iter().any(|f| {
                f.kind.family() == p.kind.family()
                    && f.names.contains(&p.name)
                    && f.end > since
                    && f.start < p.at
            });
        // A leased hold released only after its lease ran out: a correct
        // library may refuse that release (leaving a phantom count that the
        // session's other holds keep renewing), so the count may be higher
        // than the guards say; it may never be lower (that release took
        // another hold).
        let phantom = m.sessions.get(&p.name).into_iter().flatten().any(|s| {
            s.actor == p.actor
                && s.client == p.client
                && s.mode == mode
                && s.start <= p.at
                && s.busy_until >= p.start
                && s.phantom_since.is_some_and(|t| t <= p.at)
        });
        let expected = present.len() as u32;
        let higher = if p.what == "hold_count" {
            p.observed > expected
        } else {
            p.observed > 0 && expected == 0
        };
        if ambiguous || (phantom && higher) {
            v.probes_skipped += 1;
            continue;
        }
        v.probes_checked += 1;
        let (expected_shown, matches) = if p.what == "hold_count" {
            (expected, p.observed == expected)
        } else {
            (
                u32::from(expected > 0),
                p.observed == u32::from(expected > 0),
            )
        };
        if matches {
            continue;
        }
        let mut details: Vec<String> = present
            .iter()
            .map(|h| format!("held: {}", report::describe(m, h)))
            .collect();
        for h in &present {
            details.extend(report::patterns(m, h, p.at));
        }
        v.violations.push(Violation {
            class: Class::Model,
            rule: "hold count",
            title: format!(
                "{} asked {}() of {} {} at {} and got {}; its held guards say {}",
                m.label(p.actor),
                p.what,
                p.kind.as_str(),
                p.name,
                m.time(p.at),
                p.observed,
                expected_shown
            ),
            details,
            at: p.at,
            names: vec![p.name.clone()],
            actors: vec![p.actor],
            holds: present.iter().map(|h| h.id).collect(),
        });
    }
}

/// A watched guard must learn that its lock was wiped (restart) or
/// force-unlocked within about one watchdog timeout.
fn loss_noticed(m: &Model, v: &mut Verdict) {
    let grace = WATCHDOG + Duration::from_millis(800);
    for h in &m.holds {
        let (Some(exit), Some(true)) = (h.exit, h.held_at_exit) else {
            continue;
        };
        if h.down.is_some_and(|d| d + grace <= exit) && h.lease.is_none() {
            // After `Client::shutdown` nothing renews or checks the hold:
            // the guard keeps believing. Counted, not judged (see the
            // report: the documentation only says the lock expires).
            v.excuse("is_held() still true over a watchdog timeout after Client::shutdown");
            continue;
        }
        if h.lease.is_some() || h.kind == Kind::Red || h.down.is_some_and(|d| d <= exit) {
            continue;
        }
        let restarts = m
            .faults
            .iter()
            .filter(|f| f.kind == "restart" && f.server == 0 && f.start > h.enter && f.end < exit)
            .map(|f| (f.end, "a restart of its server"));
        let forces = m
            .forces
            .iter()
            .filter(|f| {
                // A force that deleted nothing (the other side of a
                // read-write lock, say) took nothing to notice.
                f.deleted
                    && f.kind.family() == h.kind.family()
                    && f.names.iter().any(|n| h.names.contains(n))
                    && f.start > h.enter
                    && f.end < exit
            })
            .map(|f| (f.end, "force_unlock"));
        let Some((gone, what)) = restarts.chain(forces).min_by_key(|(t, _)| *t) else {
            continue;
        };
        if exit < gone + grace {
            continue;
        }
        // Taking the lock again shares the hold count (documented), and
        // other faults may delay the watchdog's round trip.
        let retaken = m.holds_of(h.actor).any(|o| {
            o.client == h.client
                && o.names.iter().any(|n| h.names.contains(n))
                && o.call >= gone.checked_sub(Duration::from_secs(1)).unwrap_or(gone)
                && o.call <= exit
        });
        let disturbed = m
            .faults
            .iter()
            .any(|f| f.server == 0 && f.end > gone && f.start < exit && f.kind != "restart");
        if retaken || disturbed {
            v.excuse("loss not yet noticed: re-acquired or further faults");
            continue;
        }
        v.violations.push(Violation {
            class: Class::Model,
            rule: "loss not noticed",
            title: format!(
                "hold #{} ({}) still had is_held() == true at its exit {} ms after {what} \
                 removed its lock at {}",
                report::hold_id(h.id),
                m.label(h.actor),
                (exit - gone).as_millis(),
                m.time(gone)
            ),
            details: vec![format!("hold: {}", report::describe(m, h))],
            at: exit,
            names: h.names.clone(),
            actors: vec![h.actor],
            holds: vec![h.id],
        });
    }
}

/// A release that returned `Ok` although another holder entered the lock
/// while the guard lived: the hold was lost on the way and the release
/// said nothing (`unlock()` must answer `LockLost`). The other hold's
/// acquire returned before this hold's section ended, and the release was
/// sent only after that, so the release cannot have been what freed the
/// lock for it.
fn silent_loss(m: &Model, v: &mut Verdict) {
    for h in &m.holds {
        if h.result != "ok" || !h.kind.single() {
            continue;
        }
        let (Some(exit), Some(released)) = (h.exit, h.released) else {
            continue;
        };
        let name = &h.names[0];
        let Some(other) = m
            .holds
            .iter()
            .filter(|o| o.other_holder(h) && o.mode().conflicts(h.mode()))
            .filter(|o| o.names.contains(name) && o.valid_end > o.enter)
            .filter(|o| o.enter > h.enter && o.enter < exit)
            // Overlapping valid intervals are two holders, reported as such.
            .filter(|o| o.enter >= h.valid_end)
            .min_by_key(|o| o.enter)
        else {
            continue;
        };
        // The thread took the lock again after the other holder came, and
        // the release is `Lock::unlock`'s, which releases *a* hold of the
        // thread: its field is in the hash once more. A guard's release
        // has no such excuse: a lost hold's guard is stale once the thread
        // takes the lock anew (a re-entry never takes it anew in the lost
        // holds' name).
        let by_lock_unlock = h.exit_how.starts_with("Lock::unlock");
        let retaken = by_lock_unlock
            && m.holds_of(h.actor).any(|o| {
                o.id != h.id
                    && o.client == h.client
                    && o.names.contains(name)
                    && o.mode() == h.mode()
                    && o.enter > other.enter
                    && o.enter < released
            });
        if retaken {
            v.excuse("silent loss: the thread took the lock again before the release");
            continue;
        }
        let mut details = vec![
            format!("released: {}", report::describe(m, h)),
            format!("entered:  {}", report::describe(m, other)),
        ];
        details.extend(report::patterns(m, h, exit));
        v.violations.push(Violation {
            class: Class::Safety,
            rule: "silent loss",
            title: format!(
                "silent loss on {} {name}: the release of hold #{} ({}) returned Ok at {} \
                 although hold #{} ({}) entered the lock at {}, while #{}'s guard lived",
                h.kind.as_str(),
                report::hold_id(h.id),
                m.label(h.actor),
                m.time(released),
                report::hold_id(other.id),
                m.label(other.actor),
                m.time(other.enter),
                report::hold_id(h.id)
            ),
            details,
            at: released,
            names: vec![name.clone()],
            actors: vec![h.actor, other.actor],
            holds: vec![h.id, other.id],
        });
    }
}

/// A waiter must get a free lock within the bound.
fn liveness(m: &Model, v: &mut Verdict) {
    for w in &m.waits {
        if !w.kind.single() || w.end.saturating_duration_since(w.start) <= LIVENESS_BOUND {
            continue;
        }
        let name = &w.names[0];
        let mode = w.kind.mode();
        let mut busy: Vec<(Instant, Instant)> = m
            .sessions
            .get(name)
            .into_iter()
            .flatten()
            .filter(|s| (s.actor != w.actor || s.client != w.client) && s.mode.conflicts(mode))
            .filter(|s| s.start < w.end && s.busy_until > w.start)
            .map(|s| (s.start.max(w.start), s.busy_until.min(w.end)))
            .collect();
        busy.sort();
        let mut gaps = Vec::new();
        let mut cursor = w.start;
        for (s, e) in busy {
            if s > cursor {
                gaps.push((cursor, s));
            }
            cursor = cursor.max(e);
        }
        if w.end > cursor {
            gaps.push((cursor, w.end));
        }
        let tail = Model::fair_tail(w.kind);
        for (a, b) in gaps {
            if b - a <= LIVENESS_BOUND {
                continue;
            }
            let faulted = m
                .faults
                .iter()
                .any(|f| f.server == 0 && f.start < b && f.tail() + tail > a);
            let forced = m.forces.iter().any(|f| {
                f.kind.family() == w.kind.family()
                    && f.names.contains(name)
                    && f.start < b
                    && f.end + WATCHDOG + tail > a
            });
            let dead_waiter = w.kind == Kind::Fair
                && (m
                    .downs
                    .values()
                    .any(|d| *d < b && *d + WATCHDOG + FAIR_WAIT + tail > a)
                    || m.failed.iter().any(|(at, _, _, names)| {
                        names.contains(name) && *at < b && *at + tail > a
                    }));
            if faulted || forced || dead_waiter {
                v.excuse(format!(
                    "liveness: a waiter on a free {} lock, after a {}",
                    w.kind.as_str(),
                    if faulted {
                        "fault"
                    } else if forced {
                        "force_unlock"
                    } else {
                        "client shutdown or failed wait (dead fair waiter)"
                    }
                ));
                continue;
            }
            v.violations.push(Violation {
                class: Class::Liveness,
                rule: "waiter starved",
                title: format!(
                    "{} waited in {} on {} {name} from {} to {} ({}); the lock was free from \
                     {} to {} ({} ms, bound {} ms)",
                    m.label(w.actor),
                    w.method,
                    w.kind.as_str(),
                    m.time(w.start),
                    m.time(w.end),
                    w.outcome,
                    m.time(a),
                    m.time(b),
                    (b - a).as_millis(),
                    LIVENESS_BOUND.as_millis()
                ),
                details: vec![format!(
                    "free means: no other holder's session (acquire call to release, plus the \
                     TTL when a release's outcome is unknown) on {name} in a conflicting mode"
                )],
                at: a + LIVENESS_BOUND,
                names: vec![name.clone()],
                actors: vec![w.actor],
                holds: Vec::new(),
            });
            break;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::{Event, Stamped};

    /// Builds a history from `(ms since start, event)` pairs.
    struct Script {
        t0: Instant,
        events: Vec<Stamped>,
        next_op: u64,
    }

    impl Script {
        fn new() -> Script {
            Script {
                t0: Instant::now(),
                events: Vec::new(),
                next_op: 0,
            }
        }

        fn at(&mut self, ms: u64, event: Event) -> &mut Script {
            self.events.push(Stamped {
                at: self.t0 + Duration::from_millis(ms),
                event,
            });
            self
        }

        /// A hold by `actor` on `kind names` from `call` to `exit` (then
        /// released with `result`); returns its id.
        #[allow(clippy::too_many_arguments)]
        fn hold(
            &mut self,
            actor: ActorId,
            kind: Kind,
            names: &str,
            lease_ms: u64,
            call: u64,
            exit: u64,
            result: &str,
            token: u64,
        ) -> HoldId {
            self.next_op += 1;
            let op = self.next_op;
            let hold = (u64::from(actor) << 32) | op;
            self.at(
                call,
                Event::Call {
                    actor,
                    op,
                    client: format!("c{actor}#0"),
                    kind,
                    names: names.into(),
                    method: "lock()".into(),
                    lease_ms,
                    wait_ms: -1,
                    reentrant: false,
                },
            )
            .at(
                call,
                Event::Enter {
                    actor,
                    op,
                    hold,
                    token,
                },
            )
            .at(
                exit,
                Event::Exit {
                    actor,
                    hold,
                    how: "unlock".into(),
                    held: true,
                },
            )
            .at(
                exit,
                Event::Released {
                    actor,
                    hold,
                    result: result.into(),
                },
            );
            hold
        }

        fn judge(&mut self) -> Verdict {
            self.events.sort_by_key(|e| e.at);
            let model = Model::build(&self.events, self.t0, "x");
            judge(&model)
        }
    }

    fn rules(v: &Verdict) -> Vec<&'static str> {
        v.violations.iter().map(|x| x.rule).collect()
    }

    #[test]
    fn overlapping_holders_are_caught_and_sequential_ones_pass() {
        let mut s = Script::new();
        s.hold(1, Kind::Plain, "p0", 0, 0, 100, "ok", 0);
        s.hold(2, Kind::Plain, "p0", 0, 100, 200, "ok", 0);
        assert!(s.judge().violations.is_empty());
        s.hold(3, Kind::Plain, "p0", 0, 150, 250, "ok", 0);
        assert_eq!(rules(&s.judge()), ["two holders"]);
    }

    #[test]
    fn a_lease_ends_the_hold_and_a_restart_excuses_an_overlap() {
        let mut s = Script::new();
        // Lease of 100 ms counted from the call: over before the other comes.
        s.hold(1, Kind::Plain, "p0", 100, 0, 300, "lost", 0);
        s.hold(2, Kind::Plain, "p0", 0, 120, 200, "ok", 0);
        assert!(s.judge().violations.is_empty());

        let mut s = Script::new();
        s.hold(1, Kind::Plain, "p0", 0, 0, 300, "lost", 0);
        s.hold(2, Kind::Plain, "p0", 0, 120, 200, "ok", 0);
        s.at(
            50,
            Event::FaultStart {
                server: 0,
                kind: "restart".into(),
            },
        )
        .at(
            80,
            Event::FaultEnd {
                server: 0,
                kind: "restart".into(),
            },
        );
        let verdict = s.judge();
        assert!(verdict.violations.is_empty(), "{:?}", rules(&verdict));
        assert!(!verdict.excused.is_empty());
    }

    #[test]
    fn readers_share_and_writers_do_not() {
        let mut s = Script::new();
        s.hold(1, Kind::Read, "w0", 0, 0, 100, "ok", 0);
        s.hold(2, Kind::Read, "w0", 0, 50, 150, "ok", 0);
        assert!(s.judge().violations.is_empty());
        s.hold(3, Kind::Write, "w0", 0, 120, 200, "ok", 0);
        assert_eq!(rules(&s.judge()), ["two holders"]);
    }

    #[test]
    fn a_watched_loss_needs_a_cause() {
        let mut s = Script::new();
        s.hold(1, Kind::Plain, "p0", 0, 0, 500, "lost", 0);
        assert_eq!(rules(&s.judge()), ["watched hold lost"]);
        s.at(
            100,
            Event::FaultStart {
                server: 0,
                kind: "sleep-300ms".into(),
            },
        )
        .at(
            400,
            Event::FaultEnd {
                server: 0,
                kind: "sleep-300ms".into(),
            },
        );
        assert!(s.judge().violations.is_empty());
    }

    #[test]
    fn a_release_of_a_lost_hold_must_not_say_ok() {
        // Lease of 100 ms, kept until 300 ms; another holder came at 150.
        let mut s = Script::new();
        s.hold(1, Kind::Plain, "p0", 100, 0, 300, "lost", 0);
        s.hold(2, Kind::Plain, "p0", 0, 150, 200, "ok", 0);
        assert!(s.judge().violations.is_empty());
        let mut s = Script::new();
        s.hold(1, Kind::Plain, "p0", 100, 0, 300, "ok", 0);
        s.hold(2, Kind::Plain, "p0", 0, 150, 200, "ok", 0);
        assert_eq!(rules(&s.judge()), ["silent loss"]);
        // `p0` and `{p0}` share a channel, not a key.
        let mut s = Script::new();
        s.hold(1, Kind::Plain, "p0", 100, 0, 300, "ok", 0);
        s.hold(2, Kind::Plain, "{p0}", 0, 150, 200, "ok", 0);
        assert!(s.judge().violations.is_empty());
    }

    #[test]
    fn fencing_tokens_must_grow() {
        let mut s = Script::new();
        s.hold(1, Kind::Fenced, "t0", 0, 0, 100, "ok", 5);
        s.hold(2, Kind::Fenced, "t0", 0, 100, 200, "ok", 4);
        assert_eq!(rules(&s.judge()), ["fencing token"]);
    }

    #[test]
    fn hold_counts_are_compared_unless_a_lease_is_about_to_end() {
        let probe = |s: &mut Script, at: u64, observed: u32| {
            s.at(at, Event::Probe { actor: 1 }).at(
                at,
                Event::Count {
                    actor: 1,
                    client: "c1#0".into(),
                    kind: Kind::Plain,
                    name: "p0".into(),
                    what: "hold_count".into(),
                    observed,
                },
            );
        };
        let mut s = Script::new();
        s.hold(1, Kind::Plain, "p0", 0, 0, 1000, "ok", 0);
        probe(&mut s, 500, 1);
        assert!(s.judge().violations.is_empty());
        probe(&mut s, 600, 0);
        assert_eq!(rules(&s.judge()), ["hold count"]);

        let mut s = Script::new();
        s.hold(1, Kind::Plain, "p0", 650, 0, 1000, "lost", 0);
        probe(&mut s, 600, 0);
        assert!(s.judge().violations.is_empty());
    }

    #[test]
    fn a_waiter_must_get_a_free_lock() {
        let mut s = Script::new();
        s.hold(1, Kind::Plain, "p0", 0, 0, 100, "ok", 0);
        s.at(
            50,
            Event::Call {
                actor: 2,
                op: 99,
                client: "c2#0".into(),
                kind: Kind::Plain,
                names: "p0".into(),
                method: "lock()".into(),
                lease_ms: 0,
                wait_ms: -1,
                reentrant: false,
            },
        );
        s.at(
            5000,
            Event::Enter {
                actor: 2,
                op: 99,
                hold: (2 << 32) | 99,
                token: 0,
            },
        );
        assert_eq!(rules(&s.judge()), ["waiter starved"]);
    }

    #[test]
    fn a_late_member_kept_is_reported_unless_a_main_server_fault_was_near() {
        let flag = |s: &mut Script, ms: u64| {
            s.at(
                ms,
                Event::Flag {
                    actor: 1,
                    text: format!(
                        "{} hold_count() of m0 is 1",
                        crate::actors::LATE_MEMBER_KEPT
                    ),
                },
            );
        };
        let fault = |s: &mut Script, server: u8, start: u64, end: u64| {
            s.at(
                start,
                Event::FaultStart {
                    server,
                    kind: "kill-normal".into(),
                },
            )
            .at(
                end,
                Event::FaultEnd {
                    server,
                    kind: "kill-normal".into(),
                },
            );
        };
        let mut s = Script::new();
        flag(&mut s, 9000);
        assert_eq!(rules(&s.judge()), ["late member kept"]);
        // A fault on another server, or long before the case: no excuse.
        let mut s = Script::new();
        fault(&mut s, 1, 8000, 8100);
        fault(&mut s, 0, 100, 200);
        flag(&mut s, 9000);
        assert_eq!(rules(&s.judge()), ["late member kept"]);
        // A killed connection on the main server during the case.
        let mut s = Script::new();
        fault(&mut s, 0, 7000, 7100);
        flag(&mut s, 9000);
        assert!(s.judge().violations.is_empty());
    }

    #[test]
    fn an_owner_is_one_holder_whichever_thread_records_its_holds() {
        // The owner's holds from two of its threads overlap: one holder.
        let mut s = Script::new();
        s.hold(7, Kind::Plain, "p0", 0, 0, 300, "dropped", 0);
        s.hold(7, Kind::Plain, "p0", 0, 100, 200, "ok", 0);
        assert!(s.judge().violations.is_empty());
        // A thread of the same client is another holder.
        s.hold(3, Kind::Plain, "p0", 0, 220, 280, "ok", 0);
        assert_eq!(rules(&s.judge()), ["two holders"]);
    }

    #[test]
    fn a_dropped_future_that_left_something_is_reported_unless_a_fault_was_near() {
        let flag = |s: &mut Script, ms: u64| {
            s.at(
                ms,
                Event::Flag {
                    actor: 2000,
                    text: format!(
                        "{} the owner's field in plain p1 counts 1 hold(s)",
                        crate::owners::DROPPED_LEFT
                    ),
                },
            );
        };
        let mut s = Script::new();
        flag(&mut s, 9000);
        assert_eq!(rules(&s.judge()), ["dropped future left"]);
        // A waiter left parked: a killed connection excuses nothing.
        let parked = |s: &mut Script, ms: u64| {
            s.at(
                ms,
                Event::Flag {
                    actor: 2000,
                    text: format!("{} 1 waiter(s) still parked", crate::owners::DROPPED_PARKED),
                },
            );
        };
        let mut s = Script::new();
        s.at(
            8000,
            Event::FaultStart {
                server: 0,
                kind: "kill-normal".into(),
            },
        )
        .at(
            8100,
            Event::FaultEnd {
                server: 0,
                kind: "kill-normal".into(),
            },
        );
        parked(&mut s, 9000);
        assert_eq!(rules(&s.judge()), ["dropped future left"]);
        let mut s = Script::new();
        s.at(
            6000,
            Event::FaultStart {
                server: 0,
                kind: "kill-normal".into(),
            },
        )
        .at(
            6100,
            Event::FaultEnd {
                server: 0,
                kind: "kill-normal".into(),
            },
        );
        flag(&mut s, 9000);
        assert!(s.judge().violations.is_empty());
    }

    #[test]
    fn an_in_flight_count_off_the_guards_is_reported_unless_excused() {
        let count = |s: &mut Script, ms: u64, word: &str| {
            s.at(ms, Event::Probe { actor: 1 })
                .at(
                    ms,
                    Event::Count {
                        actor: 1,
                        client: "c1#0".into(),
                        kind: Kind::Plain,
                        name: "l0".into(),
                        what: "hold_count".into(),
                        // As the guards say: only the flag is judged here.
                        observed: 0,
                    },
                )
                .at(
                    ms,
                    Event::Flag {
                        actor: 1,
                        text: format!("{word} hold_count() of plain l0 is 0"),
                    },
                );
        };
        let force = |s: &mut Script, name: &str, ms: u64| {
            s.at(
                ms,
                Event::ForceStart {
                    actor: 2,
                    kind: Kind::Plain,
                    names: name.into(),
                },
            )
            .at(
                ms + 5,
                Event::ForceEnd {
                    actor: 2,
                    result: "true".into(),
                },
            );
        };
        let mut s = Script::new();
        count(&mut s, 9000, crate::actors::LEFT_HELD);
        assert_eq!(rules(&s.judge()), ["left held"]);
        let mut s = Script::new();
        count(&mut s, 9000, crate::actors::TAKEN_AWAY);
        assert_eq!(rules(&s.judge()), ["hold taken away"]);
        // A force-unlock of another lock excuses nothing; of this one, a
        // count below the guards only.
        let mut s = Script::new();
        force(&mut s, "l1", 8000);
        count(&mut s, 9000, crate::actors::TAKEN_AWAY);
        assert_eq!(rules(&s.judge()), ["hold taken away"]);
        let mut s = Script::new();
        force(&mut s, "l0", 8000);
        count(&mut s, 9000, crate::actors::TAKEN_AWAY);
        assert!(s.judge().violations.is_empty());
        let mut s = Script::new();
        force(&mut s, "l0", 8000);
        count(&mut s, 9000, crate::actors::LEFT_HELD);
        assert_eq!(rules(&s.judge()), ["left held"]);
        // A fault on the main server during the case excuses both.
        let mut s = Script::new();
        s.at(
            5000,
            Event::FaultStart {
                server: 0,
                kind: "sleep-300ms".into(),
            },
        )
        .at(
            5300,
            Event::FaultEnd {
                server: 0,
                kind: "sleep-300ms".into(),
            },
        );
        count(&mut s, 9000, crate::actors::LEFT_HELD);
        assert!(s.judge().violations.is_empty());
    }

    #[test]
    fn a_leased_readers_field_kept_by_other_readers_is_not_left_by_shutdown() {
        // Actor 1's leased read hold outlives its client's shutdown (its
        // drop sends nothing), and its lease ends long before the scan; its
        // field stays in the hash only if another reader keeps the hash.
        let scenario = |other_reader: bool| {
            let mut s = Script::new();
            s.at(
                0,
                Event::Actor {
                    actor: 1,
                    label: "c1#0.t0".into(),
                },
            )
            .at(0, Event::Tid { actor: 1, tid: 7 });
            s.hold(1, Kind::Read, "w0", 300, 0, 500, "dropped", 0);
            if other_reader {
                s.hold(2, Kind::Read, "w0", 0, 100, 9000, "ok", 0);
            }
            s.at(
                400,
                Event::ClientDown {
                    client: "c1#0".into(),
                },
            )
            .at(
                3000,
                Event::ClientGone {
                    client: "c1#0".into(),
                },
            )
            .at(
                3000,
                Event::Remains {
                    client: "c1#0".into(),
                    server: 0,
                    name: "w0".into(),
                    tids: "7".into(),
                },
            );
            s.judge()
        };
        assert_eq!(rules(&scenario(true)), Vec::<&str>::new());
        assert_eq!(rules(&scenario(false)), ["left by shutdown"]);
    }
}
