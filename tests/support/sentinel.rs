//! A master, one replica and three sentinels watching them as `mymaster`,
//! each process on a free port in its own temp dir, all stopped when dropped.

use std::collections::HashMap;
use std::fs::{self, File};
use std::io::ErrorKind;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use super::replica::{start_pair, start_pair_with_master_args};
use super::tls::TlsServer;
use super::{check_version, free_port, fresh_dir, on_a_free_port, RedisServer, NOT_FOUND};

/// The name the sentinels know the master by.
pub(crate) const MASTER_NAME: &str = "mymaster";

/// How long the replica link and the sentinels' view of the deployment may
/// take to settle (the sentinels find each other through hello messages sent
/// every 2 s).
const SETTLE_TIMEOUT: Duration = Duration::from_secs(20);

/// Connect and read timeout for the raw commands sent to sentinels.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(2);

/// Master, replica and three sentinels (quorum 2, master down after 1 s of
/// silence, failover timeout 5 s).
///
/// Dropping it kills every process and removes their directories.
#[derive(Debug)]
pub(crate) struct SentinelSetup {
    /// The first master; [`kill_master`](Self::kill_master) stops it.
    pub(crate) master: RedisServer,
    /// The replica, promoted when the master dies.
    pub(crate) replica: RedisServer,
    /// The three sentinels.
    pub(crate) sentinels: Vec<Sentinel>,
}

impl SentinelSetup {
    /// Starts the master and the replica, waits until the replica is in
    /// sync, then starts the sentinels and waits until each of them knows
    /// the master, the replica and the two other sentinels.
    ///
    /// # Panics
    ///
    /// If a process does not start or the deployment does not settle
    /// within 20 s (the message says what was missing).
    pub(crate) fn start() -> SentinelSetup {
        SentinelSetup::around(start_pair())
    }

    /// As [`start`](Self::start), with a master that cannot be made a
    /// replica (`SLAVEOF` and `REPLICAOF` are disabled on it): after a
    /// failover it goes on running as a master, as one cut off from the
    /// sentinels does until they can reach it again.
    ///
    /// # Panics
    ///
    /// As [`start`](Self::start) does.
    pub(crate) fn start_with_undemotable_master() -> SentinelSetup {
        SentinelSetup::around(start_pair_with_master_args(&[
            "--rename-command",
            "SLAVEOF",
            "",
            "--rename-command",
            "REPLICAOF",
            "",
        ]))
    }

    fn around((master, replica): (RedisServer, RedisServer)) -> SentinelSetup {
        let sentinels = (0..3).map(|_| Sentinel::start(master.port())).collect();
        let setup = SentinelSetup {
            master,
            replica,
            sentinels,
        };
        setup.wait_until_sentinels_settle();
        setup
    }

    fn wait_until_sentinels_settle(&self) {
        let deadline = Instant::now() + SETTLE_TIMEOUT;
        loop {
            let views: Vec<Result<HashMap<String, String>, String>> =
                self.sentinels.iter().map(Sentinel::master_state).collect();
            let settled = views.iter().all(|view| {
                view.as_ref().is_ok_and(|v| {
                    v.get("port").map(String::as_str) == Some(&*self.master.port().to_string())
                        && v.get("flags").map(String::as_str) == Some("master")
                        && v.get("num-slaves").map(String::as_str) == Some("1")
                        && v.get("num-other-sentinels").map(String::as_str) == Some("2")
                })
            });
            if settled {
                return;
            }
            if Instant::now() >= deadline {
                panic!(
                    "sentinels did not settle within {SETTLE_TIMEOUT:?} \
                     (want port {}, flags master, num-slaves 1, num-other-sentinels 2): {views:#?}",
                    self.master.port()
                );
            }
            thread::sleep(Duration::from_millis(100));
        }
    }

    /// `redis://127.0.0.1:<port>/` of every sentinel.
    pub(crate) fn sentinel_urls(&self) -> Vec<String> {
        self.sentinels.iter().map(Sentinel::url).collect()
    }

