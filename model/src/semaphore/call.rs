//! A thread's calls: the acquire call's looks, its waiting loop and its
//! end, and a permit's release.

use super::net::{self, NAME};
use super::state::{Acq, Client, Ending, GiveBack, Job, Phase, Rel, State, Wire};
use super::{Config, SemMutation};
use crate::keyspace::Str;
use crate::names::{Key, Request};

/// A fresh request id (`Engine::next_request_id`).
fn fresh(s: &mut State) -> u16 {
    s.next_id += 1;
    s.next_id - 1
}

/// `Semaphore::try_acquire` (`wait`: `Some(0)`) or `try_acquire_for`:
/// `begin_take` (one request for the call, `Resends::RideThrough`), then
/// its first look.
pub fn begin_acquire(s: &mut State, cfg: &Config, c: usize, wait: Option<u8>) {
    let latch = fresh(s);
    s.clients[c].job = Job::Acquire(Acq {
        latch,
        sent: 0,
        answered: 0,
        alive: None,
        late: Vec::new(),
        retries_left: 0,
        wait,
        outage: None,
        subscribed: false,
        phase: Phase::Look,
    });
    step(s, cfg, c);
}

/// `Permit::release` (or its drop): `Semaphore::give`, one request id
/// under the retry rule.
pub fn begin_release(s: &mut State, cfg: &Config, c: usize) {
    let latch = fresh(s);
    s.clients[c].job = Job::Release(Rel {
        latch,
        retries_left: cfg.retries,
        ran: false,
    });
    s.clients[c].wire = Some(Wire::send(net::release(cfg, latch)));
}

/// Runs `f` on client `c`'s acquire call, taken out of the state.
fn with_acq(s: &mut State, c: usize, f: impl FnOnce(&mut State, &mut Acq)) {
    let Job::Acquire(mut a) = std::mem::replace(&mut s.clients[c].job, Job::Idle) else {
        unreachable!("not in an acquire call");
    };
    f(s, &mut a);
    if a.phase != Phase::Over {
        s.clients[c].job = Job::Acquire(a);
    }
}

/// The thread's local step: a look (`Take::attempt` through
/// `Request::run`), or the call's end (`Take::end`).
pub fn step(s: &mut State, cfg: &Config, c: usize) {
    with_acq(s, c, |s, a| match a.phase {
        Phase::Look => {
            // `Request::may_send(retry_bound)`: refused once an attempt
            // could reach Redis after the latch may have expired.
            if a.alive.is_some_and(|alive| alive <= cfg.retry_window()) {
                a.phase = Phase::End(Ending::Failed);
                return;
            }
            a.retries_left = cfg.retries;
            send_attempt(s, cfg, c, a);
        }
        Phase::End(ending) => end(s, cfg, c, a, ending),
        _ => unreachable!("no local step"),
    });
    // A call that ended set the job itself.
    if let Job::Acquire(a) = &s.clients[c].job {
        if matches!(a.phase, Phase::End(_)) {
            step(s, cfg, c);
        }
    }
}

/// One attempt of the look under the pool's retry rule: numbered, on the
/// call's latch (`Request::run`: `sent += 1`; the latch lives from the
/// first send).
fn send_attempt(s: &mut State, cfg: &Config, c: usize, a: &mut Acq) {
    a.sent += 1;
    if a.sent > 1 && cfg.mutated(SemMutation::LatchIgnoredOnRetry) {
        a.latch = fresh(s);
    }
    a.alive.get_or_insert(cfg.acquire_latch_ticks());
    s.clients[c].wire = Some(Wire::send(net::acquire(cfg, a.latch, a.sent)));
    a.phase = Phase::Sent;
}

