//! Turning findings into text a person can act on: each hold described in
//! one line, likely causes named, and an excerpt of the history around a
//! violation.

use std::time::{Duration, Instant};

use crate::history::{Event, HoldId, Stamped};
use crate::model::{Hold, Model};
use crate::oracle::Violation;
use crate::targets::Kind;

/// How far before and after a violation the excerpt reaches.
const BEFORE: Duration = Duration::from_millis(1500);
const AFTER: Duration = Duration::from_millis(400);
/// The most lines of an excerpt.
const EXCERPT_LINES: usize = 45;

/// Cause tags of [`patterns`]: a leased hold of the same thread taken or
/// released on top of a hold.
pub(crate) const LEASE_UNDER: &str = "lease-under-hold";
/// An older leased read hold released under a newer one.
pub(crate) const READ_ORDER: &str = "read-release-order";
/// A read hold released while the thread holds the write lock and other,
/// leased, read holds.
pub(crate) const READ_UNDER_WRITE: &str = "read-release-under-write";
/// A stale leased guard unlocked with `Ok` after the thread took the lock
/// again.
pub(crate) const STALE_UNLOCK: &str = "stale-lease-unlock";
/// `Lock::unlock()` of a leaked hold while another hold was kept.
pub(crate) const LEAKED_UNLOCK: &str = "leaked-unlock";

/// The cause tags named in a violation's details.
pub(crate) fn causes(details: &[String]) -> Vec<&'static str> {
    let mut tags: Vec<&'static str> = [
        STALE_UNLOCK,
        READ_ORDER,
        READ_UNDER_WRITE,
        LEASE_UNDER,
        LEAKED_UNLOCK,
    ]
    .into_iter()
    .filter(|tag| {
        details
            .iter()
            .any(|d| d.starts_with(&format!("pattern [{tag}]")))
    })
    .collect();
    tags.dedup();
    tags
}

/// `3.17`: actor 3's hold number 17.
pub(crate) fn hold_id(id: HoldId) -> String {
    format!("{}.{}", id >> 32, id & 0xffff_ffff)
}

/// One line about a hold: who, what, how, and its valid interval.
pub(crate) fn describe(m: &Model, h: &Hold) -> String {
    let mut s = format!(
        "#{} by {} (client {}): {} {} via {}{}; called {}, acquired {}",
        hold_id(h.id),
        m.label(h.actor),
        h.client,
        h.kind.as_str(),
        h.names.join("+"),
        h.method,
        if h.reentrant { " (re-entrant)" } else { "" },
        m.time(h.call),
        m.time(h.enter),
    );
    match h.lease {
        Some(lease) => s.push_str(&format!(
            ", lease {} ms (runs out by {})",
            lease.as_millis(),
            m.time(h.call + lease)
        )),
        None => s.push_str(", watched"),
    }
    if h.token > 0 {
        s.push_str(&format!(", token {}", h.token));
    }
    match h.exit {
        Some(exit) => s.push_str(&format!(
            "; exit {} by {} (is_held {})",
            m.time(exit),
            h.exit_how,
            h.held_at_exit.map_or("?".into(), |b| b.to_string())
        )),
        None => s.push_str("; never released"),
    }
    if let Some(released) = h.released {
        s.push_str(&format!(
            ", release returned {} at {}",
            h.result,
            m.time(released)
        ));
    }
    if let Some((at, how)) = h.loss {
        s.push_str(&format!("; LOSS reported at {} ({how})", m.time(at)));
    }
    if let Some(down) = h.down {
        s.push_str(&format!("; client shut down at {}", m.time(down)));
    }
    if let Some(at) = h.forced {
        s.push_str(&format!("; force_unlock at {}", m.time(at)));
    }
    if let Some((kind, server, at)) = &h.faulted {
        s.push_str(&format!(
            "; fault {kind} on server {server} at {}",
            m.time(*at)
        ));
    }
    s.push_str(&format!("; valid until {}", m.time(h.valid_end)));
    s
}

