//! What the proofs measure of this process, from `/proc`: its threads and
//! their names, and its CPU time.

use std::fs;
use std::sync::OnceLock;
use std::time::Duration;

/// One thread of this process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Task {
    pub(crate) tid: u32,
    /// Its name (`comm`: the first 15 bytes of the name it was given).
    pub(crate) name: String,
}

/// The threads of this process now.
pub(crate) fn threads() -> Vec<Task> {
    let mut tasks: Vec<Task> = fs::read_dir("/proc/self/task")
        .expect("/proc/self/task")
        .filter_map(|entry| {
            let entry = entry.ok()?;
            let tid = entry.file_name().to_str()?.parse().ok()?;
            // A thread that ended since the listing has no comm any more.
            let name = fs::read_to_string(entry.path().join("comm")).ok()?;
            Some(Task {
                tid,
                name: name.trim_end().to_owned(),
            })
        })
        .collect();
    tasks.sort_by_key(|t| t.tid);
    tasks
}

/// How many of this process's threads carry each name, for messages.
pub(crate) fn thread_census() -> String {
    let mut names: Vec<String> = threads().into_iter().map(|t| t.name).collect();
    names.sort();
    let mut census: Vec<(String, usize)> = Vec::new();
    for name in names {
        match census.last_mut() {
            Some((last, n)) if *last == name => *n += 1,
            _ => census.push((name, 1)),
        }
    }
    census
        .iter()
        .map(|(name, n)| format!("{name} x{n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// CPU time (user and system) of this whole process so far, from
/// `/proc/self/stat`: in clock ticks, so to the nearest 10 ms or so.
pub(crate) fn process_cpu() -> Duration {
    let stat = fs::read_to_string("/proc/self/stat").expect("/proc/self/stat");
    // The command name may hold spaces: the fields count from its `)`.
    let after = &stat[stat.rfind(')').expect("stat has a comm") + 2..];
    let fields: Vec<&str> = after.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the whole line, so 12 and 13
    // after the state (field 3).
    let ticks: u64 =
        fields[11].parse::<u64>().expect("utime") + fields[12].parse::<u64>().expect("stime");
    Duration::from_secs_f64(ticks as f64 / clock_ticks() as f64)
}

/// CPU time of this process's live threads, to the nanosecond (the first
/// field of each `/proc/self/task/*/schedstat`). Threads that ended are
/// not counted: compare it over a window in which none ends.
pub(crate) fn threads_cpu() -> Duration {
    let total: u64 = threads()
        .iter()
        .filter_map(|t| fs::read_to_string(format!("/proc/self/task/{}/schedstat", t.tid)).ok())
        .filter_map(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .sum();
    Duration::from_nanos(total)
}

/// The clock ticks per second of `/proc/self/stat` (`getconf CLK_TCK`).
fn clock_ticks() -> u64 {
    static TICKS: OnceLock<u64> = OnceLock::new();
    *TICKS.get_or_init(|| {
        std::process::Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|out| String::from_utf8(out.stdout).ok())
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(100)
    })
}
