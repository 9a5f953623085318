//! A thread's `count_down` call (`CountDownLatch::count_down`): one
//! request id for the whole call (`Server::unlock_latch`), sent under the
//! pool's retry rule (`Pool::run_attempts`: a cut or a timeout retried on
//! a new connection while retries are left; no deadline), the timed-out
//! attempt's connection dropped (the server may still run it).

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
    });
    client.wire = Some(Wire::send(Req::CountDown(latch)));
}

/// The thread reads its attempt's reply (the call returns the count left)
/// or the error of a cut.
pub fn read(s: &mut State, cfg: &Config, c: usize) {
    let wire = s.clients[c].wire.take().expect("a connection to read");
    if wire.cut {
        failed(s, cfg, c);
    } else {
        s.clients[c].job = Job::Idle;
    }
}

/// An attempt failed (a cut, or no reply within the response timeout):
/// the pool retries under the same latch (`run_attempts`: `op` names the
/// call's latch), or the call returns the error (the count-down may or may
/// not have run).
pub fn failed(s: &mut State, cfg: &Config, c: usize) {
    let retry = match &mut s.clients[c].job {
        Job::Down(d) if d.retries_left > 0 => {
            d.retries_left -= 1;
            Some(d.latch)
        }
        Job::Down(_) => None,
        _ => unreachable!("not a count-down"),
    };
    let Some(mut latch) = retry else {
        s.clients[c].job = Job::Idle;
        return;
    };
    if cfg.mutated(LatchMutation::CountDownRetryNotLatched) {
        latch = fresh(s);
        if let Job::Down(d) = &mut s.clients[c].job {
            d.latch = latch;
        }
    }
    s.clients[c].wire = Some(Wire::send(Req::CountDown(latch)));
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