/// Known ways a hold is cut short, if the history shows one around `h`
/// before `at` (when the violation shows):
///
/// - [`LEASE_UNDER`]: while `h` was held, the same thread took or released
///   a leased hold of the same lock, and that lease ran out before `at`:
///   if the lock's TTL followed that lease, `h` went with it;
/// - [`READ_ORDER`]: in read hold `h`'s session, the same thread released a
///   read hold while a newer one was kept (read-hold TTL keys are numbered,
///   and a release deletes the highest), and a leased read hold of the
///   session ran out before `at`;
/// - [`READ_UNDER_WRITE`]: while write hold `h` was held, the same thread
///   released a read hold while another leased read hold remained;
/// - [`STALE_UNLOCK`]: a leased guard of the same thread whose lease had run
///   out before `h` was acquired was unlocked with `Ok` in `h`'s session:
///   that release took a newer hold;
/// - [`LEAKED_UNLOCK`]: `Lock::unlock()` of a leaked hold while `h` was held.
pub(crate) fn patterns(m: &Model, h: &Hold, at: Instant) -> Vec<String> {
    let mut found = direct_patterns(m, h, at);
    if !found.is_empty() {
        return found;
    }
    // A cascade: an older hold of the same thread whose lock had already
    // gone (for one of the reasons above) before `h` was acquired, released
    // while `h` was held: that release took `h`'s fresh hold.
    let Some(mine) = m.by_actor.get(&h.actor) else {
        return found;
    };
    for &i in mine {
        let o = &m.holds[i];
        let released = o
            .exit
            .filter(|&e| e > h.enter && e < at && matches!(o.result.as_str(), "ok" | "dropped"));
        if o.id == h.id
            || o.client != h.client
            || o.enter >= h.enter
            || released.is_none()
            || !o.names.iter().any(|n| h.names.contains(n))
        {
            continue;
        }
        for line in direct_patterns(m, o, h.enter) {
            if let Some(rest) = line.strip_prefix("pattern [") {
                found.push(format!(
                    "pattern [{rest_tag}]: cascade: the older hold #{} lost its lock before #{} \
                     was acquired, then its release at {} took #{}'s fresh hold; why #{} lost it: {}",
                    hold_id(o.id),
                    hold_id(h.id),
                    m.time(released.unwrap_or(at)),
                    hold_id(h.id),
                    hold_id(o.id),
                    line,
                    rest_tag = rest.split(']').next().unwrap_or("")
                ));
            }
        }
        if !found.is_empty() {
            break;
        }
    }
    found
}

