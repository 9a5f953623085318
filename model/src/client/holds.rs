//! The renewal map of one thread on the lock (`renewals.rs`): its live
//! generation, what `counted` says, a hold added (`RenewalMap::add`, with
//! the holds Redis counts beyond the guards), one released
//! (`release_one`) and a generation marked lost (`mark_lost`).

use super::config::{Config, Lease};
use super::job::Job;
use super::state::{Entry, Gen, Purpose, State};

/// Whether thread `(c, t)`'s holds have a lease (else the watchdog's).
pub fn leased(cfg: &Config, c: u8, t: u8) -> bool {
    matches!(cfg.clients[usize::from(c)][usize::from(t)], Lease::Ticks(_))
}

/// Holds the client counts that Redis may still count
/// (`RenewalMap::counted`): none of a generation whose leases ran out.
pub fn counted(cfg: &Config, s: &State, c: u8, t: u8) -> u8 {
    match s.thread(c, t).gen {
        Some(g) if !(leased(cfg, c, t) && g.may_last == 0) => g.count,
        _ => 0,
    }
}

/// The thread's generation is over (lost, or its last hold released):
/// its pending releases no longer name a live record, and a release of
/// one of its holds that has not forgotten it yet finds it stale.
fn end(s: &mut State, c: u8, t: u8) {
    let thread = s.thread_mut(c, t);
    thread.gen = None;
    thread.ghost.wiped = false;
    thread.ghost.failover_lost = false;
    thread.ghost.intruded = false;
    for entry in &mut thread.lane.entries {
        if let Entry::Release(p) = entry {
            if let Purpose::Guard { live } = &mut p.purpose {
                *live = false;
            }
        }
    }
    for thread in &mut s.clients[usize::from(c)].threads {
        if let Job::Release(rel) = &mut thread.job {
            if rel.holder == t && !super::release::forgotten(rel) {
                rel.stale = true;
            }
        }
    }
}

/// Marks the live generation lost (`RenewalMap::mark_lost`): its guards
/// are stale. Returns whether one was live.
pub fn mark_lost(s: &mut State, c: u8, t: u8) -> bool {
    if s.thread(c, t).gen.is_none() {
        return false;
    }
    // Its guards are stale: their drops send nothing (`Kept::Stale`), so
    // the model forgets them.
    end(s, c, t);
    true
}

/// Forgets one hold before its release is sent (`release_one`); returns
/// whether the generation is still live after it.
pub fn release_one(s: &mut State, c: u8, t: u8) -> bool {
    let thread = s.thread_mut(c, t);
    let Some(gen) = &mut thread.gen else {
        return false;
    };
    gen.count -= 1;
    if gen.count > 0 {
        return true;
    }
    end(s, c, t);
    false
}

/// Records a hold just taken (`RenewalMap::add`): Redis counts `holds`
/// for the thread now; the step began `started_ago` ticks ago, when the
/// generation's leases had run out if `expired_at_start`. Returns how
/// many holds Redis counts beyond the guards (orphans, given back by the
/// caller).
pub fn add(
    cfg: &Config,
    s: &mut State,
    (c, t): (u8, u8),
    holds: u8,
    started_ago: u8,
    expired_at_start: bool,
    token: Option<i64>,
) -> u8 {
    let lease = cfg.clients[usize::from(c)][usize::from(t)];
    let left = cfg.lease_ticks(lease).saturating_sub(started_ago);
    if let Some(gen) = &mut s.thread_mut(c, t).gen {
        let before = gen.count;
        if holds > before.max(1) && !expired_at_start {
            gen.count += 1;
            gen.left = gen.left.max(left);
            if leased(cfg, c, t) {
                gen.may_last = gen.may_last.max(left);
            }
            gen.token = token.or(gen.token);
            return holds.saturating_sub(gen.count);
        }
        mark_lost(s, c, t);
    }
    let thread = s.thread_mut(c, t);
    thread.gen = Some(Gen {
        count: 1,
        left,
        may_last: if leased(cfg, c, t) { left } else { 0 },
        token,
        handed: 0,
    });
    thread.ghost.wiped = false;
    thread.ghost.failover_lost = false;
    thread.ghost.intruded = false;
    holds.saturating_sub(1)
}

/// A local release handed the lock to a parked waiter acting for field
/// `(c, t)` (`RenewalMap::add_handed`, a148de8): recorded by the release,
/// under the successor's lane turn, as Redis counts it: one hold, a new
/// generation (a record still live is stale: the field held nothing when
/// the lock was handed to it), its lease from the waiter's reservation,
/// to be claimed by the waiter.
pub fn add_handed(cfg: &Config, s: &mut State, (c, t): (u8, u8), token: Option<i64>) {
    add(cfg, s, (c, t), 1, 0, false, token);
    if let Some(gen) = &mut s.thread_mut(c, t).gen {
        gen.handed += 1;
    }
}

/// The waiter handed a hold of field `(c, t)` claims its record
/// (`RenewalMap::claim_handed`): false once its generation ended (the
/// waiter tries the lock again).
pub fn claim_handed(s: &mut State, c: u8, t: u8) -> bool {
    match &mut s.thread_mut(c, t).gen {
        Some(gen) if gen.handed > 0 => {
            gen.handed -= 1;
            true
        }
        _ => false,
    }
}

/// Holds of field `(c, t)` a guard stands for: the record's, less those
/// handed and not claimed yet.
pub fn guarded(s: &State, c: u8, t: u8) -> u8 {
    s.thread(c, t)
        .gen
        .map_or(0, |g| g.count.saturating_sub(g.handed))
}

/// Redis may count a hold of thread `(c, t)` that no guard stands for
/// until it expires: a release left unconfirmed once its latch's life was
/// over, or a model's bound on give-backs reached. The at-rest rule
/// excuses it until Redis has nothing under the field.
pub fn excuse_leak(s: &mut State, c: u8, t: u8) {
    s.thread_mut(c, t).ghost.leak_excused = true;
}
