//! The oracle's rules about what a client's shutdown leaves: every holder
//! field a scan right after `shutdown()` returned finds (see `remains.rs`)
//! belongs to a hold whose loss the user can still learn of, and every
//! release sent after the shutdown returned reports an error.

use std::collections::BTreeSet;
use std::time::Duration;

use crate::config::FAULT_TAIL;
use crate::history::ActorId;
use crate::model::{process_of, Model, Remain, Session};
use crate::oracle::{Class, Verdict, Violation};
use crate::report;
use crate::targets::{Kind, Mode};

/// How long before a scan a failed acquire may have left a hold it took in
/// Redis (the longest lease an actor asks for, with slack).
const FAILED_ACQUIRE_TAIL: Duration = Duration::from_secs(7);

/// Whether `actor` of client set `client` may legitimately have a field in
/// lock `name` at `r`'s scan: a session of its there still lingers (a
/// guard alive at the shutdown, a leaked hold, a release whose outcome is
/// unknown, a phantom count; see `Model::build_sessions`) with a hold taken
/// before the shutdown began (not a guard returned after it), one of its
/// acquires there failed with an error shortly before (the hold may exist
/// in Redis all the same), or a multi-lock or red-lock acquire of its ran
/// across the shutdown's start: the parts it had taken were guards alive
/// at the shutdown, which the composite could no longer give back (red
/// locks also span clients that shut down one after the other).
fn accounted(m: &Model, actor: ActorId, r: &Remain) -> bool {
    let down = m.downs.get(&r.client).copied().unwrap_or(r.scan);
    let composite = m
        .composite_calls
        .iter()
        .any(|(a, client, names, call, end)| {
            *a == actor
                && *client == r.client
                && names.contains(&r.name)
                && *call < r.scan
                && *end >= down
        });
    if composite {
        return true;
    }
    // A guard that came out clearly after the shutdown began was not alive
    // at the shutdown: it accounts for nothing (its hold is the trace).
    let alive_at_shutdown = down + crate::actors::AFTER_SHUTDOWN_MARGIN;
    let sessions = || m.sessions.get(&r.name).into_iter().flatten();
    // A reader's field outlives its hold while other read holds keep the
    // hash (docs/lock-kinds.md: a dead reader's field stays until the hash
    // expires or the last live reader leaves; it no longer counts).
    let kept_by_readers = |s: &Session| {
        s.mode == Mode::Read
            && sessions().any(|o| {
                o.mode == Mode::Read
                    && (o.actor != s.actor || o.client != s.client)
                    && o.start < s.busy_until
                    && o.busy_until > r.scan
            })
    };
    let lingers = sessions().any(|s| {
        s.actor == actor
            && s.client == r.client
            && s.start < r.at
            && (s.busy_until > r.scan || kept_by_readers(s))
            && m.holds_of(actor).any(|h| {
                h.client == r.client
                    && h.names.contains(&r.name)
                    && h.call >= s.start
                    && h.call <= s.busy_until
                    && h.enter <= alive_at_shutdown
            })
    });
    // Its own requests held back at the proxy across the shutdown (an
    // in-flight case's late request, or its undo's copy): they run after
    // the shutdown's grace, and what they take or leave is theirs.
    let held_back = m.held_back.iter().any(|(until, a, client, name)| {
        *a == actor && *client == r.client && *name == r.name && *until > down
    });
    lingers
        || held_back
        || m.failed.iter().any(|(at, a, client, names)| {
            *a == actor
                && *client == r.client
                && names.contains(&r.name)
                && *at < r.at
                && *at + FAILED_ACQUIRE_TAIL > r.scan
        })
}

