//! Readings from `/proc` (Linux): CPU time of this process, of another
//! process and of the whole machine, and this process's resident memory.
//!
//! The parked-thread CPU figure, the 10k-lock RSS figure and the machine
//! noise estimate are all built from these.

/// Busy ticks of all CPUs together (`/proc/stat` "cpu" line, minus idle and
/// iowait).
pub(crate) fn machine_busy_ticks() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal (guest time is already
    // inside user/nice)
    let sum: u64 = v.iter().take(8).sum();
    Some(sum - v.get(3).copied().unwrap_or(0) - v.get(4).copied().unwrap_or(0))
}

/// utime + stime of this process, in clock ticks.
pub(crate) fn proc_cpu_ticks() -> u64 {
    stat_cpu_ticks("/proc/self/stat")
}

/// utime + stime of process `pid`, in clock ticks.
pub(crate) fn pid_cpu_ticks(pid: u32) -> u64 {
    stat_cpu_ticks(&format!("/proc/{pid}/stat"))
}

fn stat_cpu_ticks(path: &str) -> u64 {
    let stat = std::fs::read_to_string(path).unwrap_or_default();
    // Fields after the ")" that ends the command name: state is field 3, so
    // utime (14) and stime (15) are at indices 11 and 12.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    let get = |i: usize| f.get(i).and_then(|s| s.parse::<u64>().ok()).unwrap_or(0);
    get(11) + get(12)
}

/// Sum over this process's threads of nanoseconds spent on a CPU, from
/// one [`thread_schedstat_ns`] reading; `None` when `/proc` gave none.
pub(crate) fn total_schedstat_ns(threads: &[ThreadCpu]) -> Option<u64> {
    (!threads.is_empty()).then(|| threads.iter().map(|t| t.ns).sum())
}

pub(crate) fn clock_ticks_per_s() -> f64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse::<f64>().ok())
        .unwrap_or(100.0)
}

/// This process's resident set size (`VmRSS`), in bytes.
pub(crate) fn vm_rss_bytes() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    s.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map(|kb| kb * 1024)
        .unwrap_or(0)
}

/// One thread of this process and the CPU time it has used so far.
pub(crate) struct ThreadCpu {
    pub(crate) tid: u32,
    /// Its name (`comm`), as the kernel shortens it.
    pub(crate) name: String,
    /// Nanoseconds spent on a CPU (`schedstat`).
    pub(crate) ns: u64,
}

/// Every thread of this process, where `/proc` gives them.
pub(crate) fn thread_schedstat_ns() -> Vec<ThreadCpu> {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return Vec::new();
    };
    tasks
        .filter_map(|entry| {
            let path = entry.ok()?.path();
            let tid = path.file_name()?.to_str()?.parse().ok()?;
            let name = std::fs::read_to_string(path.join("comm")).ok()?;
            let ns = std::fs::read_to_string(path.join("schedstat")).ok()?;
            let ns = ns.split_whitespace().next()?.parse().ok()?;
            Some(ThreadCpu {
                tid,
                name: name.trim().to_string(),
                ns,
            })
        })
        .collect()
}