/// [`patterns`] without cascades.
fn direct_patterns(m: &Model, h: &Hold, at: Instant) -> Vec<String> {
    let slack = Duration::from_millis(50);
    let mut found = Vec::new();
    let Some(mine) = m.by_actor.get(&h.actor) else {
        return found;
    };
    let held_at = |t: Instant| t > h.enter && t < at && h.exit.is_none_or(|e| e > t);
    for &i in mine {
        let o = &m.holds[i];
        if o.id == h.id || o.client != h.client || !o.names.iter().any(|n| h.names.contains(n)) {
            continue;
        }
        // Counted from when its acquire returned: surely run out then.
        let ran_out = o.lease.map(|lease| o.enter + lease);
        if let (Some(ran_out), Some(exit)) = (ran_out, o.exit) {
            // Anywhere in `h`'s session: one release too many leaves every
            // later release of the session one hold ahead.
            let in_session = exit > h.session_start && exit < at && h.exit.is_none_or(|e| e > exit);
            // Only a release known to have succeeded: a dropped guard may
            // have been refused quietly.
            let released = o.result == "ok";
            if ran_out < h.enter && ran_out < exit && in_session && released {
                found.push(format!(
                    "pattern [{STALE_UNLOCK}]: stale guard #{} ({}, lease ran out by {}) was \
                     released ({}) at {}, in the session of #{} (since {}): it released a \
                     newer hold of the thread, and every later release of the session is one \
                     hold ahead",
                    hold_id(o.id),
                    o.method,
                    m.time(ran_out),
                    o.result,
                    m.time(exit),
                    hold_id(h.id),
                    m.time(h.session_start),
                ));
            }
        }
        // Read holds keep their TTLs in keys numbered by the hold count, and
        // a release deletes the highest number: releasing anything but the
        // newest read hold leaves the others with the wrong TTLs, and the
        // lock lives only as long as the shortest-lived key left.
        if h.kind == Kind::Read && o.kind == Kind::Read {
            let out_of_order = o.exit.filter(|&t| {
                t > h.session_start
                    && t < at
                    && mine.iter().map(|&j| &m.holds[j]).any(|n| {
                        n.kind == Kind::Read
                            && n.client == h.client
                            && n.names == h.names
                            && n.enter > o.enter
                            && n.enter < t
                            && n.exit.is_none_or(|e| e > t)
                    })
            });
            let short_key = mine.iter().map(|&j| &m.holds[j]).find(|r| {
                r.kind == Kind::Read
                    && r.client == h.client
                    && r.names == h.names
                    && r.enter >= h.session_start
                    && r.lease.is_some_and(|l| r.enter + l <= at + slack)
            });
            if let (Some(t), Some(r)) = (out_of_order, short_key) {
                found.push(format!(
                    "pattern [{READ_ORDER}]: in the session of read hold #{}, the same thread \
                     released read hold #{} at {} while a newer read hold was kept; the \
                     remaining read-hold keys then carry the wrong leases (e.g. #{}'s, ran out \
                     by {}), and the lock expired with them",
                    hold_id(h.id),
                    hold_id(o.id),
                    m.time(t),
                    hold_id(r.id),
                    m.time(r.enter + r.lease.unwrap_or_default())
                ));
            }
        }
        if let Some(lease) = o.lease {
            let released = o.exit.filter(|&e| held_at(e) && o.released.is_some());
            if h.kind == Kind::Write && o.kind == Kind::Read {
                // The release sets the lock's TTL from the read holds that
                // remain, forgetting the write hold.
                let short = mine.iter().map(|&j| &m.holds[j]).find(|r| {
                    r.id != o.id
                        && r.kind == Kind::Read
                        && r.client == h.client
                        && r.names == o.names
                        && released.is_some_and(|t| r.enter < t && r.exit.is_none_or(|e| e > t))
                        && r.lease.is_some_and(|l| r.enter + l <= at + slack)
                });
                if let (Some(exit), Some(r)) = (released, short) {
                    found.push(format!(
                        "pattern [{READ_UNDER_WRITE}]: while write hold #{} was held, the same \
                         thread released read hold #{} at {} while its read hold #{} (lease \
                         ran out by {}) remained: the lock's TTL then followed that read lease",
                        hold_id(h.id),
                        hold_id(o.id),
                        m.time(exit),
                        hold_id(r.id),
                        m.time(r.enter + r.lease.unwrap_or_default())
                    ));
                }
                continue;
            }
            if h.kind == Kind::Read && o.kind == Kind::Read {
                continue;
            }
            let took = Some(o.enter).filter(|&t| held_at(t));
            for (t, verb) in [(took, "took"), (released, "released")] {
                let Some(t) = t else { continue };
                if t + lease <= at + slack {
                    found.push(format!(
                        "pattern [{LEASE_UNDER}]: while #{} was held, the same thread {verb} \
                         leased hold #{} ({}, lease {} ms) at {}; that lease ran out at {}, \
                         before this showed: the lock's TTL was set to it under #{}",
                        hold_id(h.id),
                        hold_id(o.id),
                        o.method,
                        lease.as_millis(),
                        m.time(t),
                        m.time(t + lease),
                        hold_id(h.id)
                    ));
                    break;
                }
            }
        }
        if o.exit_how.starts_with("Lock::unlock") {
            if let Some(exit) = o.exit.filter(|&e| held_at(e)) {
                found.push(format!(
                    "pattern [{LEAKED_UNLOCK}]: Lock::unlock() of leaked hold #{} ({}) at {} \
                     while #{} ({}) was held",
                    hold_id(o.id),
                    if o.lease.is_some() {
                        "leased"
                    } else {
                        "watched"
                    },
                    m.time(exit),
                    hold_id(h.id),
                    if h.lease.is_some() {
                        "leased"
                    } else {
                        "watched"
                    },
                ));
            }
        }
    }
    found
}

