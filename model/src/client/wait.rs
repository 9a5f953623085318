//! The contended path of a waiting call (`engine/wait.rs`): join the
//! waiters (subscribe), skip the second try when nothing was heard since
//! the first (`first_busy.rs`), park on the lock's TTL until a message, a
//! hand-over or the TTL wakes it, ride out an outage with a pause per
//! failed look, and give up at the wait's end or past the tolerance.

use super::acquire::{decide, Flow};
use super::config::Config;
use super::holds;
use super::job::{Call, CallAt, Job, Outcome, Park, Wake};
use super::mutation::ClientMutation;
use super::pubsub;
use super::state::State;

/// An attempt found the lock busy with `ticks` of TTL left.
pub fn busy(cfg: &Config, s: &mut State, c: u8, t: u8, call: &mut Call, ticks: u8) -> Flow {
    if !call.waits {
        return decide(cfg, s, c, t, call, Outcome::NotGot);
    }
    // The attempt ran: no outage, and no hand-over that it did not see.
    call.outages = 0;
    call.handed_wake = false;
    if !call.joined {
        call.first_busy = call.first_busy.map(|(_, quiet)| (ticks, quiet));
        call.at = CallAt::Join;
        return Flow::Continue;
    }
    if call.wait_left == Some(0) {
        return decide(cfg, s, c, t, call, Outcome::NotGot);
    }
    park(cfg, s, c, t, call, ticks)
}

/// An attempt (or its step) failed like an outage.
pub fn after_error(cfg: &Config, s: &mut State, c: u8, t: u8, call: &mut Call) -> Flow {
    if !call.waits {
        return decide(cfg, s, c, t, call, Outcome::Failed);
    }
    if std::mem::take(&mut call.handed_wake) {
        // A wake-up handed to this waiter goes to the next one.
        pubsub::wake_one(cfg, s, c, cfg.lock(c, t));
    }
    call.outages += 1;
    if call.outages > cfg.outage_tolerance {
        return decide(cfg, s, c, t, call, Outcome::Failed);
    }
    if !call.joined {
        // The first attempt: the outage began; the contended path pauses
        // before its next look.
        call.at = CallAt::Join;
        return Flow::Continue;
    }
    if call.wait_left == Some(0) {
        return decide(cfg, s, c, t, call, Outcome::Failed);
    }
    park(cfg, s, c, t, call, 1)
}

/// Joins the waiters (`acquire_slow`'s start).
pub fn join(cfg: &Config, s: &mut State, c: u8, t: u8, call: &mut Call) -> Flow {
    call.joined = cfg.pubsub();
    if call.joined {
        s.clients[usize::from(c)].subscribed = true;
        // The take mark, before the quiet look (`take_mark`).
        call.taken_since_mark = false;
    }
    let first = call.first_busy.take();
    if call.outages > 0 {
        // Redis was away at the first attempt: a pause first.
        return park(cfg, s, c, t, call, 1);
    }
    let skip = first.and_then(|(ticks, quiet)| {
        let quiet = quiet || cfg.mutated(ClientMutation::FirstBusySkipAlways);
        (quiet && ticks > 0).then_some(ticks)
    });
    match skip {
        // Nothing announced since the first try: parked on its TTL.
        Some(ticks) => park(cfg, s, c, t, call, ticks),
        None => {
            call.at = CallAt::Step;
            Flow::Continue
        }
    }
}

/// Parks thread `(c, t)` among the waiters of its lock for `ticks` at most
/// (the wait's end first; a spin lock's backoff of one tick), or tries
/// again at once when that is no time.
fn park(cfg: &Config, s: &mut State, c: u8, t: u8, call: &mut Call, ticks: u8) -> Flow {
    let lock = cfg.lock(c, t);
    if call.joined && pubsub::take_permit(s, c, lock) {
        // A wake-up kept for this waiter: it tries again at once.
        call.handed_wake = true;
        call.at = CallAt::Step;
        return Flow::Continue;
    }
    let mut ticks = ticks;
    if std::mem::take(&mut call.taken_since_mark) {
        // A local taking since the mark taken before the attempt whose
        // TTL this is: no later than the last taking's TTL, at once when
        // that has passed (`Waiters::enqueue_as`).
        ticks = ticks.min(s.clients[usize::from(c)].last_take[usize::from(lock)]);
    }
    if let Some(left) = call.wait_left {
        ticks = ticks.min(left);
    }
    if !cfg.pubsub() {
        ticks = ticks.min(1);
    }
    if ticks == 0 {
        call.at = CallAt::Step;
        return Flow::Continue;
    }
    call.at = CallAt::Parked(Park {
        ticks,
        reserved: false,
        woke: None,
    });
    Flow::Block
}

/// A parked waiter, once woken.
pub fn parked(cfg: &Config, s: &mut State, c: u8, t: u8, call: &mut Call, park: Park) -> Flow {
    let Some(woke) = park.woke else {
        return Flow::Block;
    };
    match woke {
        Wake::HandedOver(token) => {
            let h = cfg.holder(c, t);
            if cfg.mutated(ClientMutation::WaiterRecordsHandedHold) {
                // The library before a148de8: the waiter records the hold
                // itself, without a turn (one hold, a new generation).
                super::fencing::granted(s, c, h, token);
                holds::add(cfg, s, (c, h), 1, 0, false, token);
                return decide(cfg, s, c, t, call, Outcome::Got);
            }
            // It claims the hold the release recorded (`handed_over`,
            // `claim_handed`); once that generation ended, it tries again.
            if holds::claim_handed(s, c, h) {
                return decide(cfg, s, c, t, call, Outcome::Got);
            }
            call.handed_wake = true;
            call.at = CallAt::Step;
            Flow::Continue
        }
        other => {
            call.handed_wake = matches!(other, Wake::Notified | Wake::Unsettled);
            call.at = CallAt::Step;
            Flow::Continue
        }
    }
}

/// Whether thread `(c, t)` is parked, not reserved, not woken.
pub fn is_waiting(s: &State, c: u8, t: u8) -> bool {
    matches!(&s.thread(c, t).job, Job::Acquire(call)
        if matches!(call.at, CallAt::Parked(p) if !p.reserved && p.woke.is_none()))
}