/// After a shutdown, no field of the client is left that no hold accounts
/// for. A field whose thread is known must belong to an accounted session
/// of that thread; fields of unknown threads are matched against accounted
/// sessions of threads whose number was never learned.
pub(crate) fn left_by_shutdown(m: &Model, v: &mut Verdict) {
    for r in &m.remains {
        let down = m.downs.get(&r.client).copied().unwrap_or(r.scan);
        let faulted = m.faults.iter().any(|f| {
            (f.server == r.server || f.kind == "restart")
                && f.start < r.at
                && f.tail() > down.checked_sub(FAULT_TAIL).unwrap_or(down)
        });
        if faulted {
            v.excuse("left by shutdown: a fault around the shutdown");
            continue;
        }
        let process = process_of(&r.client);
        // Actors of the client's process that had holds of this client here.
        let mut holders: BTreeSet<ActorId> = BTreeSet::new();
        for h in &m.holds {
            if h.client == r.client && h.names.contains(&r.name) {
                holders.insert(h.actor);
            }
        }
        let known = |tid: u64| -> Option<ActorId> {
            m.tids
                .iter()
                .filter(|(a, t)| **t == tid && process_of(&m.label(**a)) == process)
                .map(|(a, _)| *a)
                .next()
        };
        let unexplained: Vec<u64> = r
            .tids
            .iter()
            .copied()
            .filter(|&tid| known(tid).is_none_or(|a| !accounted(m, a, r)))
            .collect();
        let unknown_accounted = holders
            .iter()
            .filter(|a| !m.tids.contains_key(a) && accounted(m, **a, r))
            .count();
        if unexplained.len() <= unknown_accounted {
            if !unexplained.is_empty() {
                v.excuse("left by shutdown: fields of threads whose number is unknown");
            }
            continue;
        }
        let whose: Vec<String> = unexplained
            .iter()
            .map(|&tid| match known(tid) {
                Some(a) => format!("{tid} ({}, whose holds there had all ended)", m.label(a)),
                None => format!("{tid} (a thread that never held it with a guard)"),
            })
            .collect();
        let mut details = vec![format!(
            "the scan started when shutdown() returned at {}; `shutdown()` began at {}",
            m.time(r.scan),
            m.time(down)
        )];
        let mut actors = Vec::new();
        for h in m
            .holds
            .iter()
            .filter(|h| h.client == r.client && h.names.contains(&r.name))
            .filter(|h| h.call + Duration::from_secs(3) > down)
        {
            details.push(format!("hold: {}", report::describe(m, h)));
            actors.push(h.actor);
        }
        actors.sort_unstable();
        actors.dedup();
        v.violations.push(Violation {
            class: Class::Liveness,
            rule: "left by shutdown",
            title: format!(
                "left by shutdown: right after shutdown() of {} returned, lock {} on server {} \
                 still had fields of thread(s) {} that no guard, leaked hold or unsettled \
                 release accounts for",
                r.client,
                r.name,
                r.server,
                whose.join(", ")
            ),
            details,
            at: r.at,
            names: vec![r.name.clone()],
            actors,
            holds: Vec::new(),
        });
    }
}

/// A release sent after its client's `shutdown()` returned cannot have
/// released anything (nothing is sent), so it must not say `Ok`: the hold
/// was left to expire, and the section may not have been exclusive.
pub(crate) fn release_after_shutdown(m: &Model, v: &mut Verdict) {
    for h in &m.holds {
        let (Some(gone), Some(exit), Some(released)) = (m.gone.get(&h.client), h.exit, h.released)
        else {
            continue;
        };
        if h.kind == Kind::Red || exit <= *gone || h.result != "ok" {
            continue;
        }
        v.violations.push(Violation {
            class: Class::Safety,
            rule: "release after shutdown",
            title: format!(
                "release after shutdown: hold #{} ({}, {} {}) was released by {} at {}, after \
                 shutdown() of {} returned at {}, and the release said Ok",
                report::hold_id(h.id),
                m.label(h.actor),
                h.kind.as_str(),
                h.names.join("+"),
                h.exit_how,
                m.time(exit),
                h.client,
                m.time(*gone)
            ),
            details: vec![format!("hold: {}", report::describe(m, h))],
            at: released,
            names: h.names.clone(),
            actors: vec![h.actor],
            holds: vec![h.id],
        });
    }
}
