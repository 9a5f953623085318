//! A client's subscriber and its waiters of the latch's channel: the
//! publish at zero wakes every parked waiter once and keeps a wake-up for
//! one that joined and is not parked (`pubsub/subscriber.rs`: a
//! synchronizer's message, `Waiters::wake_each_once`); a dropped
//! connection wakes everyone, and so does the reconnect's confirmation
//! (`Channel::connection_lost`, `Channel::confirm` with
//! `wake_all_on_confirm`, `Waiters::wake_all`).

use super::net::event;
use super::state::{Job, Phase, State, Sub};
use super::LatchMutation;

/// Whether client `c`'s thread joined the channel's waiters (its wait
/// subscribed and has not ended).
pub fn joined(s: &State, c: usize) -> bool {
    matches!(&s.clients[c].job, Job::Wait(w) if w.subscribed)
}

/// `latch_count_down.lua` published 0: on its way to every subscriber
/// (one reconnecting hears nothing).
pub fn published(s: &mut State) {
    for client in &mut s.clients {
        if client.sub == Sub::On {
            client.inbox = true;
        }
    }
}

/// Client `c`'s subscriber hears the message: every parked waiter looks
/// again, once; a joined waiter not parked gets a kept wake-up
/// (`wake_each_once`).
pub fn hear(s: &mut State, mutation: Option<LatchMutation>, c: usize) {
    s.clients[c].inbox = false;
    if wake_parked(s, c) {
        s.events |= event::WOKEN_BY_PUBLISH;
    } else if joined(s, c) && mutation != Some(LatchMutation::WakeNotKept) {
        s.clients[c].permits = 1;
    }
}

/// A parked waiter of `c` looks again; whether there was one.
fn wake_parked(s: &mut State, c: usize) -> bool {
    match &mut s.clients[c].job {
        Job::Wait(w) if matches!(w.phase, Phase::Parked { .. }) => {
            w.phase = Phase::Look;
            true
        }
        _ => false,
    }
}

/// `Waiters::wake_all`: every waiter, parked (it looks again) or about to
/// park (a wake-up kept for it).
fn wake_all(s: &mut State, mutation: Option<LatchMutation>, c: usize) {
    if mutation == Some(LatchMutation::NoWakeOnReconnect) {
        return;
    }
    wake_parked(s, c);
    if joined(s, c) {
        s.clients[c].permits = 1;
        s.events |= event::RECONNECT_WOKE;
    }
}

/// The fault: client `c`'s pub/sub connection drops (the message on its
/// way lost); every waiter is woken (`connection_lost`).
pub fn drop_connection(s: &mut State, mutation: Option<LatchMutation>, c: usize) {
    let client = &mut s.clients[c];
    client.inbox = false;
    client.sub = Sub::Reconnecting;
    wake_all(s, mutation, c);
}

/// The subscriber reconnects: the channel is subscribed again when a
/// waiter still needs it, and the confirmation wakes everyone
/// (`wake_all_on_confirm`); else it is forgotten.
pub fn reconnect(s: &mut State, mutation: Option<LatchMutation>, c: usize) {
    if joined(s, c) {
        s.clients[c].sub = Sub::On;
        wake_all(s, mutation, c);
    } else {
        s.clients[c].sub = Sub::Off;
    }
}

/// A waiter joins the channel (`PubSub::subscribe`): subscribed at once
/// unless the subscriber is reconnecting (then its reconnect confirms).
pub fn join(s: &mut State, c: usize) {
    if s.clients[c].sub == Sub::Off {
        s.clients[c].sub = Sub::On;
    }
}

/// A waiter leaves (its `Subscription` drops): kept wake-ups no more than
/// the waiters left (`Waiters::leave`).
pub fn leave(s: &mut State, c: usize) {
    s.clients[c].permits = 0;
}

/// A waiter about to park takes a kept wake-up, if there is one
/// (`Waiters::take_permit`).
pub fn take_permit(s: &mut State, c: usize) -> bool {
    let client = &mut s.clients[c];
    if client.permits == 0 {
        return false;
    }
    client.permits -= 1;
    true
}
