//! The checker's settings: client timeouts short enough that renewals,
//! expiries and latches come and go within one schedule, and the plan of
//! schedules (seeds, budget) read from the environment.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::rng::{mix, Rng};

/// Replays exactly one schedule: `REDHOLD_MODEL_SEED=<decimal seed>`.
pub(crate) const SEED_ENV: &str = "REDHOLD_MODEL_SEED";
/// The run-time budget in seconds (default [`DEFAULT_BUDGET`]).
pub(crate) const SECS_ENV: &str = "REDHOLD_MODEL_SECS";
/// Fixes the master seed the schedule seeds are derived from.
pub(crate) const MASTER_ENV: &str = "REDHOLD_MODEL_MASTER_SEED";
/// `1`: run every schedule even after one found a violation.
pub(crate) const KEEP_GOING_ENV: &str = "REDHOLD_MODEL_KEEP_GOING";
/// Watchdog timeout of every client in ms: short, so renewals (every
/// 500 ms) and expiries happen many times per schedule, yet a second above
/// the renewal period, so a loaded machine does not lose locks.
const WATCHDOG_MS: u64 = 1500;
/// [`WATCHDOG_MS`] as a duration.
pub(crate) const WATCHDOG: Duration = Duration::from_millis(WATCHDOG_MS);
/// Connect timeout of every client.
pub(crate) const CONNECT_TIMEOUT: Duration = Duration::from_millis(300);
/// Response timeout: above the longest `DEBUG SLEEP` fault, so a stall
/// delays commands rather than failing them.
pub(crate) const RESPONSE_TIMEOUT: Duration = Duration::from_millis(600);
/// Retries per command; with the timeouts above the unlock latch lives
/// 2 × 0.9 s + 50 ms + 1 s = 2.85 s (see `Config::unlock_latch_ttl`).
pub(crate) const RETRY_ATTEMPTS: u32 = 1;
/// Pause between retries.
pub(crate) const RETRY_DELAY: Duration = Duration::from_millis(50);
/// The unlock latch TTL that the settings above give.
pub(crate) const LATCH_TTL: Duration = Duration::from_millis(2850);
/// Fair wait timeout: a dead waiter blocks the queue at most this long
/// after its turn was due.
pub(crate) const FAIR_WAIT: Duration = Duration::from_secs(2);

/// Shortest and longest lease an actor asks for (ms): short enough to
/// expire mid-run, long enough to outlive a few operations.
pub(crate) const LEASE_MS: (u64, u64) = (50, 400);

/// Shortest and longest lease of a long-leased hold on a name that shares
/// a channel (ms): longer than [`LIVENESS_BOUND`], so a waiter that misses
/// the early release's wake-up (it parks for the PTTL it saw) waits past
/// the bound while the lock is free.
pub(crate) const LONG_LEASE_MS: (u64, u64) = (3500, 6000);

/// The long lease of the short-lease hand-over case (ms,
/// `actors/short_lease_handover.rs`): the TTL another client's waiter
/// parks on.
pub(crate) const HANDOVER_LEASE_MS: (u64, u64) = (5000, 7000);

/// The lease of a stalled member's call (ms, `actors/stalled_member.rs`):
/// longer than the liveness bound after the stall.
pub(crate) const MEMBER_LEASE_MS: (u64, u64) = (4000, 5000);

/// The lease a stalled drop's re-acquire may ask for (ms,
/// `actors/stalled_drop.rs`).
pub(crate) const REACQUIRE_LEASE_MS: (u64, u64) = (1000, 2999);

/// The lease of the partitioned-release case's two guards (ms,
/// `actors/partitioned_release.rs`): longer than the whole case.
pub(crate) const PARTITIONED_LEASE_MS: u64 = 15_000;

/// The longest a key of the run can live after its client's last command:
/// the watchdog timeout or the longest lease any actor asks for. A hold
/// key or hash that nobody releases (a `force_unlock` deletes a read
/// lock's hash and leaves its read-hold keys to expire, as Redisson's
/// does; a release may fail) lives that long, so the end-state check
/// (`leftovers.rs`) waits that long past the last shutdown.
pub(crate) const LONGEST_TTL: Duration = Duration::from_millis(max_of(&[
    WATCHDOG_MS,
    LEASE_MS.1,
    LONG_LEASE_MS.1,
    HANDOVER_LEASE_MS.1,
    MEMBER_LEASE_MS.1,
    REACQUIRE_LEASE_MS.1,
    PARTITIONED_LEASE_MS,
]));

/// The largest of `ms` (a `const fn`: `Ord::max` is not one).
const fn max_of(ms: &[u64]) -> u64 {
    let (mut i, mut max) = (0, 0);
    while i < ms.len() {
        if ms[i] > max {
            max = ms[i];
        }
        i += 1;
    }
    max
}

/// A waiter must get a free lock within this long (liveness).
pub(crate) const LIVENESS_BOUND: Duration = Duration::from_millis(2 * WATCHDOG_MS);
/// How long after a fault ends its effects may last: a renewal or wake-up
/// it disturbed is due again within one watchdog timeout.
pub(crate) const FAULT_TAIL: Duration = Duration::from_millis(WATCHDOG_MS + 300);