/// The thread reads its connection: a reply, or the error of a cut
/// (`Pool::run_once`: a cut attempt is not kept, `LateRequests::cut`).
pub fn read(s: &mut State, cfg: &Config, c: usize) {
    let wire = s.clients[c].wire.take().expect("a connection to read");
    let answer = if wire.cut { None } else { wire.answer };
    match std::mem::replace(&mut s.clients[c].job, Job::Idle) {
        Job::Release(r) => {
            s.clients[c].job = Job::Release(r);
            match answer {
                Some(_) => released(s, c),
                None => release_failed(s, cfg, c),
            }
        }
        Job::Acquire(a) => {
            s.clients[c].job = Job::Acquire(a);
            with_acq(s, c, |s, a| match (a.phase, answer) {
                (Phase::Sent, Some(taken)) => {
                    // `Request::answered`: late attempts' connections
                    // close (their requests may still run), the latch
                    // lives a TTL from this send.
                    a.answered = a.sent;
                    let late = std::mem::take(&mut a.late);
                    s.clients[c].trailing.extend(late.into_iter().map(unread));
                    a.alive = Some(cfg.acquire_latch_ticks());
                    if taken == 1 {
                        a.phase = Phase::End(Ending::Taken);
                    } else {
                        a.outage = None;
                        after_look(cfg, a);
                    }
                }
                (Phase::Sent, None) => attempt_failed(s, cfg, c, a),
                (Phase::GiveBack { .. }, Some(_)) => a.phase = Phase::Over,
                (Phase::GiveBack { .. }, None) => give_back_failed(s, cfg, c, a),
                _ => unreachable!("nothing awaited"),
            });
            if let Job::Acquire(a) = &s.clients[c].job {
                if matches!(a.phase, Phase::End(_)) {
                    step(s, cfg, c);
                }
            }
        }
        Job::Idle => unreachable!("an idle thread reads nothing"),
    }
}

/// A connection nobody reads any more.
fn unread(mut w: Wire) -> Wire {
    w.awaited = false;
    w.answer = None;
    w
}

/// An attempt failed (a cut, or a timeout: then its connection is kept,
/// `LateRequests::keep`): the pool retries, or the look fails.
fn attempt_failed(s: &mut State, cfg: &Config, c: usize, a: &mut Acq) {
    if a.retries_left > 0 {
        a.retries_left -= 1;
        send_attempt(s, cfg, c, a);
        return;
    }
    // `WaitOn::until`: an outage begins (or goes on), unless it exceeds
    // the tolerance.
    let lasted = *a.outage.get_or_insert(0);
    if lasted >= cfg.tolerance {
        a.phase = Phase::End(Ending::Failed);
        return;
    }
    after_look(cfg, a);
}

/// `WaitOn::until` after a look that did not take: its wait's end, the
/// subscription (a look again at once, outside an outage), or a park.
fn after_look(_cfg: &Config, a: &mut Acq) {
    if a.wait == Some(0) {
        let ending = match a.outage {
            Some(_) => Ending::Failed,
            None => Ending::NoPermit,
        };
        a.phase = Phase::End(ending);
    } else if !a.subscribed {
        a.subscribed = true;
        a.phase = match a.outage {
            None => Phase::Look,
            Some(_) => Phase::Parked,
        };
    } else {
        a.phase = Phase::Parked;
    }
}

/// `Take::end`: a permit, or `end_call` (`Request::undo`: the give-back
/// behind every late attempt, else on a connection of its own).
fn end(s: &mut State, cfg: &Config, c: usize, a: &mut Acq, ending: Ending) {
    if ending == Ending::Taken
        && s.redis.get(Key::Latch(NAME, Request(a.latch))) != Ok(Some(Str::Taken))
    {
        s.false_grant = true;
    }
    let client = &mut s.clients[c];
    let late: Vec<Wire> = std::mem::take(&mut a.late);
    if ending == Ending::Taken {
        client.held += 1;
        client.trailing.extend(late.into_iter().map(unread));
        a.phase = Phase::Over;
        return;
    }
    let keep = a.alive.unwrap_or(cfg.acquire_latch_ticks());
    // Nothing unsure (every attempt answered), or the latch that says
    // what was taken may be gone (an error, warned): nothing sent.
    if a.sent == a.answered || keep == 0 {
        client.trailing.extend(late.into_iter().map(unread));
        a.phase = Phase::Over;
        return;
    }
    if late.is_empty() {
        client.wire = Some(Wire::send(net::give_back(cfg, a.latch)));
        a.phase = Phase::GiveBack {
            retries_left: cfg.retries,
        };
        return;
    }
    // Behind each late attempt (`Pool::follow`; a cut one takes nothing),
    // and, as a reply cannot confirm it, carried on by the worker too.
    for mut w in late.into_iter().filter(|w| !w.cut) {
        w.reqs.push(net::give_back(cfg, a.latch));
        client.trailing.push(unread(w));
    }
    if !cfg.mutated(SemMutation::GiveBackNotCarriedOn) {
        client.worker.push(GiveBack {
            latch: a.latch,
            until: keep,
            tried: false,
            wire: None,
        });
    }
    a.phase = Phase::Over;
}