    /// Makes every process ask for `password` (the sentinels through their
    /// default ACL user, the servers with `requirepass`), keeping the
    /// deployment whole: the sentinels and the replica are told it first.
    /// The support's own helpers connect without a password afterwards,
    /// so use it only where the test needs nothing more from them.
    pub(crate) fn require_password(&self, password: &str) {
        for sentinel in &self.sentinels {
            sentinel
                .cmd::<()>(&["SENTINEL", "SET", MASTER_NAME, "auth-pass", password])
                .expect("SENTINEL SET auth-pass");
        }
        let with_password = format!(">{password}");
        for sentinel in &self.sentinels {
            sentinel
                .cmd::<()>(&["ACL", "SETUSER", "default", "resetpass", &with_password])
                .expect("ACL SETUSER on a sentinel");
        }
        self.replica
            .cmd::<()>(&["CONFIG", "SET", "masterauth", password]);
        self.replica
            .cmd::<()>(&["CONFIG", "SET", "requirepass", password]);
        self.master
            .cmd::<()>(&["CONFIG", "SET", "requirepass", password]);
    }

    /// The master's port as the first sentinel that answers has it, if any
    /// answers (right after a failover they may say "no such master").
    pub(crate) fn master_port_per_sentinels(&self) -> Option<u16> {
        self.sentinels.iter().find_map(|s| s.master_port().ok())
    }

    /// Kills the master (SIGKILL), which starts a failover about 1 s later.
    pub(crate) fn kill_master(&mut self) {
        self.master.stop();
    }

    /// Waits until every sentinel names the replica as the master and the
    /// replica says it is a master; returns how long that took.
    ///
    /// # Panics
    ///
    /// If that does not happen within `limit`.
    pub(crate) fn wait_for_failover(&self, limit: Duration) -> Duration {
        let started = Instant::now();
        let want = self.replica.port();
        loop {
            let all_agree = self
                .sentinels
                .iter()
                .all(|s| s.master_port().ok() == Some(want));
            let promoted = self
                .replica
                .try_cmd::<String>(&["INFO", "replication"])
                .is_ok_and(|info| info.contains("role:master"));
            if all_agree && promoted {
                return started.elapsed();
            }
            if started.elapsed() >= limit {
                let seen: Vec<Result<u16, String>> =
                    self.sentinels.iter().map(Sentinel::master_port).collect();
                panic!(
                    "no failover to the replica (port {want}) within {limit:?}: \
                     sentinels say {seen:?}, replica promoted: {promoted}\n--- sentinel log ---\n{}",
                    self.sentinels[0].log()
                );
            }
            thread::sleep(Duration::from_millis(100));
        }
    }
}

/// A master that speaks TLS only and one sentinel watching it over TLS
/// (`tls-replication yes`). The sentinel listens for TLS too, and on a
/// plain port for the helpers.
///
/// Dropping it stops both and removes their directories.
#[derive(Debug)]
pub(crate) struct TlsSentinelSetup {
    /// The master, with the certificates the sentinel also uses.
    pub(crate) master: TlsServer,
    /// The sentinel.
    pub(crate) sentinel: Sentinel,
    tls_port: u16,
}

impl TlsSentinelSetup {
    /// Starts the master and the sentinel, and waits until the sentinel
    /// has talked to the master over TLS.
    ///
    /// # Panics
    ///
    /// If a process does not start, or the sentinel does not reach the
    /// master within 20 s.
    pub(crate) fn start() -> TlsSentinelSetup {
        let master = TlsServer::start();
        let tls_port = free_port();
        let file = |name: &str| master.certs_dir().join(name).display().to_string();
        let extra = format!(
            "tls-port {tls_port}\ntls-cert-file {}\ntls-key-file {}\n\
             tls-ca-cert-file {}\ntls-auth-clients no\ntls-replication yes\n",
            file("server.crt"),
            file("server.key"),
            file("ca.crt"),
        );
        let sentinel = Sentinel::start_with("127.0.0.1", master.port(), extra);
        let setup = TlsSentinelSetup {
            master,
            sentinel,
            tls_port,
        };
        setup.wait_until_the_master_answers_the_sentinel();
        setup
    }

