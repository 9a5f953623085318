//! A client's subscriber and its waiters (`pubsub/`): a release message
//! wakes the oldest parked waiter (`Waiters::wake_one`), a reconnect wakes
//! them all, a local release may reserve the oldest for a direct hand-over
//! (`Waiters::reserve`), and a local taking of the lock ends every park by
//! its TTL (`Waiters::bound_parked`). Which waiter is the oldest depends
//! on who parked first: a message may go to any of them; a reservation
//! (with at most one other thread per client in the configurations, but
//! for `owner_handover`'s three, whose two owner threads are alike) and a
//! passed-on wake-up go to the lowest-numbered.
//!
//! With two locks on one channel (`x` and `{x}`, [`Config::braced`]) the
//! waiters, their kept wake-ups and the takings' marks are kept per lock
//! (`pubsub/locks.rs`): a message names the channel, not the lock, so it
//! wakes one waiter of each lock (`Locks::wake_one_each`); a reconnect
//! wakes every waiter of both; a reservation, a passed-on wake-up and a
//! taking's bound concern the waiters of one lock (`Channel::with_lock`);
//! the subscription, its linger and the quiet mark of the first try
//! (`Locks::disturbances`) are the channel's.

use super::config::Config;
use super::job::{CallAt, Job, Wake};
use super::mutation::ClientMutation;
use super::state::State;

/// What a release message does for the waiters of one lock on the
/// channel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Heard {
    /// It wakes this parked waiter of the lock (the oldest: any of them
    /// may be, depending on who parked first).
    To(u8),
    /// No waiter of the lock is parked: the wake-up is kept for the next
    /// one to park (when one has joined).
    Kept,
    /// Nothing for this lock (`ClientMutation::MessageWakesOneLock` only).
    Missed,
}

/// Client `c`'s subscriber reads one release message and hands, for each
/// lock on the channel, one wake-up to a parked waiter of that lock, or
/// keeps it for the next to park (`Locks::wake_one_each`).
pub fn hear(cfg: &Config, s: &mut State, c: u8, to: [Heard; 2]) {
    let client = &mut s.clients[usize::from(c)];
    client.inbox -= 1;
    mark_heard(s, c);
    if to.iter().all(|heard| matches!(heard, Heard::To(_))) {
        s.events |= super::events::BOTH_LOCKS_WOKEN;
    }
    for (lock, heard) in to.into_iter().enumerate() {
        match heard {
            Heard::To(t) => notify(s, c, t),
            Heard::Kept => wake_one(cfg, s, c, lock as u8),
            Heard::Missed => {}
        }
    }
}

fn notify(s: &mut State, c: u8, t: u8) {
    if let Job::Acquire(call) = &mut s.thread_mut(c, t).job {
        if let CallAt::Parked(p) = &mut call.at {
            p.woke = Some(Wake::Notified);
        }
    }
}

/// Something was heard on the channel (or it was dropped): no first
/// try's answer stands, whichever lock it waits for (the channel's
/// disturbances, `Locks::disturbed`).
pub fn mark_heard(s: &mut State, c: u8) {
    for thread in &mut s.clients[usize::from(c)].threads {
        if let Job::Acquire(call) = &mut thread.job {
            if let Some((_, quiet)) = &mut call.first_busy {
                *quiet = false;
            }
        }
    }
}

/// How many threads of `c` joined the waiters of `lock`.
pub fn joined(cfg: &Config, s: &State, c: u8, lock: u8) -> u8 {
    s.clients[usize::from(c)]
        .threads
        .iter()
        .enumerate()
        .filter(|(t, th)| cfg.lock(c, *t as u8) == lock && super::server::is_joined(&th.job))
        .count() as u8
}

/// How many threads of `c` joined the waiters of either lock (the
/// channel's count, `Locks::count`).
fn joined_any(s: &State, c: u8) -> u8 {
    s.clients[usize::from(c)]
        .threads
        .iter()
        .filter(|t| super::server::is_joined(&t.job))
        .count() as u8
}

/// Hands one wake-up to the oldest parked waiter of `lock` in `c`, or
/// keeps it for the next one of that lock to park (`Waiters::wake_one`).
pub fn wake_one(cfg: &Config, s: &mut State, c: u8, lock: u8) {
    for (t, thread) in s.clients[usize::from(c)].threads.iter_mut().enumerate() {
        if cfg.lock(c, t as u8) != lock {
            continue;
        }
        if let Job::Acquire(call) = &mut thread.job {
            if let CallAt::Parked(p) = &mut call.at {
                if !p.reserved && p.woke.is_none() {
                    p.woke = Some(Wake::Notified);
                    return;
                }
            }
        }
    }
    let count = joined(cfg, s, c, lock);
    let permits = &mut s.clients[usize::from(c)].permits[usize::from(lock)];
    if *permits < count {
        *permits += 1;
    }
}