/// The give-back on its own connection failed: retried, then (Redis
/// away: a transient error) handed to the worker until the latch may be
/// gone (`Engine::give_back_later`).
fn give_back_failed(s: &mut State, cfg: &Config, c: usize, a: &mut Acq) {
    let client = &mut s.clients[c];
    if let Phase::GiveBack { retries_left } = &mut a.phase {
        if *retries_left > 0 {
            *retries_left -= 1;
            client.wire = Some(Wire::send(net::give_back(cfg, a.latch)));
            return;
        }
    }
    if !cfg.mutated(SemMutation::GiveBackNotCarriedOn) {
        if let Some(until) = a.alive {
            client.worker.push(GiveBack {
                latch: a.latch,
                until,
                tried: false,
                wire: None,
            });
        }
    }
    a.phase = Phase::Over;
}

/// A release answered: the permit is back.
fn released(s: &mut State, c: usize) {
    let client: &mut Client = &mut s.clients[c];
    client.held -= 1;
    client.job = Job::Idle;
}

/// A release attempt failed: retried (the same latch: a copy that ran is
/// replayed), else the call errs and the permit may or may not be back.
fn release_failed(s: &mut State, cfg: &Config, c: usize) {
    let Job::Release(r) = &mut s.clients[c].job else {
        unreachable!("not a release");
    };
    if r.retries_left > 0 {
        r.retries_left -= 1;
        let latch = r.latch;
        s.clients[c].wire = Some(Wire::send(net::release(cfg, latch)));
        return;
    }
    let (latch, ran) = (r.latch, r.ran);
    if !ran {
        s.failed_releases.push(latch);
    }
    s.clients[c].held -= 1;
    s.clients[c].job = Job::Idle;
}

/// A tick for the thread: its timers, a reply that did not come in time
/// (the connection of an acquire's attempt kept, `LateRequests::keep`;
/// others closed, their requests may still run), a park's end.
pub fn tick(s: &mut State, cfg: &Config, c: usize) {
    if let Job::Acquire(a) = &mut s.clients[c].job {
        a.alive = a.alive.map(|t| t.saturating_sub(1));
        a.wait = a.wait.map(|t| t.saturating_sub(1));
        a.outage = a.outage.map(|t| (t + 1).min(cfg.tolerance));
        if a.phase == Phase::Parked
            && (a.wait == Some(0) || a.outage.is_some_and(|t| t >= cfg.tolerance))
        {
            a.phase = Phase::Look;
        }
    }
    let Some(wire) = s.clients[c].wire.take_if(|w| w.held) else {
        return;
    };
    match &mut s.clients[c].job {
        Job::Acquire(a) if a.phase == Phase::Sent => {
            a.late.push(unread(wire));
            with_acq(s, c, |s, a| attempt_failed(s, cfg, c, a));
        }
        Job::Acquire(_) => {
            s.clients[c].trailing.push(unread(wire));
            with_acq(s, c, |s, a| give_back_failed(s, cfg, c, a));
        }
        Job::Release(_) => {
            s.clients[c].trailing.push(unread(wire));
            release_failed(s, cfg, c);
        }
        Job::Idle => unreachable!("an idle thread waits on nothing"),
    }
    if let Job::Acquire(a) = &s.clients[c].job {
        if a.phase == Phase::Look || matches!(a.phase, Phase::End(_)) {
            step(s, cfg, c);
        }
    }
}

/// A parked waiter wakes (a message, or the re-check) and looks again.
pub fn wake(s: &mut State, cfg: &Config, c: usize) {
    if let Job::Acquire(a) = &mut s.clients[c].job {
        a.phase = Phase::Look;
    }
    step(s, cfg, c);
}
