//! Test support: real `redis-server` processes, each on a free port in its own
//! temp dir, stopped by pid and cleaned up when dropped.
//!
//! Every test binary pulls this in with `mod support;` and uses a subset of
//! it, hence the `dead_code` allowance. The submodules start deployments made
//! of several servers; they use no feature-gated redhold API, so every test
//! binary compiles with any set of features.
#![allow(dead_code)]

pub(crate) mod cli;
pub(crate) mod cluster;
pub(crate) mod contention;
pub(crate) mod replica;
pub(crate) mod sentinel;
pub(crate) mod server_command;
pub(crate) mod tls;
pub(crate) mod version;

pub(crate) use server_command::redis_server_command;
pub(crate) use version::server_version;

use std::fs::{self, File};
use std::io::{ErrorKind, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// What a test sees when `redis-server` is missing: never a silent skip.
const NOT_FOUND: &str = "redis-server not found on PATH: tests need Redis 6.2 or later. \
     Install it with `sudo apt-get install redis-server` (Debian/Ubuntu) or \
     `brew install redis` (macOS).";

/// How long a fresh server may take to answer PING (it usually takes ~60 ms).
const READY_TIMEOUT: Duration = Duration::from_secs(10);

/// Connect timeout for clients built by the helpers: the server is local, so
/// anything slower means it is down, and the test should hear so quickly.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// How often a fresh port is tried when another process grabbed ours between
/// picking it and the server binding it.
const START_ATTEMPTS: usize = 5;

/// A `redis-server` child process owned by one test.
///
/// Dropping it kills the process and removes its directory.
#[derive(Debug)]
pub(crate) struct RedisServer {
    /// Process id of the running server (changes after [`start_again`](Self::start_again)).
    pub(crate) pid: u32,
    port: u16,
    dir: PathBuf,
    extra_args: Vec<String>,
    password: Option<String>,
    /// Listens for TLS only (`--port 0 --tls-port <port>`), see [`tls`].
    tls: bool,
    child: Option<Child>,
}

impl RedisServer {
    /// Starts a server with the standard arguments and waits until it answers.
    ///
    /// # Panics
    ///
    /// If `redis-server` is not on PATH, is older than 6.2, or does not answer
    /// PING within 10 s (the panic message includes its log).
    pub(crate) fn start() -> RedisServer {
        RedisServer::start_with_args(&[])
    }

    /// Starts a server with `extra` appended to the standard arguments, e.g.
    /// `&["--requirepass", "secret"]`.
    ///
    /// A `--requirepass` value is remembered: [`url`](Self::url) carries it,
    /// [`url_without_password`](Self::url_without_password) does not.
    ///
    /// # Panics
    ///
    /// As [`start`](Self::start).
    pub(crate) fn start_with_args(extra: &[&str]) -> RedisServer {
        RedisServer::start_inner(extra, false)
    }

    /// Starts a server that listens for TLS only, on [`port`](Self::port);
    /// `extra` must name its certificate files. Its readiness is judged by
    /// the log and a plain TCP connect, since PING would need TLS.
    /// [`tls::TlsServer`] is the convenient way to get one.
    ///
    /// # Panics
    ///
    /// As [`start`](Self::start).
    pub(crate) fn start_tls_with_args(extra: &[&str]) -> RedisServer {
        RedisServer::start_inner(extra, true)
    }

    fn start_inner(extra: &[&str], tls: bool) -> RedisServer {
        check_version();
        let extra_args: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
        let password = extra_args
            .iter()
            .position(|a| a == "--requirepass")
            .and_then(|i| extra_args.get(i + 1))
            .cloned();
        let mut server = RedisServer {
            pid: 0,
            port: 0,
            dir: fresh_dir(),
            extra_args,
            password,
            tls,
            child: None,
        };
        if let Err(failure) = on_a_free_port(|port| {
            server.port = port;
            server.spawn_and_wait().inspect_err(|_| server.kill())
        }) {
            panic!("could not start redis-server: {failure}");
        }
        server
    }

    /// The port the server listens on (kept across [`stop`](Self::stop) and
    /// [`start_again`](Self::start_again)).
    pub(crate) fn port(&self) -> u16 {
        self.port
    }

    /// `redis://127.0.0.1:<port>/` (`rediss://` for a TLS server), with the
    /// `--requirepass` password if any.
    pub(crate) fn url(&self) -> String {
        let scheme = if self.tls { "rediss" } else { "redis" };
        match &self.password {
            Some(pw) => format!("{scheme}://:{pw}@127.0.0.1:{}/", self.port),
            None => self.url_without_password(),
        }
    }

    /// `redis://127.0.0.1:<port>/` even when the server wants a password.
    pub(crate) fn url_without_password(&self) -> String {
        let scheme = if self.tls { "rediss" } else { "redis" };
        format!("{scheme}://127.0.0.1:{}/", self.port)
    }

    /// The server's working directory (holds `log`).
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// The server's log so far, for assertion messages.
    pub(crate) fn log(&self) -> String {
        fs::read_to_string(self.dir.join("log")).unwrap_or_default()
    }

    /// Whether the process is still alive (it may have been stopped or have died).
    pub(crate) fn is_running(&mut self) -> bool {
        match &mut self.child {
            Some(child) => matches!(child.try_wait(), Ok(None)),
            None => false,
        }
    }

    /// A builder for a redhold client on this server, with a short connect
    /// timeout; tests add their own settings before `build()`.
    pub(crate) fn builder(&self) -> redhold::ClientBuilder {
        redhold::Client::builder()
            .url(self.url())
            .connect_timeout(CONNECT_TIMEOUT)
    }

    /// A redhold client on this server with default settings.
    ///
    /// # Panics
    ///
    /// If the client cannot be built.
    pub(crate) fn client(&self) -> redhold::Client {
        self.builder()
            .build()
            .unwrap_or_else(|e| panic!("redhold client for {}: {e}", self.url()))
    }

    /// A redhold client on this server whose watchdog timeout is `timeout`.
    ///
    /// # Panics
    ///
    /// If the client cannot be built.
    pub(crate) fn client_with_watchdog(&self, timeout: Duration) -> redhold::Client {
        self.builder()
            .watchdog_timeout(timeout)
            .build()
            .unwrap_or_else(|e| panic!("redhold client for {}: {e}", self.url()))
    }

    /// A plain redis-rs connection, for looking at keys behind redhold's back.
    ///
    /// # Panics
    ///
    /// If the server cannot be reached.
    pub(crate) fn connection(&self) -> redis::Connection {
        quiet_client(&self.url())
            .and_then(|c| c.get_connection_with_timeout(CONNECT_TIMEOUT))
            .unwrap_or_else(|e| panic!("redis connection to {}: {e}", self.url()))
    }

    /// Sends one raw command and returns the error instead of panicking.
    pub(crate) fn try_cmd<T: redis::FromRedisValue>(&self, args: &[&str]) -> redis::RedisResult<T> {
        let (name, rest) = args.split_first().expect("try_cmd needs a command name");
        let mut cmd = redis::cmd(name);
        for arg in rest {
            cmd.arg(*arg);
        }
        let mut con = quiet_client(&self.url())?.get_connection_with_timeout(CONNECT_TIMEOUT)?;
        cmd.query(&mut con)
    }

    /// Sends one raw command, e.g. `server.cmd::<Option<u32>>(&["HGET", "k", field])`.
    ///
    /// # Panics
    ///
    /// If the command fails.
    pub(crate) fn cmd<T: redis::FromRedisValue>(&self, args: &[&str]) -> T {
        self.try_cmd(args)
            .unwrap_or_else(|e| panic!("{args:?} on {}: {e}", self.url()))
    }

    /// Whether `key` exists.
    ///
    /// # Panics
    ///
    /// If the command fails.
    pub(crate) fn exists(&self, key: &str) -> bool {
        self.cmd::<i64>(&["EXISTS", key]) == 1
    }

    /// Calls of each command since the start or the last `CONFIG
    /// RESETSTAT`, by name (`evalsha`, `client|list`, …), from `INFO
    /// commandstats`; commands scripts run are counted too.
    ///
    /// # Panics
    ///
    /// If the command fails.
    pub(crate) fn command_calls(&self) -> std::collections::HashMap<String, u64> {
        let info: String = self.cmd(&["INFO", "commandstats"]);
        info.lines()
            .filter_map(|line| {
                let (name, rest) = line.strip_prefix("cmdstat_")?.split_once(':')?;
                let calls = rest
                    .strip_prefix("calls=")?
                    .split(',')
                    .next()?
                    .parse()
                    .ok()?;
                Some((name.to_owned(), calls))
            })
            .collect()
    }

    /// How many scripts (EVAL and EVALSHA) the server has run so far.
    ///
    /// # Panics
    ///
    /// If the command fails.
    pub(crate) fn scripts_run(&self) -> u64 {
        let calls = self.command_calls();
        ["evalsha", "eval"]
            .iter()
            .filter_map(|c| calls.get(*c))
            .sum()
    }

    /// Makes the server hold every client command for `duration`
    /// (`CLIENT PAUSE <ms> ALL`), to simulate a stalled server.
    ///
    /// # Panics
    ///
    /// If the command fails.
    pub(crate) fn pause_for(&self, duration: Duration) {
        let ms = duration.as_millis().max(1).to_string();
        self.cmd::<()>(&["CLIENT", "PAUSE", &ms, "ALL"]);
    }

    /// Freezes the process with SIGSTOP: connections stay open but nothing
    /// answers, unlike [`pause_for`](Self::pause_for) which still accepts
    /// connections. Undo with [`thaw`](Self::thaw).
    pub(crate) fn freeze(&self) {
        self.signal("-STOP");
    }

    /// Resumes a process frozen by [`freeze`](Self::freeze).
    pub(crate) fn thaw(&self) {
        self.signal("-CONT");
    }

    /// Kills the server and waits for it to exit; the port and dir are kept
    /// for [`start_again`](Self::start_again).
    pub(crate) fn stop(&mut self) {
        self.kill();
    }

    /// Starts the server again on the same port after [`stop`](Self::stop).
    ///
    /// # Panics
    ///
    /// If it is still running, or does not come back within 10 s (for
    /// example because another process took the port meanwhile).
    pub(crate) fn start_again(&mut self) {
        assert!(
            !self.is_running(),
            "start_again: redis-server on port {} is still running",
            self.port
        );
        self.child = None;
        if let Err(failure) = self.spawn_and_wait() {
            self.kill();
            panic!(
                "could not restart redis-server on port {}: {failure}",
                self.port
            );
        }
    }

    fn spawn_and_wait(&mut self) -> Result<(), String> {
        let port = self.port.to_string();
        let dir = self.dir.to_string_lossy().into_owned();
        let logfile = self.dir.join("log").to_string_lossy().into_owned();
        // Errors in the arguments go to stdout before the log file is opened.
        let output = File::create(self.dir.join("output"))
            .map_err(|e| format!("cannot create {}/output: {e}", self.dir.display()))?;
        let output2 = output
            .try_clone()
            .map_err(|e| format!("cannot clone output file handle: {e}"))?;
        let log_start = self.log().len();
        let ports: &[&str] = if self.tls {
            &["--port", "0", "--tls-port", &port]
        } else {
            &["--port", &port]
        };
        let spawned = redis_server_command()
            .args(ports)
            .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .args(["--dir", &dir, "--logfile", &logfile])
            .args(&self.extra_args)
            .stdin(Stdio::null())
            .stdout(output)
            .stderr(output2)
            .spawn();
        let child = match spawned {
            Ok(child) => child,
            Err(e) if e.kind() == ErrorKind::NotFound => panic!("{NOT_FOUND}"),
            Err(e) => panic!("cannot run redis-server: {e}"),
        };
        self.pid = child.id();
        self.child = Some(child);
        self.wait_ready(log_start)
    }

    /// Waits until our process has logged that it is ready and the port
    /// answers PING. The log check matters: after a lost race for the port,
    /// PING could be answered by somebody else's server. Only the part of the
    /// log written after `log_start` counts, since a restart appends to it.
    fn wait_ready(&mut self, log_start: usize) -> Result<(), String> {
        let deadline = Instant::now() + READY_TIMEOUT;
        let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, self.port));
        loop {
            if let Some(Ok(Some(status))) = self.child.as_mut().map(|c| c.try_wait()) {
                return Err(format!(
                    "redis-server on port {} exited with {status}\n--- output ---\n{}\n--- log ---\n{}",
                    self.port,
                    fs::read_to_string(self.dir.join("output")).unwrap_or_default(),
                    self.log()
                ));
            }
            let logged_ready = self
                .log()
                .get(log_start..)
                .is_some_and(|new| new.contains("Ready to accept connections"));
            // Any reply will do: with a password the server answers NOAUTH.
            // A TLS port would need a handshake first; accepting a connection
            // after our process logged readiness is proof enough.
            let answers = if self.tls {
                TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok()
            } else {
                ping(addr).is_some()
            };
            if logged_ready && answers {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "redis-server on port {} was not ready within {READY_TIMEOUT:?}\n--- log ---\n{}",
                    self.port,
                    self.log()
                ));
            }
            thread::sleep(Duration::from_millis(10));
        }
    }

    fn signal(&self, sig: &str) {
        if self.child.is_none() {
            return;
        }
        let status = Command::new("kill")
            .arg(sig)
            .arg(self.pid.to_string())
            .status();
        assert!(
            matches!(status, Ok(s) if s.success()),
            "kill {sig} {} failed: {status:?}",
            self.pid
        );
    }

    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
        let _ = fs::remove_dir_all(&self.dir);
    }
}

