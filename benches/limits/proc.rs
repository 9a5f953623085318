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

/// Sum over this process's threads of nanoseconds spent on a CPU.
pub(crate) fn proc_schedstat_ns() -> Option<u64> {
    let mut total = 0u64;
    for entry in std::fs::read_dir("/proc/self/task").ok()? {
        let path = entry.ok()?.path().join("schedstat");
        if let Ok(s) = std::fs::read_to_string(path) {
            total += s.split_whitespace().next()?.parse::<u64>().ok()?;
        }
    }
    Some(total)
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

/// Each thread of this process: its id, its name (`comm`) and nanoseconds
/// spent on a CPU so far, where `/proc` gives them.
pub(crate) fn thread_schedstat_ns() -> Vec<(u32, String, u64)> {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return Vec::new();
    };
    tasks
        .filter_map(|entry| {
            let path = entry.ok()?.path();
            let tid = path.file_name()?.to_str()?.parse().ok()?;
            let comm = std::fs::read_to_string(path.join("comm")).ok()?;
            let ns = std::fs::read_to_string(path.join("schedstat")).ok()?;
            let ns = ns.split_whitespace().next()?.parse().ok()?;
            Some((tid, comm.trim().to_string(), ns))
        })
        .collect()
}
