//! A thread's `count_down` call (`CountDownLatch::count_down`), and the
//! `try_set_count` that arms the latch (`CountDownLatch::try_set_count`):
//! one request id for the whole call (`Server::unlock_latch`), sent under
//! the pool's retry rule (`Server::run_write`, `Pool::run_attempts`: a cut
//! or a timeout retried on a new connection while retries are left; no
//! deadline), the timed-out attempt's connection dropped (the server may
//! still run it).

use super::net;
use super::state::{Down, Job, Req, State, Wire};
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
        s.clients[c].job = Job::Idle;
        return;
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

/// A tick for a count-down whose reply did not come: the attempt timed
/// out, its connection dropped (its request may still run late).
pub fn tick(s: &mut State, cfg: &Config, c: usize) {
    let client = &mut s.clients[c];
    if !matches!(client.job, Job::Down(_)) {
        return;
    }
    let Some(wire) = client.wire.take_if(|w| w.held) else {
        return;
    };
    client.trailing.push(wire.unread());
    failed(s, cfg, c);
}

/// The count-down's latch TTL in ms, as the call sends it.
pub fn latch_ttl_ms(cfg: &Config) -> i64 {
    match net::count_down(cfg, 0) {
        crate::call::Call::LatchCountDown { latch_ttl, .. } => latch_ttl,
        _ => unreachable!("a count-down"),
    }
}