/// The names an event is about, if any.
fn event_names<'a>(m: &'a Model, event: &Event) -> Option<Vec<&'a str>> {
    let of_hold = |hold: &HoldId| {
        m.by_id
            .get(hold)
            .map(|&i| m.holds[i].names.iter().map(String::as_str).collect())
    };
    match event {
        Event::Call { op, .. } | Event::Miss { op, .. } => m
            .op_targets
            .get(op)
            .map(|(_, names)| names.iter().map(String::as_str).collect()),
        Event::Enter { hold, .. }
        | Event::Exit { hold, .. }
        | Event::Released { hold, .. }
        | Event::HeldFalse { hold, .. } => of_hold(hold),
        _ => None,
    }
}

/// One event as a line of the excerpt.
pub(crate) fn render_event(m: &Model, at: Instant, event: &Event) -> String {
    let who = |actor: &u32| m.label(*actor);
    let what = match event {
        Event::Actor { actor, label } => format!("{:<10} is {label}", who(actor)),
        Event::Call {
            actor,
            client,
            kind,
            names,
            method,
            reentrant,
            ..
        } => format!(
            "{:<10} call {method} on {} {names} (client {client}{})",
            who(actor),
            kind.as_str(),
            if *reentrant { ", re-entrant" } else { "" }
        ),
        Event::Enter {
            actor, hold, token, ..
        } => format!(
            "{:<10} ENTER hold #{}{}",
            who(actor),
            hold_id(*hold),
            if *token > 0 {
                format!(" token {token}")
            } else {
                String::new()
            }
        ),
        Event::Miss { actor, outcome, .. } => format!("{:<10} no lock: {outcome}", who(actor)),
        Event::Exit {
            actor,
            hold,
            how,
            held,
        } => format!(
            "{:<10} EXIT hold #{} by {how} (is_held {held})",
            who(actor),
            hold_id(*hold)
        ),
        Event::Released {
            actor,
            hold,
            result,
        } => format!(
            "{:<10} release of #{} returned {result}",
            who(actor),
            hold_id(*hold)
        ),
        Event::HeldFalse { actor, hold } => format!(
            "{:<10} guard of #{} says is_held() == false",
            who(actor),
            hold_id(*hold)
        ),
        Event::Flag { actor, text } => format!("{:<10} FLAG {text}", who(actor)),
        Event::Probe { actor } => format!("{:<10} asks its hold count", who(actor)),
        Event::Count {
            actor,
            kind,
            name,
            what,
            observed,
            ..
        } => format!(
            "{:<10} {what}() of {} {name} = {observed}",
            who(actor),
            kind.as_str()
        ),
        Event::Lost { client, name } => {
            format!("{:<10} on_lock_lost({name})", client)
        }
        Event::ForceStart { actor, kind, names } => {
            format!("{:<10} force_unlock {} {names}", who(actor), kind.as_str())
        }
        Event::ForceEnd { actor, result } => {
            format!("{:<10} force_unlock returned {result}", who(actor))
        }
        Event::ClientDown { client } => format!("{client:<10} client shutdown"),
        Event::ClientUp { client, .. } => format!("{client:<10} client built"),
        Event::ClientGone { client } => format!("{client:<10} shutdown() returned"),
        Event::Remains {
            client,
            server,
            name,
            tids,
        } => format!("{client:<10} left {name} on server{server} with fields of thread(s) {tids}"),
        Event::Tid { actor, tid } => format!("{:<10} has thread number {tid}", who(actor)),
        Event::HeldBack {
            actor,
            name,
            for_ms,
            ..
        } => format!(
            "{:<10} a request on {name} held back, its last on its way for up to {for_ms} ms",
            who(actor)
        ),
        Event::FaultStart { server, kind } => {
            format!("{:<10} FAULT {kind} starts", format!("server{server}"))
        }
        Event::FaultEnd { server, kind } => {
            format!("{:<10} fault {kind} ends", format!("server{server}"))
        }
        Event::Done { actor, ops } => format!("{:<10} done after {ops} ops", who(actor)),
        Event::Note { text } => format!("note: {text}"),
    };
    format!("  {:>9}  {what}", m.time(at))
}