/// A local call took `lock` with a TTL of `ticks`: every waiter of that
/// lock in `c` still parked for it (in the line: not reserved, not woken)
/// parks no longer than that; one whose park ends earlier is not disturbed
/// (`Waiters::bound_parked`, `Waiter::wake_by`, 0d18fa5).
///
/// A waiter not parked yet, whose attempt may have read the TTL before
/// this taking, is reached by its take mark (2bbaed6): the taking is
/// counted (`takes`) and its TTL's end kept (`last_take_ends`), and a
/// waiter that marked the count before its attempt parks no later than
/// that end. The taking also disturbs the channel (`disturbed`), so that
/// a first try's busy answer is not parked on after it. The waiters of
/// the other lock on the channel are not bounded (`Channel::bound_parked`
/// reaches the taken lock's only), but the channel is disturbed for them
/// too.
pub fn bound_parked(cfg: &Config, s: &mut State, c: u8, lock: u8, ticks: u8) {
    let bound = !cfg.mutated(ClientMutation::NoBoundOnLocalTake);
    let mark = !cfg.mutated(ClientMutation::NoTakeMark);
    if mark {
        mark_heard(s, c);
        s.clients[usize::from(c)].last_take[usize::from(lock)] = ticks;
    }
    for (t, thread) in s.clients[usize::from(c)].threads.iter_mut().enumerate() {
        if cfg.lock(c, t as u8) != lock {
            continue;
        }
        if let Job::Acquire(call) = &mut thread.job {
            match &mut call.at {
                CallAt::Parked(p) if !p.reserved && p.woke.is_none() && bound => {
                    p.ticks = p.ticks.min(ticks);
                }
                CallAt::Parked(_) => {}
                // Joined and not parked: its mark was taken before this.
                _ if call.joined && mark => call.taken_since_mark = true,
                _ => {}
            }
        }
    }
}

/// A waiter of `lock` about to park takes a kept wake-up of that lock, if
/// there is one.
pub fn take_permit(s: &mut State, c: u8, lock: u8) -> bool {
    let permits = &mut s.clients[usize::from(c)].permits[usize::from(lock)];
    if *permits == 0 {
        return false;
    }
    *permits -= 1;
    true
}

/// A waiter of `lock` left: the wake-ups kept for that lock never
/// outnumber its waiters.
pub fn left(cfg: &Config, s: &mut State, c: u8, lock: u8) {
    let count = joined(cfg, s, c, lock);
    let permits = &mut s.clients[usize::from(c)].permits[usize::from(lock)];
    *permits = (*permits).min(count);
}

/// The subscriber reconnected (or the client shut its channel): messages
/// in flight are lost, and every waiter of every lock on the channel is
/// woken to look again.
pub fn wake_all(cfg: &Config, s: &mut State, c: u8) {
    s.clients[usize::from(c)].inbox = 0;
    mark_heard(s, c);
    for thread in &mut s.clients[usize::from(c)].threads {
        if let Job::Acquire(call) = &mut thread.job {
            if let CallAt::Parked(p) = &mut call.at {
                if !p.reserved && p.woke.is_none() {
                    p.woke = Some(Wake::Notified);
                }
            }
        }
    }
    for lock in 0..2 {
        s.clients[usize::from(c)].permits[usize::from(lock)] = joined(cfg, s, c, lock);
    }
}

/// Ends the reservation of waiter `t` of `c` with `wake`.
pub fn settle_reservation(s: &mut State, c: u8, t: u8, wake: Wake) {
    if let Job::Acquire(call) = &mut s.thread_mut(c, t).job {
        if let CallAt::Parked(p) = &mut call.at {
            if p.reserved {
                p.reserved = false;
                p.woke = Some(wake);
            }
        }
    }
}

/// A tick passed: a channel with no waiter left is unsubscribed (its
/// linger is over), and a mark taken on it no longer stands.
pub fn linger_over(s: &mut State, c: u8) {
    if s.clients[usize::from(c)].subscribed && joined_any(s, c) == 0 {
        s.clients[usize::from(c)].subscribed = false;
        mark_heard(s, c);
    }
}
