//! `redis-server` processes for the suite: one server, a cluster of three
//! masters, or a master and one sentinel watching it, on free ports in
//! temp dirs, killed by pid when dropped.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

#[path = "../../../tests/support/server_command.rs"]
mod server_command;

static NEXT_DIR: AtomicUsize = AtomicUsize::new(0);

/// The name the sentinel of [`Server::start_sentinel`] knows its master by.
pub const SENTINEL_MASTER: &str = "compat-master";

/// One `redis-server`.
pub struct Server {
    pub port: u16,
    child: Child,
    dir: PathBuf,
}

impl Server {
    /// Starts a server with `extra` arguments and waits until it answers PING.
    pub fn start(extra: &[&str]) -> Result<Server, String> {
        Server::start_with(None, extra)
    }

    /// [`Server::start`], with a config file of `config` first when given.
    fn start_with(config: Option<&str>, extra: &[&str]) -> Result<Server, String> {
        let mut last = String::new();
        // Another process may take the port between our probe and the bind.
        for _ in 0..5 {
            match Server::try_start(config, extra) {
                Ok(server) => return Ok(server),
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    /// Starts a sentinel that watches the master on `master_port` under
    /// the name [`SENTINEL_MASTER`] (a sentinel needs a config file it can
    /// write: it gets one in its temp dir).
    pub fn start_sentinel(master_port: u16) -> Result<Server, String> {
        let config = format!(
            "sentinel monitor {SENTINEL_MASTER} 127.0.0.1 {master_port} 1\n\
             sentinel down-after-milliseconds {SENTINEL_MASTER} 5000\n"
        );
        Server::start_with(Some(&config), &["--sentinel"])
    }

    fn try_start(config: Option<&str>, extra: &[&str]) -> Result<Server, String> {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| format!("no free port: {e}"))?
            .port();
        let dir = std::env::temp_dir().join(format!(
            "redhold-compat-{}-{}",
            std::process::id(),
            NEXT_DIR.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).map_err(|e| format!("mkdir {}: {e}", dir.display()))?;
        let log = dir.join("log");
        // Dies with the runner, even when the suite is killed mid-run.
        let mut command = server_command::redis_server_command();
        if let Some(config) = config {
            let file = dir.join("redis.conf");
            std::fs::write(&file, config).map_err(|e| format!("write {}: {e}", file.display()))?;
            command.arg(file);
        }
        let child = command
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(&dir)
            .arg("--logfile")
            .arg(&log)
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot start redis-server: {e} (is it on PATH?)"))?;
        let server = Server { port, child, dir };
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if server.connection().is_ok() {
                return Ok(server);
            }
            if Instant::now() > deadline {
                let log = std::fs::read_to_string(&log).unwrap_or_default();
                return Err(format!(
                    "redis-server on port {port} did not answer:\n{log}"
                ));
            }
            thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    pub fn connection(&self) -> Result<redis::Connection, String> {
        let client = redis::Client::open(self.url()).map_err(|e| e.to_string())?;
        let mut con = client
            .get_connection_with_timeout(Duration::from_secs(2))
            .map_err(|e| e.to_string())?;
        redis::cmd("PING")
            .query::<String>(&mut con)
            .map_err(|e| e.to_string())?;
        Ok(con)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Three masters, no replicas, every slot covered.
pub struct Cluster {
    pub nodes: Vec<Server>,
}

impl Cluster {
    pub fn start() -> Result<Cluster, String> {
        let args = [
            "--cluster-enabled",
            "yes",
            "--cluster-config-file",
            "nodes.conf",
            "--cluster-node-timeout",
            "5000",
        ];
        let nodes = (0..3)
            .map(|_| Server::start(&args))
            .collect::<Result<Vec<_>, _>>()?;
        let addrs: Vec<String> = nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port))
            .collect();
        let out = Command::new("redis-cli")
            .arg("--cluster")
            .arg("create")
            .args(&addrs)
            .args(["--cluster-replicas", "0", "--cluster-yes"])
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("cannot run redis-cli: {e} (is it on PATH?)"))?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        if !out.status.success() || !stdout.contains("All 16384 slots covered") {
            return Err(format!(
                "redis-cli --cluster create failed:\n{stdout}\n{}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        let cluster = Cluster { nodes };
        cluster.wait_until_whole()?;
        Ok(cluster)
    }

    pub fn urls(&self) -> Vec<String> {
        self.nodes
            .iter()
            .map(|n| format!("redis://127.0.0.1:{}", n.port))
            .collect()
    }

    /// Until every node says `cluster_state:ok`, knows all three nodes and
    /// agrees with the others on who owns which slots.
    fn wait_until_whole(&self) -> Result<(), String> {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let views: Vec<Option<(String, String)>> = self
                .nodes
                .iter()
                .map(|n| {
                    let mut con = n.connection().ok()?;
                    let info: String = redis::cmd("CLUSTER").arg("INFO").query(&mut con).ok()?;
                    let nodes: String = redis::cmd("CLUSTER").arg("NODES").query(&mut con).ok()?;
                    let mut lines: Vec<String> = nodes
                        .lines()
                        .map(|l| {
                            let f: Vec<&str> = l.split(' ').collect();
                            format!(
                                "{} {}",
                                f.first().unwrap_or(&""),
                                f.get(8..).unwrap_or_default().join(" ")
                            )
                        })
                        .collect();
                    lines.sort();
                    Some((info, lines.join("\n")))
                })
                .collect();
            let whole = views.iter().all(|v| {
                v.as_ref().is_some_and(|(info, _)| {
                    info.contains("cluster_state:ok") && info.contains("cluster_known_nodes:3")
                })
            });
            let agree = views
                .iter()
                .all(|v| v.as_ref().map(|(_, s)| s) == views[0].as_ref().map(|(_, s)| s));
            if whole && agree {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err("the cluster was not whole within 30 s".into());
            }
            thread::sleep(Duration::from_millis(100));
        }
    }
}