/// The history around a violation: events on its names or by its actors,
/// plus faults, shutdowns and lost-lock callbacks.
pub(crate) fn excerpt(m: &Model, events: &[Stamped], v: &Violation) -> Vec<String> {
    let from = v.at.checked_sub(BEFORE).unwrap_or(m.t0);
    let to = v.at + AFTER;
    // Events on the violation's locks (by anyone), its actors' flags, and
    // what happens to everyone: faults, shutdowns, lost-lock callbacks.
    let on_focus = |names: &str| names.split('+').any(|n| v.names.iter().any(|f| f == n));
    let relevant = |event: &Event| -> bool {
        if let Some(names) = event_names(m, event) {
            return names.iter().any(|n| v.names.iter().any(|f| f == n));
        }
        match event {
            Event::Count { name, .. } => on_focus(name),
            Event::ForceStart { names, .. } => on_focus(names),
            Event::Flag { actor, .. } => v.actors.contains(actor),
            Event::Lost { name, .. } => v.names.iter().any(|n| name.ends_with(&format!(":{n}"))),
            Event::Remains { name, .. } => on_focus(name),
            Event::Tid { actor, .. } => v.actors.contains(actor),
            Event::HeldBack { name, .. } => on_focus(name),
            Event::FaultStart { .. }
            | Event::FaultEnd { .. }
            | Event::ClientDown { .. }
            | Event::ClientGone { .. }
            | Event::Note { .. } => true,
            _ => false,
        }
    };
    let picked: Vec<&Stamped> = events
        .iter()
        .filter(|e| e.at >= from && e.at <= to && relevant(&e.event))
        .collect();
    // Keep the lines closest to the violation.
    let mut chosen: Vec<&Stamped> = picked.clone();
    if chosen.len() > EXCERPT_LINES {
        chosen.sort_by_key(|e| {
            if e.at > v.at {
                e.at - v.at
            } else {
                v.at - e.at
            }
        });
        chosen.truncate(EXCERPT_LINES);
        chosen.sort_by_key(|e| e.at);
    }
    let mut lines: Vec<String> = chosen
        .into_iter()
        .map(|e| render_event(m, e.at, &e.event))
        .collect();
    if picked.len() > lines.len() {
        lines.insert(
            0,
            format!(
                "  ({} of {} events shown, the closest to {})",
                lines.len(),
                picked.len(),
                m.time(v.at)
            ),
        );
    }
    lines
}

/// A violation with its details and excerpt, ready to print.
pub(crate) fn render(m: &Model, events: &[Stamped], v: &Violation) -> String {
    let mut out = format!("[{}] {}\n", v.class.as_str(), v.title);
    for line in &v.details {
        out.push_str(&format!("    {line}\n"));
    }
    if v.names.is_empty() && v.actors.is_empty() {
        return out;
    }
    let excerpt = excerpt(m, events, v);
    if !excerpt.is_empty() {
        out.push_str("    history excerpt (time since schedule start):\n");
        for line in excerpt {
            out.push_str(&format!("    {line}\n"));
        }
    }
    out
}
