//! The Redis server under test, seen from outside the library: a plain
//! connection, its `INFO` counters (server time per EVALSHA), its version
//! and pid, and its URL with any password hidden.

use crate::common::BenchServer;

/// A plain `redis` crate connection; panics if the server does not answer.
pub(crate) fn raw_conn(url: &str) -> redis::Connection {
    redis::Client::open(url)
        .and_then(|c| c.get_connection())
        .unwrap_or_else(|e| panic!("redis: cannot connect to {}: {e}", redact(url)))
}

/// Server-side EVALSHA counters (`INFO commandstats`).
#[derive(Clone, Copy, Default)]
pub(crate) struct EvalshaStats {
    calls: u64,
    usec: u64,
}

impl EvalshaStats {
    /// Mean server time per EVALSHA, in µs.
    pub(crate) fn per_call(self) -> f64 {
        if self.calls == 0 {
            f64::NAN
        } else {
            self.usec as f64 / self.calls as f64
        }
    }
}

impl std::ops::Add for EvalshaStats {
    type Output = EvalshaStats;
    fn add(self, o: EvalshaStats) -> EvalshaStats {
        EvalshaStats {
            calls: self.calls + o.calls,
            usec: self.usec + o.usec,
        }
    }
}

/// Runs `f` and returns the server's EVALSHA calls and time during it.
pub(crate) fn with_server_stats<T>(
    con: &mut redis::Connection,
    f: impl FnOnce() -> T,
) -> (T, EvalshaStats) {
    let before = evalsha_server_usec(con);
    let out = f();
    let after = evalsha_server_usec(con);
    (
        out,
        EvalshaStats {
            calls: after.calls.saturating_sub(before.calls),
            usec: after.usec.saturating_sub(before.usec),
        },
    )
}

fn evalsha_server_usec(con: &mut redis::Connection) -> EvalshaStats {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(con)
        .expect("INFO commandstats");
    EvalshaStats {
        calls: info_field(&info, "cmdstat_evalsha:", "calls="),
        usec: info_field(&info, "cmdstat_evalsha:", "usec="),
    }
}

/// A number from `INFO` output: the line starting with `line_prefix`, then
/// either the whole rest of it (`key` empty) or its `key=` field.
pub(crate) fn info_field(info: &str, line_prefix: &str, key: &str) -> u64 {
    info.lines()
        .find_map(|l| l.strip_prefix(line_prefix))
        .and_then(|rest| {
            if key.is_empty() {
                Some(rest.trim())
            } else {
                rest.split(',').find_map(|kv| kv.strip_prefix(key))
            }
        })
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

/// The pid of the server, whose CPU is not "other" load: ours, or the one a
/// local `REDIS_URL` server reports.
pub(crate) fn pid(server: &BenchServer) -> Option<u32> {
    server.pid().or_else(|| local_server_pid(&server.url))
}

/// The pid of a server on this machine (from `INFO server`), if the URL
/// points at loopback and that pid is visible here.
fn local_server_pid(url: &str) -> Option<u32> {
    if !["127.0.0.1", "localhost", "[::1]"]
        .iter()
        .any(|h| url.contains(h))
    {
        return None;
    }
    let mut con = redis::Client::open(url).ok()?.get_connection().ok()?;
    let info: String = redis::cmd("INFO").arg("server").query(&mut con).ok()?;
    let pid: u32 = info
        .lines()
        .find_map(|l| l.strip_prefix("process_id:"))?
        .trim()
        .parse()
        .ok()?;
    std::path::Path::new(&format!("/proc/{pid}/stat"))
        .exists()
        .then_some(pid)
}

pub(crate) fn server_version(url: &str) -> Option<String> {
    let mut con = redis::Client::open(url).ok()?.get_connection().ok()?;
    let info: String = redis::cmd("INFO").arg("server").query(&mut con).ok()?;
    info.lines()
        .find_map(|l| l.strip_prefix("redis_version:"))
        .map(|v| v.trim().to_string())
}

pub(crate) fn redact(url: &str) -> String {
    // Hide a password in redis://user:pass@host/ URLs.
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s => format!("{}://***@{}", &url[..s], &url[at + 1..]),
        _ => url.to_string(),
    }
}