    fn wait_until_the_master_answers_the_sentinel(&self) {
        let deadline = Instant::now() + SETTLE_TIMEOUT;
        loop {
            // The sentinel learns the master's role from its INFO reply,
            // which needs the TLS connection to work.
            let view = self.sentinel.master_state();
            let reached = view.as_ref().is_ok_and(|v| {
                v.get("flags").map(String::as_str) == Some("master")
                    && v.get("role-reported").map(String::as_str) == Some("master")
                    && v.get("info-refresh").is_some_and(|ms| ms != "0")
            });
            if reached {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the sentinel did not reach the TLS master within {SETTLE_TIMEOUT:?}: \
                 {view:#?}\n--- sentinel log ---\n{}",
                self.sentinel.log()
            );
            thread::sleep(Duration::from_millis(100));
        }
    }

    /// `rediss://127.0.0.1:<tls port>/` of the sentinel.
    pub(crate) fn sentinel_tls_url(&self) -> String {
        format!("rediss://127.0.0.1:{}/", self.tls_port)
    }
}

/// One `redis-server --sentinel` process with a writable config file.
#[derive(Debug)]
pub(crate) struct Sentinel {
    port: u16,
    dir: PathBuf,
    child: Option<Child>,
    /// Lines added to the config file (TLS settings).
    extra_config: String,
}

impl Sentinel {
    /// Starts a sentinel that monitors the master on `master_port`.
    ///
    /// # Panics
    ///
    /// If it does not answer PING within 10 s.
    fn start(master_port: u16) -> Sentinel {
        Sentinel::start_monitoring("127.0.0.1", master_port)
    }

    /// Starts a sentinel that monitors the master at `host:master_port`
    /// (a deployment whose servers are known by another loopback address,
    /// such as the checker's failover topology behind its link proxies).
    ///
    /// # Panics
    ///
    /// If it does not answer PING within 10 s.
    pub(crate) fn start_monitoring(host: &str, master_port: u16) -> Sentinel {
        Sentinel::start_with(host, master_port, String::new())
    }

    /// As [`start_monitoring`](Self::start_monitoring), with `extra_config`
    /// appended to the config file.
    fn start_with(host: &str, master_port: u16, extra_config: String) -> Sentinel {
        check_version();
        let mut sentinel = Sentinel {
            port: 0,
            dir: fresh_dir(),
            child: None,
            extra_config,
        };
        if let Err(failure) = on_a_free_port(|port| {
            sentinel.port = port;
            sentinel
                .spawn_and_wait(host, master_port)
                .inspect_err(|_| sentinel.kill())
        }) {
            panic!("could not start a sentinel: {failure}");
        }
        sentinel
    }