/// Threads per client.
pub(crate) const THREADS_PER_CLIENT: usize = 3;
/// Clients in the test process when no child processes take part.
pub(crate) const LOCAL_CLIENTS: usize = 3;
/// With child processes: clients in the test process, and processes.
pub(crate) const LOCAL_CLIENTS_WITH_CHILDREN: usize = 2;
/// Child processes (one client each) when a schedule uses them.
pub(crate) const CHILDREN: usize = 2;

/// Default run-time budget: the schedules' run phases add up to this;
/// wind-down and set-up add a few seconds on top.
pub(crate) const DEFAULT_BUDGET: Duration = Duration::from_secs(50);
/// Run phase of one schedule.
pub(crate) const SCHEDULE_LENGTH: Duration = Duration::from_secs(10);

/// What a schedule exercises besides the lock operations: the mode is
/// part of the seed (its top two bits), so a replayed seed gets the same.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Mode {
    /// A fault thread kills connections, stalls and restarts servers.
    pub(crate) faults: bool,
    /// Two of the clients live in child processes.
    pub(crate) children: bool,
}

impl Mode {
    /// The mode encoded in `seed`.
    pub(crate) fn of(seed: u64) -> Mode {
        Mode {
            children: seed >> 63 == 1,
            faults: (seed >> 62) & 1 == 1,
        }
    }

    /// `seed` with its mode bits replaced by `n % 4`'s.
    fn stamp(seed: u64, n: usize) -> u64 {
        (seed & !(3 << 62)) | (((n % 4) as u64) << 62)
    }
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let what = match (self.children, self.faults) {
            (false, false) => "threads",
            (false, true) => "threads+faults",
            (true, false) => "processes",
            (true, true) => "processes+faults",
        };
        f.write_str(what)
    }
}

/// One schedule to run.
#[derive(Debug, Clone)]
pub(crate) struct Spec {
    /// 1-based position in the plan.
    pub(crate) index: usize,
    /// Everything random in the schedule derives from this.
    pub(crate) seed: u64,
    /// How long the actors run.
    pub(crate) run_for: Duration,
}

impl Spec {
    /// The schedule's mode.
    pub(crate) fn mode(&self) -> Mode {
        Mode::of(self.seed)
    }
}

/// The schedules of one test run.
#[derive(Debug)]
pub(crate) struct Plan {
    /// The seed the schedules' seeds come from (`None` for a replay).
    pub(crate) master: Option<u64>,
    /// In order.
    pub(crate) schedules: Vec<Spec>,
    /// Whether to go on after a schedule with violations.
    pub(crate) keep_going: bool,
}

impl Plan {
    /// Reads the environment: a replay of one seed, or schedules derived
    /// from a master seed (the clock's, unless fixed) that fill the budget.
    /// Schedule `i` gets mode `i % 4`, so every mode runs in a default run.
    ///
    /// # Panics
    ///
    /// On a malformed variable: a typo must not silently test something
    /// else.
    pub(crate) fn from_env() -> Plan {
        let number = |name: &str| {
            std::env::var(name).ok().map(|v| {
                v.trim()
                    .parse::<u64>()
                    .unwrap_or_else(|e| panic!("{name}={v:?} is not a whole number: {e}"))
            })
        };
        let budget = number(SECS_ENV).map_or(DEFAULT_BUDGET, Duration::from_secs);
        let keep_going = std::env::var(KEEP_GOING_ENV).is_ok_and(|v| v == "1");
        if let Some(seed) = number(SEED_ENV) {
            return Plan {
                master: None,
                schedules: vec![Spec {
                    index: 1,
                    seed,
                    run_for: budget.min(SCHEDULE_LENGTH),
                }],
                keep_going,
            };
        }
        let master = number(MASTER_ENV).unwrap_or_else(|| {
            let now = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(1);
            mix(now ^ u64::from(std::process::id()))
        });
        let count = (budget.as_secs_f64() / SCHEDULE_LENGTH.as_secs_f64()).ceil() as usize;
        let count = count.max(1);
        let length = budget.div_f64(count as f64).max(Duration::from_secs(2));
        let mut seeds = Rng::new(master);
        let schedules = (0..count)
            .map(|i| Spec {
                index: i + 1,
                seed: Mode::stamp(seeds.next_u64(), i),
                run_for: length,
            })
            .collect();
        Plan {
            master: Some(master),
            schedules,
            keep_going,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mode_travels_with_the_seed() {
        let modes: Vec<Mode> = (0..4).map(|i| Mode::of(Mode::stamp(u64::MAX, i))).collect();
        assert_eq!(
            modes[0],
            Mode {
                faults: false,
                children: false
            }
        );
        assert_eq!(
            modes[1],
            Mode {
                faults: true,
                children: false
            }
        );
        assert_eq!(
            modes[2],
            Mode {
                faults: false,
                children: true
            }
        );
        assert_eq!(
            modes[3],
            Mode {
                faults: true,
                children: true
            }
        );
    }
}
