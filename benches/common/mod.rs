//! Shared helpers for the benches: a throw-away `redis-server` (or `REDIS_URL`).
//!
//! `benches/lock.rs` does `mod common;` and `benches/limits/main.rs` includes
//! this file with `#[path]`, so some helpers are unused in one of them.
#![allow(dead_code)]

#[path = "../../tests/support/server_command.rs"]
mod server_command;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// A Redis server to benchmark against.
///
/// Either the one named by `REDIS_URL` (left alone), or a private
/// `redis-server` on a free loopback port with persistence off, in its own
/// temporary directory; that one is killed (by pid) and its directory removed
/// on drop.
#[derive(Debug)]
pub(crate) struct BenchServer {
    /// `redis://127.0.0.1:PORT/` (or the value of `REDIS_URL`).
    pub(crate) url: String,
    child: Option<Child>,
    dir: Option<PathBuf>,
}

impl BenchServer {
    /// Uses `REDIS_URL` if set (and not empty), else starts a private server.
    pub(crate) fn from_env_or_spawn() -> BenchServer {
        match std::env::var("REDIS_URL") {
            Ok(url) if !url.trim().is_empty() => {
                eprintln!("bench: using REDIS_URL={url}");
                BenchServer {
                    url,
                    child: None,
                    dir: None,
                }
            }
            _ => Self::spawn(),
        }
    }

    /// The pid of the private server, if this process started one.
    pub(crate) fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(|c| c.id())
    }

    /// True if this process started the server (so nobody else is using it).
    pub(crate) fn is_private(&self) -> bool {
        self.child.is_some()
    }

    /// Starts a private `redis-server`; panics with a clear message if it is
    /// not installed or does not come up.
    pub(crate) fn spawn() -> BenchServer {
        check_installed();
        let mut last_err = String::new();
        // A free port can be taken by someone else between our probe and the
        // server's bind; try a few times.
        for _attempt in 0..5 {
            let port = free_port();
            let dir = temp_dir(port);
            std::fs::create_dir_all(&dir)
                .unwrap_or_else(|e| panic!("bench: cannot create {}: {e}", dir.display()));
            let log = dir.join("redis.log");
            // Dies with this process, even when a bench is killed mid-run.
            let spawned = server_command::redis_server_command()
                .arg("--port")
                .arg(port.to_string())
                .args(["--bind", "127.0.0.1"])
                .args(["--save", ""])
                .args(["--appendonly", "no"])
                .arg("--dir")
                .arg(&dir)
                .arg("--logfile")
                .arg(&log)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn();
            let child = match spawned {
                Ok(c) => c,
                Err(e) => {
                    let _ = std::fs::remove_dir_all(&dir);
                    panic!("bench: could not start redis-server: {e}");
                }
            };
            let mut server = BenchServer {
                url: format!("redis://127.0.0.1:{port}/"),
                child: Some(child),
                dir: Some(dir),
            };
            match server.wait_ready(port, Duration::from_secs(5)) {
                Ok(()) => {
                    eprintln!("bench: started redis-server on 127.0.0.1:{port}");
                    return server;
                }
                Err(e) => {
                    last_err = format!("{e}; log: {}", server.log_tail());
                    drop(server); // kills it and removes the dir
                }
            }
        }
        panic!("bench: redis-server did not come up: {last_err}");
    }

    fn wait_ready(&mut self, port: u16, limit: Duration) -> Result<(), String> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(child) = self.child.as_mut() {
                if let Ok(Some(status)) = child.try_wait() {
                    return Err(format!("redis-server exited early ({status})"));
                }
            }
            if ping(port) {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!("no PONG on port {port} within {limit:?}"));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn log_tail(&self) -> String {
        let Some(dir) = &self.dir else {
            return String::new();
        };
        let text = std::fs::read_to_string(dir.join("redis.log")).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(5)..].join(" | ")
    }
}

impl Drop for BenchServer {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        if let Some(dir) = self.dir.take() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// Panics with a clear message when `redis-server` is not on PATH (the
/// server is started through `sh`, which would only exit with 127).
fn check_installed() {
    match Command::new("redis-server").arg("--version").output() {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => panic!(
            "bench: `redis-server` was not found on PATH. Install it \
             (Debian/Ubuntu: `apt-get install -y redis-server`) or point \
             REDIS_URL at a running server, e.g. \
             REDIS_URL=redis://127.0.0.1:6379/ cargo bench"
        ),
        Err(e) => panic!("bench: cannot run `redis-server --version`: {e}"),
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("bench: cannot bind a loopback port to find a free one")
}

fn temp_dir(port: u16) -> PathBuf {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    std::env::temp_dir().join(format!(
        "redhold-bench-{}-{port}-{nanos}",
        std::process::id()
    ))
}

/// Inline `PING` without the redis crate, so readiness does not depend on it.
fn ping(port: u16) -> bool {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_millis(200)));
    if s.write_all(b"PING\r\n").is_err() {
        return false;
    }
    let mut buf = [0u8; 16];
    matches!(s.read(&mut buf), Ok(n) if n >= 5 && &buf[..5] == b"+PONG")
}

/// The `q`-quantile (0.0..=1.0) of an ascending-sorted slice.
pub(crate) fn percentile(sorted: &[Duration], q: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let idx = ((sorted.len() - 1) as f64 * q).round() as usize;
    sorted[idx.min(sorted.len() - 1)]
}

/// A fresh, unique-per-run prefix for key names, so runs against a shared
/// `REDIS_URL` server do not collide.
pub(crate) fn run_prefix(bench: &str) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("redhold-bench:{bench}:{}:{nanos:x}", std::process::id())
}

/// The instant the holder stored just before releasing, taken by the waiter
/// that now holds the lock. Panics if the slot is empty: the waiter got the
/// lock while the holder still held it.
pub(crate) fn take_release_instant(slot: &std::sync::Mutex<Option<Instant>>) -> Instant {
    slot.lock()
        .unwrap()
        .take()
        .expect("waiter acquired while the holder still held the lock")
}

/// Where the benches write what they keep (samples, reports):
/// `$CARGO_TARGET_DIR/<name>`, else `target/<name>` in the workspace. Cargo
/// runs a bench in its package's directory, and this package is
/// `benches/`, one level below the workspace.
pub(crate) fn output_dir(name: &str) -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("..")
                .join("target")
        })
        .join(name)
}
