//! The release worker (`lane/worker.rs`): a round on a lane whose turn is
//! free and that keeps entries settles them in order within one response
//! timeout, and gives the turn back. Its pauses between rounds are left
//! out: it may start a round at any moment, or stay idle for any time.

use super::config::Config;
use super::job::Settle;
use super::settle::{settle, Settled, Settler};
use super::state::{State, Taker};

/// Whether the worker of `c` may start a round on `lane`.
pub fn may_start(s: &State, c: u8, lane: u8) -> bool {
    let client = &s.clients[usize::from(c)];
    let lane = &client.threads[usize::from(lane)].lane;
    client.up && client.worker.at.is_none() && lane.taken.is_none() && !lane.entries.is_empty()
}

/// Starts a round on `lane` (`try_take_turn`) and runs it.
pub fn start(cfg: &Config, s: &mut State, c: u8, lane: u8) {
    s.thread_mut(c, lane).lane.taken = Some(Taker::Worker);
    s.clients[usize::from(c)].worker.at = Some((lane, Settle::within(1)));
    go(cfg, s, c);
}

/// Runs the worker's round until it waits or ends.
pub fn go(cfg: &Config, s: &mut State, c: u8) {
    let Some((lane, mut st)) = s.clients[usize::from(c)].worker.at.take() else {
        return;
    };
    match settle(cfg, s, c, lane, &mut st, Settler::Worker) {
        Settled::Blocked => s.clients[usize::from(c)].worker.at = Some((lane, st)),
        Settled::Done | Settled::NotYet => {
            let lane = &mut s.thread_mut(c, lane).lane;
            if lane.taken == Some(Taker::Worker) {
                lane.taken = None;
            }
        }
    }
}
