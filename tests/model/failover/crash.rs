//! The fault thread: crash the master with writes its replica never got,
//! let the sentinels promote the replica, bring the old master back as a
//! replica of the new one, and again.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Receiver;
use std::thread;
use std::time::{Duration, Instant};

use super::topology::Topology;
use crate::rng::Rng;

/// How long a crash may take to become a promotion.
const PROMOTION_LIMIT: Duration = Duration::from_secs(30);
/// How long the deployment may take to be whole again after a rejoin.
const HEAL_LIMIT: Duration = Duration::from_secs(60);

/// When the master dies, relative to the replication it withholds.
#[derive(Debug, Clone, Copy)]
enum KillAt {
    /// Starve the replica, then kill right after the next acquire returns
    /// (the worst moment: without `WAIT` that acquire's write is on the
    /// master only), or after a random pause when none returns (with
    /// `WAIT` none can).
    NextAcquire,
    /// Starve the replica, kill after a random pause: in the middle of
    /// whatever the actors are doing (acquires, releases, renewals, WAITs).
    Anytime,
    /// Kill right after an acquire returns, starving the replica only then:
    /// with `WAIT` that acquire is on the replica, the promotion must keep
    /// it.
    AfterAcquire,
}

/// One crash: when the replica stopped receiving, when the master died.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Crash {
    pub(crate) starved_at: Instant,
    pub(crate) killed_at: Instant,
}

/// What the fault thread shares with the actors.
#[derive(Debug, Default)]
pub(crate) struct Trigger {
    /// Set while the fault thread waits for an acquire to return; the
    /// actor that swaps it off sends on the channel and holds long.
    pub(crate) armed: AtomicBool,
}

/// What the fault thread did.
#[derive(Debug, Default)]
pub(crate) struct Outcome {
    pub(crate) crashes: Vec<Crash>,
    pub(crate) failovers: u64,
    pub(crate) withheld_bytes: u64,
    /// Why it stopped early, if it did (the deployment did not heal).
    pub(crate) problem: Option<String>,
}

/// Crashes masters until `done` says so.
pub(crate) fn run(
    topology: &mut Topology,
    seed: u64,
    trigger: &Trigger,
    fired: &Receiver<()>,
    done: impl Fn(u64) -> bool,
) -> Outcome {
    let mut rng = Rng::stream(seed, 1000);
    let mut out = Outcome::default();
    while !done(out.failovers) {
        let Some(master) = topology.wait_healthy(HEAL_LIMIT) else {
            out.problem = Some(format!(
                "not healthy within {HEAL_LIMIT:?}: {}",
                topology.describe()
            ));
            break;
        };
        let replica = 1 - master;
        thread::sleep(rng.millis(300, 1500));
        while fired.try_recv().is_ok() {}
        let kind = rng.weighted(&[
            (2, KillAt::NextAcquire),
            (1, KillAt::Anytime),
            (1, KillAt::AfterAcquire),
        ]);
        let starved_at = match kind {
            KillAt::NextAcquire => {
                topology.starve_replica_of(master);
                let at = Instant::now();
                trigger.armed.store(true, Ordering::SeqCst);
                let _ = fired.recv_timeout(rng.millis(300, 1500));
                trigger.armed.store(false, Ordering::SeqCst);
                at
            }
            KillAt::Anytime => {
                topology.starve_replica_of(master);
                let at = Instant::now();
                thread::sleep(rng.millis(0, 800));
                at
            }
            KillAt::AfterAcquire => {
                trigger.armed.store(true, Ordering::SeqCst);
                let _ = fired.recv_timeout(Duration::from_millis(1500));
                trigger.armed.store(false, Ordering::SeqCst);
                topology.starve_replica_of(master);
                Instant::now()
            }
        };
        let killed_at = Instant::now();
        let withheld = topology.crash(master);
        out.crashes.push(Crash {
            starved_at,
            killed_at,
        });
        out.withheld_bytes += withheld;
        if !topology.wait_promoted(replica, PROMOTION_LIMIT) {
            out.problem = Some(format!(
                "no promotion within {PROMOTION_LIMIT:?}: {}",
                topology.describe()
            ));
            break;
        }
        out.failovers += 1;
        topology.rejoin(master, replica);
    }
    out
}