/// Sends `PING` on a raw socket and returns the first reply line, if any.
fn ping(addr: SocketAddr) -> Option<String> {
    let timeout = Duration::from_millis(200);
    let mut stream = TcpStream::connect_timeout(&addr, timeout).ok()?;
    stream.set_read_timeout(Some(timeout)).ok()?;
    stream.set_write_timeout(Some(timeout)).ok()?;
    stream.write_all(b"PING\r\n").ok()?;
    let mut buf = [0u8; 128];
    let n = stream.read(&mut buf).ok()?;
    let reply = String::from_utf8_lossy(&buf[..n]).into_owned();
    reply.contains("\r\n").then_some(reply)
}

/// A port that was free a moment ago (the OS picks it for 127.0.0.1:0).
/// Runs `start` with a fresh free port until it works, at most
/// `START_ATTEMPTS` times. Only a lost race for the port (another process
/// took it between picking and binding) is worth another try; `start` must
/// clean up after a failed attempt itself.
pub(crate) fn on_a_free_port(
    mut start: impl FnMut(u16) -> Result<(), String>,
) -> Result<(), String> {
    let mut last_failure = String::new();
    for _ in 0..START_ATTEMPTS {
        match start(free_port()) {
            Ok(()) => return Ok(()),
            Err(failure) => {
                let retry = failure.contains("Address already in use");
                last_failure = failure;
                if !retry {
                    break;
                }
            }
        }
    }
    Err(last_failure)
}

fn free_port() -> u16 {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("cannot bind 127.0.0.1:0 to find a free port")
}

/// A new, empty directory under the system temp dir.
fn fresh_dir() -> PathBuf {
    static COUNTER: AtomicUsize = AtomicUsize::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("redhold-test-{}-{n}-{nanos}", std::process::id()));
    fs::create_dir(&dir).unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
    dir
}

/// A redis-rs client for `url` that sends no `CLIENT SETINFO` on connecting,
/// so that the tests' own connections stay out of the command counts they
/// assert (Redis 7.2+ and Valkey count it as `client|setinfo`, 6.2 as a
/// failed `client`, 7.0 not at all).
fn quiet_client(url: &str) -> redis::RedisResult<redis::Client> {
    use redis::IntoConnectionInfo;
    let info = url.into_connection_info()?;
    let settings = info.redis_settings().clone().set_skip_set_lib_name();
    redis::Client::open(info.set_redis_settings(settings))
}

/// Panics once per test binary when `redis-server` is missing or too old
/// (see [`version`]).
fn check_version() {
    version::server_version();
}
