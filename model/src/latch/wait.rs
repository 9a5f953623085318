//! A thread's waiting call (`CountDownLatch::wait_on` through
//! `WaitOn::until`): a look at the count (`count`: a `GET` under the
//! pool's retry rule), the subscription and the look again that catches
//! a message sent before it, parks until the message, the re-check, a
//! reconnect or the wait's end, and the outage's tolerance.

use super::net::{self, event};
use super::pubsub;
use super::state::{Job, Phase, Req, State, Wait, Wire};
use super::{Config, LatchMutation};

/// The re-check's bound in tick boundaries (`RECHECK`, 5 s, a tick and
/// two thirds of 3 s response timeouts): a waiter parked at any moment of
/// a tick looks again after the next boundary and before the third.
pub const RECHECK_TICKS: u8 = 3;

/// `wait` (`left`: `None`) or `wait_for` (`left` ticks): its first look.
pub fn begin(s: &mut State, cfg: &Config, c: usize, left: Option<u8>) {
    let client = &mut s.clients[c];
    client.waits_left -= 1;
    client.job = Job::Wait(Wait {
        left,
        retries_left: 0,
        outage: None,
        subscribed: false,
        phase: Phase::Look,
    });
    step(s, cfg, c);
}

/// Runs `f` on client `c`'s wait.
fn with_wait<R>(s: &mut State, c: usize, f: impl FnOnce(&mut Wait) -> R) -> R {
    let Job::Wait(w) = &mut s.clients[c].job else {
        unreachable!("not waiting");
    };
    f(w)
}

/// The thread's local step: a look (`attempt`: `count()`), sent on a
/// connection of its own.
pub fn step(s: &mut State, cfg: &Config, c: usize) {
    with_wait(s, c, |w| {
        debug_assert_eq!(w.phase, Phase::Look);
        w.retries_left = cfg.retries;
        w.phase = Phase::Sent;
    });
    s.clients[c].wire = Some(Wire::send(Req::Get));
}

/// The thread reads its look's reply, or the error of a cut.
pub fn read(s: &mut State, cfg: &Config, c: usize) {
    let wire = s.clients[c].wire.take().expect("a connection to read");
    match wire.answer {
        Some(n) if !wire.cut => {
            // Opened on a look Redis answered too early.
            s.opened_early |= wire.early;
            looked(s, cfg, c, n)
        }
        _ => look_failed(s, cfg, c),
    }
}

/// A look failed: the pool retries with a new `GET`, or `until` counts an
/// outage (an error past the tolerance, or once the wait is over; else,
/// after the outage's pause, folded in here, it looks again, subscribed).
fn look_failed(s: &mut State, cfg: &Config, c: usize) {
    let retry = with_wait(s, c, |w| {
        if w.retries_left > 0 {
            w.retries_left -= 1;
            return true;
        }
        false
    });
    if retry {
        s.clients[c].wire = Some(Wire::send(Req::Get));
        return;
    }
    let (exceeded, over, subscribe) = with_wait(s, c, |w| {
        let lasted = *w.outage.get_or_insert(0);
        (lasted >= cfg.tolerance, w.left == Some(0), !w.subscribed)
    });
    if exceeded || over {
        return end(s, c, None);
    }
    if subscribe {
        subscribe_to(s, c);
    }
    with_wait(s, c, |w| w.phase = Phase::Look);
    step(s, cfg, c);
}

/// A look read the count: 0 opens (`Look::Done`); else the wait's end, or
/// the subscription and a look again at once, or a park.
fn looked(s: &mut State, cfg: &Config, c: usize, count: i64) {
    let subscribed = with_wait(s, c, |w| {
        w.outage = None;
        w.subscribed
    });
    if count == 0 {
        if subscribed {
            s.events |= event::SECOND_LOOK_OPENED;
        }
        return end(s, c, Some(true));
    }
    if with_wait(s, c, |w| w.left == Some(0)) {
        return end(s, c, Some(false));
    }
    if !subscribed {
        subscribe_to(s, c);
        if !cfg.mutated(LatchMutation::NoLookAfterSubscribe) {
            // A message sent before the subscription went unheard.
            with_wait(s, c, |w| w.phase = Phase::Look);
            return step(s, cfg, c);
        }
    }
    park(s, cfg, c);
}

/// `PubSub::subscribe`: the waiter joins the channel.
fn subscribe_to(s: &mut State, c: usize) {
    with_wait(s, c, |w| w.subscribed = true);
    pubsub::join(s, c);
}

/// `Subscription::park`: a kept wake-up sends it to look again at once;
/// else it parks.
fn park(s: &mut State, cfg: &Config, c: usize) {
    if pubsub::take_permit(s, c) {
        s.events |= event::KEPT_WAKE_UP;
        with_wait(s, c, |w| w.phase = Phase::Look);
        return step(s, cfg, c);
    }
    with_wait(s, c, |w| w.phase = Phase::Parked { ticks: 0 });
}

/// The call ends: `Some(opened)`, or `None` for an error. The waiter
/// leaves the channel (its `Subscription` drops).
fn end(s: &mut State, c: usize, outcome: Option<bool>) {
    s.events |= match outcome {
        Some(true) => event::OPENED,
        Some(false) => event::RAN_OUT,
        None => event::WAIT_FAILED,
    };
    if pubsub::joined(s, c) {
        pubsub::leave(s, c);
    }
    s.clients[c].job = Job::Idle;
}

/// The re-check wakes the parked waiter (at any moment once a tick
/// boundary passed since it parked; by the third at the latest).
pub fn recheck(s: &mut State, cfg: &Config, c: usize) {
    with_wait(s, c, |w| w.phase = Phase::Look);
    s.events |= event::RECHECK_WOKE;
    step(s, cfg, c);
}

/// A tick for a waiting call: its timers; a look whose reply did not come
/// in time failed (its connection dropped); a park that ends (the wait's
/// end, the re-check by its bound) looks again.
pub fn tick(s: &mut State, cfg: &Config, c: usize) {
    if !matches!(s.clients[c].job, Job::Wait(_)) {
        return;
    }
    let open = net::count(s) == 0;
    let overslept = with_wait(s, c, |w| {
        w.left = w.left.map(|t| t.saturating_sub(1));
        w.outage = w.outage.map(|t| (t + 1).min(cfg.tolerance));
        let Phase::Parked { ticks } = w.phase else {
            return false;
        };
        w.phase = if ticks + 1 >= RECHECK_TICKS || w.left == Some(0) {
            Phase::Look
        } else {
            Phase::Parked { ticks: ticks + 1 }
        };
        open
    });
    s.overslept |= overslept;
    if let Some(wire) = s.clients[c].wire.take_if(|w| w.held) {
        s.clients[c].trailing.push(wire.unread());
        return look_failed(s, cfg, c);
    }
    if with_wait(s, c, |w| w.phase == Phase::Look) {
        step(s, cfg, c);
    }
}