    fn spawn_and_wait(&mut self, host: &str, master_port: u16) -> Result<(), String> {
        let config = self.dir.join("sentinel.conf");
        let log = self.dir.join("log");
        // The sentinel rewrites this file as it learns, so it must be ours
        // and writable; the log is truncated so that a retry reads only its own.
        let text = format!(
            "port {port}\nbind 127.0.0.1\ndir {dir}\nlogfile {log}\n\
             sentinel monitor {MASTER_NAME} {host} {master_port} 2\n\
             sentinel down-after-milliseconds {MASTER_NAME} 1000\n\
             sentinel failover-timeout {MASTER_NAME} 5000\n{extra}",
            port = self.port,
            dir = self.dir.display(),
            log = log.display(),
            extra = self.extra_config,
        );
        fs::write(&config, text).map_err(|e| format!("cannot write {}: {e}", config.display()))?;
        let _ = fs::remove_file(&log);
        let output = File::create(self.dir.join("output"))
            .map_err(|e| format!("cannot create {}/output: {e}", self.dir.display()))?;
        let output2 = output
            .try_clone()
            .map_err(|e| format!("cannot clone output file handle: {e}"))?;
        let spawned = super::redis_server_command()
            .arg(&config)
            .arg("--sentinel")
            .stdin(Stdio::null())
            .stdout(output)
            .stderr(output2)
            .spawn();
        let child = match spawned {
            Ok(child) => child,
            Err(e) if e.kind() == ErrorKind::NotFound => panic!("{NOT_FOUND}"),
            Err(e) => panic!("cannot run redis-server --sentinel: {e}"),
        };
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(Ok(Some(status))) = self.child.as_mut().map(Child::try_wait) {
                return Err(format!(
                    "sentinel on port {} exited with {status}\n--- output ---\n{}\n--- log ---\n{}",
                    self.port,
                    fs::read_to_string(self.dir.join("output")).unwrap_or_default(),
                    self.log()
                ));
            }
            // Our own log naming our own id guards against answering
            // somebody else's process that won the port.
            if self.log().contains("Sentinel ID is") && self.cmd::<String>(&["PING"]).is_ok() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "sentinel on port {} did not answer within 10 s\n--- log ---\n{}",
                    self.port,
                    self.log()
                ));
            }
            thread::sleep(Duration::from_millis(10));
        }
    }

    /// `redis://127.0.0.1:<port>/`.
    pub(crate) fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// The sentinel's log so far.
    pub(crate) fn log(&self) -> String {
        fs::read_to_string(self.dir.join("log")).unwrap_or_default()
    }

    /// Sends one raw command to the sentinel.
    pub(crate) fn cmd<T: redis::FromRedisValue>(&self, args: &[&str]) -> Result<T, String> {
        let (name, rest) = args.split_first().expect("cmd needs a command name");
        let mut cmd = redis::cmd(name);
        for arg in rest {
            cmd.arg(*arg);
        }
        let mut con = redis::Client::open(self.url())
            .and_then(|c| c.get_connection_with_timeout(COMMAND_TIMEOUT))
            .map_err(|e| format!("sentinel {}: {e}", self.url()))?;
        con.set_read_timeout(Some(COMMAND_TIMEOUT))
            .map_err(|e| e.to_string())?;
        cmd.query(&mut con)
            .map_err(|e| format!("{args:?} on sentinel {}: {e}", self.url()))
    }

    /// `SENTINEL MASTER mymaster` as field → value.
    pub(crate) fn master_state(&self) -> Result<HashMap<String, String>, String> {
        self.cmd(&["SENTINEL", "MASTER", MASTER_NAME])
    }

    /// The master's port per `SENTINEL GET-MASTER-ADDR-BY-NAME`.
    pub(crate) fn master_port(&self) -> Result<u16, String> {
        let addr: Option<(String, u16)> =
            self.cmd(&["SENTINEL", "GET-MASTER-ADDR-BY-NAME", MASTER_NAME])?;
        addr.map(|(_, port)| port)
            .ok_or_else(|| format!("sentinel {} knows no master", self.url()))
    }

    /// Freezes the process with SIGSTOP: it still accepts connections (the
    /// kernel completes the handshake) but answers nothing. Undo with
    /// [`thaw`](Self::thaw).
    pub(crate) fn freeze(&self) {
        self.signal("-STOP");
    }

    /// Resumes a process frozen by [`freeze`](Self::freeze).
    pub(crate) fn thaw(&self) {
        self.signal("-CONT");
    }

    fn signal(&self, sig: &str) {
        let Some(child) = &self.child else {
            return;
        };
        let status = Command::new("kill")
            .arg(sig)
            .arg(child.id().to_string())
            .status();
        assert!(
            matches!(status, Ok(s) if s.success()),
            "kill {sig} {} failed: {status:?}",
            child.id()
        );
    }

    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Sentinel {
    fn drop(&mut self) {
        self.kill();
        let _ = fs::remove_dir_all(&self.dir);
    }
}
