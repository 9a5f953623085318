//! A Redis Cluster of three masters with one replica each, every node
//! known by the addresses of its links (client port and bus port on
//! 127.0.0.2); the failover is `CLUSTER FAILOVER FORCE` on the replica of
//! the master serving the locks' slot, while that replica is starved.
//!
//! The old master is not killed: it learns from the new master's
//! announcement (within milliseconds) that its slots have moved, turns
//! itself into a replica of the new master and resyncs in full, throwing
//! away what it confirmed and never sent. Until it learns, it still
//! serves its old clients (the short split brain a forced failover has).

use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use super::crash::Deployment;
use super::link::{Link, FRONT_HOST};
use crate::support::cli::run_bounded;
use crate::support::RedisServer;

/// Masters, each with one replica.
const MASTERS: usize = 3;
/// How long forming the cluster may take.
const FORM_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a forced failover may take to be seen by every node.
const PROMOTION_LIMIT: Duration = Duration::from_secs(30);
/// A key in the locks' slot (their names carry the tag `{fo}`).
const PROBE: &str = "{fo}probe";
/// `--cluster-node-timeout`: 2 s, like the sentinels' down-after.
const NODE_TIMEOUT_MS: u64 = 2000;
/// How long after a node won an election it may be failed over to again.
/// A replica keeps its last election's votes for four node timeouts
/// (Redis' retry time); a forced failover within that time "wins" at
/// once with the old epoch, and the cluster takes it back.
const ELECTION_MEMORY: Duration = Duration::from_millis(4 * NODE_TIMEOUT_MS + 1000);

/// One node: the server, the link for its clients and replicas, the link
/// for its cluster bus.
#[derive(Debug)]
struct Node {
    server: RedisServer,
    link: Link,
    _bus: Link,
}

/// The cluster; see the module documentation.
#[derive(Debug)]
pub(crate) struct ClusterTopology {
    nodes: Vec<Node>,
    slot: u16,
    /// When each node last won an election we forced.
    won_at: Vec<Option<Instant>>,
}

impl ClusterTopology {
    /// Starts six nodes and their links, forms the cluster through the
    /// links and waits until it is [`healthy`](Self::healthy).
    ///
    /// # Panics
    ///
    /// When a node does not start, `redis-cli` fails, or the cluster is
    /// not healthy within 60 s.
    pub(crate) fn start() -> ClusterTopology {
        let nodes: Vec<Node> = (0..MASTERS * 2).map(|_| Node::start()).collect();
        let addrs: Vec<String> = nodes
            .iter()
            .map(|n| format!("{FRONT_HOST}:{}", n.server.port()))
            .collect();
        let mut command = Command::new("redis-cli");
        command.arg("--cluster").arg("create").args(&addrs).args([
            "--cluster-replicas",
            "1",
            "--cluster-yes",
        ]);
        let out = run_bounded(command, FORM_TIMEOUT, "redis-cli --cluster create");
        assert!(
            out.status_ok && out.stdout.contains("All 16384 slots covered"),
            "redis-cli --cluster create {addrs:?} failed\n{}\n{}",
            out.stdout,
            out.stderr
        );
        let slot: u16 = nodes[0].server.cmd(&["CLUSTER", "KEYSLOT", PROBE]);
        let won_at = vec![None; nodes.len()];
        let cluster = ClusterTopology {
            nodes,
            slot,
            won_at,
        };
        if Deployment::wait_healthy(&cluster, FORM_TIMEOUT).is_none() {
            panic!("cluster not healthy: {}", cluster.describe());
        }
        cluster
    }

    /// `redis://127.0.0.2:<port>/` of every node.
    pub(crate) fn urls(&self) -> Vec<String> {
        self.nodes
            .iter()
            .map(|n| format!("redis://{FRONT_HOST}:{}/", n.server.port()))
            .collect()
    }

    /// How many failovers the nodes won, per their logs (planned ones and
    /// any the cluster made on its own).
    fn switches(&self) -> u64 {
        self.nodes
            .iter()
            .map(|n| n.server.log().matches("Failover election won").count() as u64)
            .sum()
    }

    /// The node whose port is `port`.
    fn node_at(&self, port: u16) -> Option<usize> {
        self.nodes.iter().position(|n| n.server.port() == port)
    }

    /// The master's port for the locks' slot as node `i` sees it.
    fn owner_per(&self, i: usize) -> Option<u16> {
        let text = self.nodes[i]
            .server
            .try_cmd::<String>(&["CLUSTER", "NODES"])
            .ok()?;
        text.lines().find_map(|line| {
            let fields: Vec<&str> = line.split(' ').collect();
            let flags = fields.get(2)?;
            if !flags.contains("master") || flags.contains("fail") {
                return None;
            }
            let serves = fields.iter().skip(8).any(|range| {
                let mut ends = range.split('-');
                let lo = ends.next().and_then(|s| s.parse::<u16>().ok());
                let hi = ends.next().and_then(|s| s.parse::<u16>().ok()).or(lo);
                matches!((lo, hi), (Some(lo), Some(hi)) if lo <= self.slot && self.slot <= hi)
            });
            let addr = fields.get(1)?.split('@').next()?;
            serves
                .then(|| addr.rsplit(':').next()?.parse().ok())
                .flatten()
        })
    }

