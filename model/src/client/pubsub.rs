//! A client's subscriber and its waiters (`pubsub/`): a release message
//! wakes the oldest parked waiter (`Waiters::wake_one`), a reconnect wakes
//! them all, a local release may reserve the oldest for a direct hand-over
//! (`Waiters::reserve`), and a local taking of the lock ends every park by
//! its TTL (`Waiters::bound_parked`). Which waiter is the oldest depends
//! on who parked first: a message may go to any of them; a reservation
//! (with at most one other thread per client in the configurations, but
//! for `owner_handover`'s three, whose two owner threads are alike) and a
//! passed-on wake-up go to the lowest-numbered.

use super::config::Config;
use super::job::{CallAt, Job, Wake};
use super::mutation::ClientMutation;
use super::state::State;

/// Client `c`'s subscriber reads one release message and hands it to
/// parked waiter `to` (the oldest: any of them may be, depending on who
/// parked first), or keeps it for the next to park when none is.
pub fn hear(s: &mut State, c: u8, to: Option<u8>) {
    let client = &mut s.clients[usize::from(c)];
    client.inbox -= 1;
    mark_heard(s, c);
    match to {
        Some(t) => notify(s, c, t),
        None => wake_one(s, c),
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
/// try's answer stands.
pub fn mark_heard(s: &mut State, c: u8) {
    for thread in &mut s.clients[usize::from(c)].threads {
        if let Job::Acquire(call) = &mut thread.job {
            if let Some((_, quiet)) = &mut call.first_busy {
                *quiet = false;
            }
        }
    }
}

/// How many threads of `c` joined the waiters.
pub fn joined(s: &State, c: u8) -> u8 {
    s.clients[usize::from(c)]
        .threads
        .iter()
        .filter(|t| super::server::is_joined(&t.job))
        .count() as u8
}

/// Hands one wake-up to the oldest parked waiter of `c`, or keeps it for
/// the next one to park (`Waiters::wake_one`).
pub fn wake_one(s: &mut State, c: u8) {
    for thread in &mut s.clients[usize::from(c)].threads {
        if let Job::Acquire(call) = &mut thread.job {
            if let CallAt::Parked(p) = &mut call.at {
                if !p.reserved && p.woke.is_none() {
                    p.woke = Some(Wake::Notified);
                    return;
                }
            }
        }
    }
    let count = joined(s, c);
    let client = &mut s.clients[usize::from(c)];
    if client.permits < count {
        client.permits += 1;
    }
}

/// A local call took the lock with a TTL of `ticks`: every waiter of `c`
/// still parked for it (in the line: not reserved, not woken) parks no
/// longer than that; one whose park ends earlier is not disturbed
/// (`Waiters::bound_parked`, `Waiter::wake_by`, 0d18fa5).
///
/// A waiter not parked yet, whose attempt may have read the TTL before
/// this taking, is reached by its take mark (2bbaed6): the taking is
/// counted (`takes`) and its TTL's end kept (`last_take_ends`), and a
/// waiter that marked the count before its attempt parks no later than
/// that end. The taking also disturbs the channel (`disturbed`), so that
/// a first try's busy answer is not parked on after it.
pub fn bound_parked(cfg: &Config, s: &mut State, c: u8, ticks: u8) {
    let bound = !cfg.mutated(ClientMutation::NoBoundOnLocalTake);
    let mark = !cfg.mutated(ClientMutation::NoTakeMark);
    if mark {
        mark_heard(s, c);
        s.clients[usize::from(c)].last_take = ticks;
    }
    for thread in &mut s.clients[usize::from(c)].threads {
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

/// A waiter about to park takes a kept wake-up, if there is one.
pub fn take_permit(s: &mut State, c: u8) -> bool {
    let client = &mut s.clients[usize::from(c)];
    if client.permits == 0 {
        return false;
    }
    client.permits -= 1;
    true
}

/// A waiter left: the wake-ups kept never outnumber the waiters.
pub fn left(s: &mut State, c: u8) {
    let count = joined(s, c);
    let client = &mut s.clients[usize::from(c)];
    client.permits = client.permits.min(count);
}

/// The subscriber reconnected (or the client shut its channel): messages
/// in flight are lost, and every waiter is woken to look again.
pub fn wake_all(s: &mut State, c: u8) {
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
    s.clients[usize::from(c)].permits = joined(s, c);
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
    if s.clients[usize::from(c)].subscribed && joined(s, c) == 0 {
        s.clients[usize::from(c)].subscribed = false;
        mark_heard(s, c);
    }
}
