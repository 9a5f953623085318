//! Machine noise: how much CPU the rest of the machine used during the run.
//!
//! Latency figures on a busy machine are noisy; the report says so when
//! other processes took more than a few percent of the CPU, so that a missed
//! target can be told apart from a loaded machine.

use std::thread;
use std::time::Instant;

use crate::proc::{clock_ticks_per_s, machine_busy_ticks, pid_cpu_ticks, proc_cpu_ticks};

/// How busy the rest of the machine was during the run: CPU time of all
/// processes (from `/proc/stat`) minus this process and the private
/// `redis-server`, as a share of all cores.
pub(crate) struct Noise {
    redis_pid: Option<u32>,
    t0: Instant,
    busy0: u64,
    own0: u64,
}

impl Noise {
    pub(crate) fn start(redis_pid: Option<u32>) -> Noise {
        Noise {
            redis_pid,
            t0: Instant::now(),
            busy0: machine_busy_ticks().unwrap_or(0),
            own0: proc_cpu_ticks() + redis_pid.map(pid_cpu_ticks).unwrap_or(0),
        }
    }
    /// Percent of the machine (all cores) used by other processes; `None`
    /// when `/proc/stat` cannot be read.
    pub(crate) fn finish(&self) -> Option<f64> {
        let busy = machine_busy_ticks()?;
        let own = proc_cpu_ticks() + self.redis_pid.map(pid_cpu_ticks).unwrap_or(0);
        let cores = thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1) as f64;
        let total = self.t0.elapsed().as_secs_f64() * clock_ticks_per_s() * cores;
        let other = busy.saturating_sub(self.busy0) as f64 - own.saturating_sub(self.own0) as f64;
        Some((other.max(0.0) / total * 100.0).min(100.0))
    }
}