    /// Whether node `i` sees the node on `port` as a replica.
    fn is_replica_per(&self, i: usize, port: u16) -> bool {
        let Ok(text) = self.nodes[i]
            .server
            .try_cmd::<String>(&["CLUSTER", "NODES"])
        else {
            return false;
        };
        text.lines().any(|line| {
            let fields: Vec<&str> = line.split(' ').collect();
            let at_port = fields
                .get(1)
                .and_then(|a| a.split('@').next())
                .and_then(|a| a.rsplit(':').next())
                .is_some_and(|p| p == port.to_string());
            at_port && fields.get(2).is_some_and(|flags| flags.contains("slave"))
        })
    }

    /// The node that `master` says is its online replica.
    fn replica_of(&self, master: usize) -> Option<usize> {
        let info = self.nodes[master]
            .server
            .try_cmd::<String>(&["INFO", "replication"])
            .ok()?;
        let line = info
            .lines()
            .find(|l| l.starts_with("slave0:") && l.contains("state=online"))?;
        let port = line
            .split(',')
            .find_map(|kv| kv.strip_prefix("port="))?
            .parse()
            .ok()?;
        self.node_at(port)
    }

    fn healthy(&self) -> Option<usize> {
        let ok = (0..self.nodes.len()).all(|i| {
            self.nodes[i]
                .server
                .try_cmd::<String>(&["CLUSTER", "INFO"])
                .is_ok_and(|info| info.contains("cluster_state:ok"))
        });
        if !ok {
            return None;
        }
        let port = self.owner_per(0)?;
        if !(1..self.nodes.len()).all(|i| self.owner_per(i) == Some(port)) {
            return None;
        }
        let master = self.node_at(port)?;
        let replica = self.replica_of(master)?;
        if self.won_at[replica].is_some_and(|t| t.elapsed() < ELECTION_MEMORY) {
            return None;
        }
        // A just-demoted master is still a master to nodes the news has
        // not reached, and they deny it their vote: a forced failover sent
        // to it then would never complete (seen once in CI under load).
        let replica_port = self.nodes[replica].server.port();
        if !(0..self.nodes.len()).all(|i| self.is_replica_per(i, replica_port)) {
            return None;
        }
        let replica_info = self.nodes[replica]
            .server
            .try_cmd::<String>(&["INFO", "replication"])
            .ok()?;
        let points_at = format!("master_port:{port}");
        if !replica_info.contains(&points_at) || !replica_info.contains("master_link_status:up") {
            return None;
        }
        let server = &self.nodes[master].server;
        server.try_cmd::<()>(&["SET", PROBE, "1"]).ok()?;
        let acked: i64 = server.try_cmd(&["WAIT", "1", "200"]).ok()?;
        (acked >= 1).then_some(master)
    }
}

impl Deployment for ClusterTopology {
    fn wait_healthy(&self, limit: Duration) -> Option<usize> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(master) = self.healthy() {
                return Some(master);
            }
            if Instant::now() >= deadline {
                return None;
            }
            thread::sleep(Duration::from_millis(100));
        }
    }

    fn starve_replica_of(&self, master: usize) {
        self.nodes[master].link.starve_replicas();
    }

    /// `CLUSTER FAILOVER FORCE` on the starved replica; once every node
    /// names it master of the slot and the old master has turned replica,
    /// the starving ends (the promoted replica no longer reads the old
    /// stream, so nothing held back reaches it).
    fn fail_over(&mut self, master: usize) -> Result<u64, String> {
        let replica = self
            .replica_of(master)
            .ok_or_else(|| format!("no online replica of node {master}"))?;
        self.nodes[replica]
            .server
            .try_cmd::<()>(&["CLUSTER", "FAILOVER", "FORCE"])
            .map_err(|e| format!("CLUSTER FAILOVER FORCE: {e}"))?;
        let port = self.nodes[replica].server.port();
        let deadline = Instant::now() + PROMOTION_LIMIT;
        loop {
            let everyone = (0..self.nodes.len()).all(|i| self.owner_per(i) == Some(port));
            let demoted = self.nodes[master]
                .server
                .try_cmd::<String>(&["INFO", "replication"])
                .is_ok_and(|i| i.contains("role:slave"));
            if everyone && demoted {
                self.won_at[replica] = Some(Instant::now());
                return Ok(self.nodes[master].link.feed_replicas());
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "forced failover not complete within {PROMOTION_LIMIT:?}: {}",
                    self.describe()
                ));
            }
            thread::sleep(Duration::from_millis(20));
        }
    }

    fn switches(&self) -> u64 {
        ClusterTopology::switches(self)
    }

    fn describe(&self) -> String {
        let mut text = format!("\nslot {}", self.slot);
        for (i, n) in self.nodes.iter().enumerate() {
            let nodes = n
                .server
                .try_cmd::<String>(&["CLUSTER", "NODES"])
                .unwrap_or_else(|e| e.to_string());
            let log = n.server.log();
            let tail: Vec<&str> = log.lines().rev().take(12).collect();
            text.push_str(&format!(
                "\n--- node {i} :{} ---\n{nodes}\n(log, last lines first)\n{}",
                n.server.port(),
                tail.join("\n")
            ));
        }
        text
    }
}

impl Node {
    fn start() -> Node {
        // Every address the cluster hands out is the links' (announce-ip
        // covers the bus too); diskless sync without delay.
        let server = RedisServer::start_with_args(&[
            "--cluster-enabled",
            "yes",
            "--cluster-config-file",
            "nodes.conf",
            "--cluster-node-timeout",
            &NODE_TIMEOUT_MS.to_string(),
            "--cluster-announce-ip",
            FRONT_HOST,
            "--repl-diskless-sync-delay",
            "0",
        ]);
        let link = Link::start(server.port());
        let bus = Link::start_plain(server.port() + 10000);
        Node {
            server,
            link,
            _bus: bus,
        }
    }
}
