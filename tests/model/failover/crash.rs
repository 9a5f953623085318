//! The fault thread: take the master's role away while its replica misses
//! writes the master confirmed (a crash and a Sentinel failover, or a
//! forced Cluster failover), bring the old master back as a replica of the
//! new one, and again.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Receiver;
use std::thread;
use std::time::{Duration, Instant};

use crate::rng::Rng;

/// How long the deployment may take to be whole again after a rejoin.
const HEAL_LIMIT: Duration = Duration::from_secs(60);

/// A deployment of a master and its replica that the fault thread can
/// fail over, nodes named by index.
pub(crate) trait Deployment {
    /// The master (of the locks' data) once its replica acknowledges
    /// writes, so that the next failover can only lose what was written
    /// after the starving began; `None` if not so within `limit`.
    fn wait_healthy(&self, limit: Duration) -> Option<usize>;
    /// Starts losing what `master` sends to its replica.
    fn starve_replica_of(&self, master: usize);
    /// Takes the role away from `master`, waits until its replica has it
    /// and brings the old master back as a replica of the new one.
    /// Returns how many replication bytes were lost, or why it failed.
    fn fail_over(&mut self, master: usize) -> Result<u64, String>;
    /// How many failovers happened, per the deployment's own logs: the
    /// planned ones and any it made on its own.
    fn switches(&self) -> u64;
    /// What every process says, for a failure message.
    fn describe(&self) -> String;
}

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

/// One failover: when the replica stopped receiving, when the master lost
/// its role (killed, or the failover forced).
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

/// Fails masters over until `done` says so.
pub(crate) fn run(
    topology: &mut impl Deployment,
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
        out.crashes.push(Crash {
            starved_at,
            killed_at,
        });
        match topology.fail_over(master) {
            Ok(withheld) => out.withheld_bytes += withheld,
            Err(problem) => {
                out.problem = Some(problem);
                break;
            }
        }
        out.failovers += 1;
    }
    out
}
