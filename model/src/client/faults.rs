//! Faults as transitions, each costing one of the run's budget (a heal
//! costs nothing): a connection cut, a request or reply held back, a
//! client partitioned, the server restarted without persistence, a
//! client's pub/sub connection dropped, a client crashed, a failover to
//! the lagging replica (`replica.rs`).

use super::config::{Config, Fault};
use super::job::Job;
use super::pubsub;
use super::state::{Lane, State, WireId};
use crate::keyspace::Keyspace;

/// One fault, or a partition's end.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FaultAction {
    /// Cut a connection.
    Cut(WireId),
    /// Hold a connection's request (or reply) back past the timeout.
    HoldBack(WireId),
    /// Cut a client off from the server.
    Partition(u8),
    /// End a client's partition (no cost).
    Heal(u8),
    /// Restart the server without persistence.
    Restart,
    /// Drop a client's pub/sub connection.
    PubSubDrop(u8),
    /// Crash a client.
    Crash(u8),
    /// Promote the lagging replica.
    Failover,
}

/// The faults possible in `s`.
pub fn enabled(cfg: &Config, s: &State, out: &mut Vec<FaultAction>) {
    for (c, client) in s.clients.iter().enumerate() {
        if client.partitioned {
            out.push(FaultAction::Heal(c as u8));
        }
    }
    if s.faults_left == 0 {
        return;
    }
    for (w, wire) in s.wires.iter().enumerate() {
        let busy = !wire.requests.is_empty() || !wire.replies.is_empty();
        if cfg.allows(Fault::Cut) && !wire.cut && busy {
            out.push(FaultAction::Cut(w as WireId));
        }
        if cfg.allows(Fault::HoldBack) && !wire.cut && !wire.silent && !wire.held && busy {
            out.push(FaultAction::HoldBack(w as WireId));
        }
    }
    if cfg.allows(Fault::Restart) {
        out.push(FaultAction::Restart);
    }
    if super::replica::may_fail_over(cfg, s) {
        out.push(FaultAction::Failover);
    }
    for (c, client) in s.clients.iter().enumerate() {
        let c = c as u8;
        if !client.up {
            continue;
        }
        if cfg.allows(Fault::Partition) && !client.partitioned {
            out.push(FaultAction::Partition(c));
        }
        if cfg.allows(Fault::PubSubDrop) && client.subscribed {
            out.push(FaultAction::PubSubDrop(c));
        }
        if cfg.allows(Fault::Crash) {
            out.push(FaultAction::Crash(c));
        }
    }
}

/// Injects `fault`.
pub fn apply(cfg: &Config, s: &mut State, fault: FaultAction) {
    if !matches!(fault, FaultAction::Heal(_)) {
        s.faults_left -= 1;
    }
    match fault {
        FaultAction::Cut(w) => cut(s, w),
        FaultAction::HoldBack(w) => {
            let wire = &mut s.wires[usize::from(w)];
            wire.held = true;
            wire.aged = false;
        }
        FaultAction::Partition(c) => {
            s.clients[usize::from(c)].partitioned = true;
            s.clients[usize::from(c)].inbox = 0;
            cut_all(s, |wire_client, _| wire_client == c);
        }
        FaultAction::Heal(c) => {
            s.clients[usize::from(c)].partitioned = false;
            cut_all(s, |wire_client, silent| wire_client == c && silent);
            pubsub::wake_all(cfg, s, c);
        }
        FaultAction::Restart => {
            cut_all(s, |_, _| true);
            s.redis = Keyspace::new();
            for c in 0..s.clients.len() as u8 {
                for thread in &mut s.clients[usize::from(c)].threads {
                    if thread.gen.is_some() {
                        thread.ghost.wiped = true;
                    }
                }
                pubsub::wake_all(cfg, s, c);
            }
        }
        FaultAction::PubSubDrop(c) => pubsub::wake_all(cfg, s, c),
        FaultAction::Failover => super::replica::fail_over(cfg, s),
        FaultAction::Crash(c) => {
            cut_all(s, |wire_client, _| wire_client == c);
            let client = &mut s.clients[usize::from(c)];
            client.up = false;
            client.inbox = 0;
            client.subscribed = false;
            client.worker.at = None;
            for thread in &mut client.threads {
                thread.job = Job::Dead;
                thread.gen = None;
                thread.lane = Lane::default();
                thread.ghost = Default::default();
            }
        }
    }
}

/// Cuts every connection `which` names (by client, and whether silent).
pub fn cut_all(s: &mut State, which: impl Fn(u8, bool) -> bool) {
    for w in 0..s.wires.len() {
        let wire = &s.wires[w];
        if !wire.cut && which(wire.client, wire.silent) {
            cut(s, w as WireId);
        }
    }
}

/// Cuts `w`: its requests not run yet never will, its replies are lost.
/// An undo behind a late acquire is sent again once its connection failed
/// (`undo.rs`), and one that could not follow its late attempt's cut
/// connection is kept unwritten, to be sent on another (`finish.rs`).
fn cut(s: &mut State, w: WireId) {
    let wire = &mut s.wires[usize::from(w)];
    wire.cut = true;
    wire.requests.clear();
    wire.replies.clear();
}
