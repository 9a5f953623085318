//! Actor threads, one client each: take a plain lock on one of two names,
//! hold it a while, release it, and record the hold.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use redhold::{Client, ClientBuilder, Error};

use super::crash::Trigger;
use crate::rng::Rng;

/// Names the actors contend on (one hash slot, for the cluster).
const NAMES: [&str; 2] = ["{fo}a", "{fo}b"];
/// How long the actor whose acquire triggered a crash holds on: longer
/// than a promotion (~4 s with down-after 2 s) plus the others' reconnect,
/// so that, when the crash lost its lock, another actor can take it while
/// it still holds; and longer than a renewal period (20 s / 3), so that
/// its watchdog meets the new master too (`on_lock_lost`).
const TRIGGER_HOLD: Duration = Duration::from_secs(8);

/// One critical section, as its actor saw it.
#[derive(Debug)]
pub(crate) struct Hold {
    pub(crate) name: &'static str,
    pub(crate) actor: usize,
    /// When the acquire call began.
    pub(crate) asked: Instant,
    /// When it returned the guard: the section starts.
    pub(crate) start: Instant,
    /// Just before the release is sent: the section ends (the real hold
    /// contains `start..end`).
    pub(crate) end: Instant,
    /// The client said the hold was lost (`on_lock_lost` during it, or
    /// `LockLost` from its release).
    pub(crate) reported_lost: bool,
    /// What the release said, in a word.
    pub(crate) release: &'static str,
}

/// Counters the actors share.
#[derive(Debug, Default)]
pub(crate) struct Tallies {
    /// Acquires that failed with `ReplicasNotSynced` (undone).
    pub(crate) refused_unsynced: AtomicU64,
    /// `on_lock_lost` calls, all clients together.
    pub(crate) lost_callbacks: AtomicU64,
}

/// Builds one actor's client on `base` (how to reach the deployment);
/// `lost` is set by its `on_lock_lost`.
pub(crate) fn client(
    base: ClientBuilder,
    sync: bool,
    lost: Arc<AtomicBool>,
    tallies: Arc<Tallies>,
) -> Client {
    try_client(base, sync, lost, tallies).expect("a client of the failover deployment")
}

/// As [`client`], failing when the deployment cannot be reached (in the
/// middle of a failover, say).
pub(crate) fn try_client(
    base: ClientBuilder,
    sync: bool,
    lost: Arc<AtomicBool>,
    tallies: Arc<Tallies>,
) -> Result<Client, Error> {
    let mut b = base
        .connect_timeout(Duration::from_secs(1))
        .response_timeout(Duration::from_secs(1))
        // Longer than the time a hold goes unrenewed across a crash
        // (renewal period 6.7 s + starving <= 1.5 s + promotion ~4 s +
        // reconnect): the measurement is about replication, not about a
        // lease that ran out during the outage.
        .watchdog_timeout(Duration::from_secs(20))
        .on_lock_lost(move |_| {
            lost.store(true, Ordering::SeqCst);
            tallies.lost_callbacks.fetch_add(1, Ordering::Relaxed);
        });
    if sync {
        b = b.sync_replicas(1, Duration::from_millis(500));
    }
    b.build()
}

/// What one actor needs.
pub(crate) struct Actor<'a> {
    pub(crate) id: usize,
    pub(crate) client: Client,
    pub(crate) lost: Arc<AtomicBool>,
    pub(crate) stop: &'a AtomicBool,
    pub(crate) trigger: &'a Trigger,
    pub(crate) fired: Sender<()>,
    pub(crate) holds: &'a Mutex<Vec<Hold>>,
    pub(crate) tallies: &'a Tallies,
    /// When set, the actor starts a new client before each section: a
    /// program that starts while the deployment is split finds the master
    /// through the sentinels, wherever the others are.
    pub(crate) newcomer: Option<Box<dyn Fn() -> Result<Client, Error> + Send + 'a>>,
}

impl Actor<'_> {
    /// Takes, holds and releases locks until told to stop.
    pub(crate) fn run(mut self, seed: u64) {
        let mut rng = Rng::stream(seed, self.id as u64);
        while !self.stop.load(Ordering::SeqCst) {
            if let Some(start_client) = &self.newcomer {
                match start_client() {
                    Ok(fresh) => {
                        let _ = std::mem::replace(&mut self.client, fresh).shutdown();
                    }
                    Err(_) => {
                        thread::sleep(Duration::from_millis(50));
                        continue;
                    }
                }
            }
            let name = *rng.pick(&NAMES);
            self.lost.store(false, Ordering::SeqCst);
            let asked = Instant::now();
            let guard = match self.client.lock(name).try_lock_for(Duration::from_secs(1)) {
                Ok(Some(guard)) => guard,
                Ok(None) => continue,
                Err(Error::ReplicasNotSynced { .. }) => {
                    self.tallies
                        .refused_unsynced
                        .fetch_add(1, Ordering::Relaxed);
                    continue;
                }
                Err(_) => {
                    thread::sleep(Duration::from_millis(50));
                    continue;
                }
            };
            let start = Instant::now();
            let hold_for = if self.trigger.armed.swap(false, Ordering::SeqCst) {
                let _ = self.fired.send(());
                TRIGGER_HOLD
            } else if rng.chance(5) {
                rng.millis(1000, 3000)
            } else {
                rng.millis(10, 100)
            };
            thread::sleep(hold_for);
            let end = Instant::now();
            let released = guard.unlock();
            let release = match &released {
                Ok(()) => "ok",
                Err(Error::LockLost { .. }) => "lost",
                Err(Error::ReplicasNotSynced { .. }) => "not replicated",
                Err(_) => "error",
            };
            self.holds.lock().unwrap().push(Hold {
                name,
                actor: self.id,
                asked,
                start,
                end,
                reported_lost: release == "lost" || self.lost.load(Ordering::SeqCst),
                release,
            });
        }
        let _ = self.client.shutdown();
    }
}
