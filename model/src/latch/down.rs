//! A thread's `count_down` call (`CountDownLatch::count_down`), and the
//! `try_set_count` that arms the latch (`CountDownLatch::try_set_count`):
//! one request id for the whole call (`Server::unlock_latch`), sent under
//! the pool's retry rule (`Server::run_write`, `Pool::run_attempts`: a cut
//! or a timeout retried on a new connection while retries are left; no
//! deadline), the timed-out attempt's connection dropped (the server may
//! still run it); a `count_down`'s under one `Request` (`run_request`),
//! which keeps the timed-out attempts' connections, and a call that fails
//! ends with its undo: on a connection of its own under the pool's retries
//! (`run_cleanup`), and when that fails, `end_call` (`Request::undo`:
//! behind the late attempts, and carried on by the release worker).

use super::net;
use super::state::{Down, Job, Req, State, Undo, Wire};
use super::{Config, LatchMutation};

/// A fresh request id (`Engine::next_request_id`).
pub fn fresh(s: &mut State) -> u16 {
    s.next_id += 1;
    s.next_id - 1
}

/// `count_down`: its request latch drawn once, the first attempt sent.
pub fn begin(s: &mut State, cfg: &Config, c: usize) {
    let latch = fresh(s);
    s.called += 1;
    let client = &mut s.clients[c];
    client.downs_left -= 1;
    client.job = Job::Down(Down {
        latch,
        retries_left: cfg.retries,
        set: false,
        alive: cfg.latch_ticks(),
        undo: None,
    });
    client.wire = Some(Wire::send(Req::CountDown(latch)));
}

/// `try_set_count(count)` by client `c`'s thread: before the others
/// start, or (`again`) once the latch opened, for a new round.
pub fn begin_set(s: &mut State, cfg: &Config, c: usize, again: bool) {
    let latch = fresh(s);
    s.set_calls += 1;
    let client = &mut s.clients[c];
    client.sets_left -= u8::from(again);
    client.job = Job::Down(Down {
        latch,
        retries_left: cfg.retries,
        set: true,
        alive: cfg.latch_ticks(),
        undo: None,
    });
    client.wire = Some(Wire::send(Req::TrySet(latch)));
}

/// The request of an attempt of `d` under `latch`.
fn request(d: &Down, latch: u16) -> Req {
    if d.set {
        Req::TrySet(latch)
    } else {
        Req::CountDown(latch)
    }
}

/// The thread reads its attempt's reply (`count_down` returns the count
/// left; `try_set_count` whether it set the count: the threads start once
/// it says `true`) or the error of a cut.
pub fn read(s: &mut State, cfg: &Config, c: usize) {
    let wire = s.clients[c].wire.take().expect("a connection to read");
    if matches!(&s.clients[c].job, Job::Down(d) if d.undo.is_some()) {
        if wire.cut {
            return undo_failed(s, c);
        }
        s.clients[c].job = Job::Idle;
        return;
    }
    if wire.cut {
        return failed(s, cfg, c);
    }
    if matches!(&s.clients[c].job, Job::Down(d) if d.set) && wire.answer == Some(1) {
        s.armed = true;
    }
    s.clients[c].job = Job::Idle;
}

/// An attempt failed (a cut, or no reply within the response timeout):
/// the pool retries under the same latch (`run_attempts`: `op` names the
/// call's latch), or the call returns the error (the count-down may or may
/// not have run).
pub fn failed(s: &mut State, cfg: &Config, c: usize) {
    let retry = match &mut s.clients[c].job {
        Job::Down(d) if d.retries_left > 0 => {
            d.retries_left -= 1;
            Some((d.latch, d.set))
        }
        Job::Down(_) => None,
        _ => unreachable!("not a count-down"),
    };
    let Some((mut latch, set)) = retry else {
        return end_failed(s, cfg, c);
    };
    let mutation = match set {
        false => LatchMutation::CountDownRetryNotLatched,
        true => LatchMutation::TrySetRetryNotLatched,
    };
    if cfg.mutated(mutation) {
        latch = fresh(s);
    }
    let Job::Down(d) = &mut s.clients[c].job else {
        unreachable!("a count-down");
    };
    d.latch = latch;
    let req = request(d, latch);
    s.clients[c].wire = Some(Wire::send(req));
}

/// The call failed, its retries spent (`count_down`'s `Err` arm):
/// `try_set_count` returns its error; a `count_down` sends its undo on a
/// connection of its own under the pool's retries (`run_cleanup`), and
/// returns once it was answered.
fn end_failed(s: &mut State, cfg: &Config, c: usize) {
    let client = &mut s.clients[c];
    let Job::Down(d) = &mut client.job else {
        unreachable!("a count-down");
    };
    if d.set || cfg.mutated(LatchMutation::CountDownNotUndone) {
        client.job = Job::Idle;
        return;
    }
    d.undo = Some(cfg.retries);
    client.wire = Some(Wire::send(Req::Undo(d.latch)));
}

/// The undo on the thread's connection failed: retried; its retries spent
/// (Redis away), `end_call`: the undo behind each late attempt still open
/// (`Pool::follow`: a cut one runs nothing more), and carried on by the
/// release worker (`give_back_later`) while the latch lives.
///
/// Two copies are left out, neither making the model safer: `end_call`'s
/// own `Request::undo` on a connection of its own when no attempt was
/// late (the same retries over again), and the one behind a late attempt
/// that ran already (it would run at once; the worker's, sent within the
/// tick, stands for it).
fn undo_failed(s: &mut State, c: usize) {
    let round = s.sets_run;
    let client = &mut s.clients[c];
    let Job::Down(d) = &mut client.job else {
        unreachable!("a count-down");
    };
    let latch = d.latch;
    if let Some(retries_left @ 1..) = &mut d.undo {
        *retries_left -= 1;
        client.wire = Some(Wire::send(Req::Undo(latch)));
        return;
    }
    // The thread's late attempts: the trailing connections that carry
    // its call's count-down (`LateRequests`).
    for w in &mut client.trailing {
        if w.req == Some(Req::CountDown(latch)) && !w.cut {
            w.then = Some(Req::Undo(latch));
        }
    }
    if d.alive > 0 {
        client.worker.push(Undo {
            latch,
            until: d.alive,
            tried: false,
            wire: None,
        });
    }
    client.job = Job::Idle;
    // The call returns in this round, its undo not confirmed.
    s.undos.push((latch, round));
}

/// A tick for a count-down: its latch's sure life shortens; a reply that
/// did not come in time fails its attempt (a `count_down`'s connection
/// kept for the undo, `LateRequests::keep`; the set call's, or an undo's,
/// dropped: its request may still run late).
pub fn tick(s: &mut State, cfg: &Config, c: usize) {
    let client = &mut s.clients[c];
    let Job::Down(d) = &mut client.job else {
        return;
    };
    d.alive = d.alive.saturating_sub(1);
    let Some(wire) = client.wire.take_if(|w| w.held) else {
        return;
    };
    let undo = d.undo.is_some();
    client.trailing.push(wire.unread());
    if undo {
        undo_failed(s, c);
    } else {
        failed(s, cfg, c);
    }
}

/// The count-down's latch TTL in ms, as the call sends it.
pub fn latch_ttl_ms(cfg: &Config) -> i64 {
    match net::count_down(cfg, 0) {
        crate::call::Call::LatchCountDown { latch_ttl, .. } => latch_ttl,
        _ => unreachable!("a count-down"),
    }
}
