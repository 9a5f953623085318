//! Two servers (one master, one replica, roles swapping at each failover)
//! behind their [`Link`]s and three sentinels monitoring them through the
//! links; crashing the master and bringing it back as a replica, or (the
//! `live` mode) cutting the master off from the sentinels only, so that
//! they replace it while it still serves its clients, and letting them
//! reach it again after a while (they then demote it).

use std::collections::HashMap;
use std::thread;
use std::time::{Duration, Instant};

use super::crash::Deployment;
use super::link::{Link, FRONT_HOST};
use crate::support::sentinel::{Sentinel, MASTER_NAME};
use crate::support::RedisServer;

/// How long a crash may take to become a promotion.
const PROMOTION_LIMIT: Duration = Duration::from_secs(30);
/// How long, in the `live` mode, the replaced master stays cut off from
/// the sentinels after the promotion (it serves whoever still talks to it).
const SPLIT_AFTER_PROMOTION: Duration = Duration::from_secs(2);

/// One server and the link that stands for its address.
#[derive(Debug)]
struct Node {
    server: RedisServer,
    link: Link,
}

/// The deployment; see the module documentation.
#[derive(Debug)]
pub(crate) struct Topology {
    nodes: [Node; 2],
    sentinels: Vec<Sentinel>,
    /// Fail over by a partition from the sentinels, not by a crash.
    live: bool,
}

impl Topology {
    /// Starts both servers (node 0 the master), their links and three
    /// sentinels, and waits until it is [`healthy`](Self::healthy).
    ///
    /// # Panics
    ///
    /// When a process does not start or the deployment is not healthy
    /// within 30 s.
    pub(crate) fn start() -> Topology {
        Topology::start_with(false)
    }

    /// As [`start`](Self::start), for failovers of a master that lives on
    /// (see the module documentation); nothing is starved then.
    ///
    /// # Panics
    ///
    /// As [`start`](Self::start) does.
    pub(crate) fn start_live() -> Topology {
        Topology::start_with(true)
    }

    fn start_with(live: bool) -> Topology {
        let nodes = [Node::start(), Node::start()];
        replicate(&nodes[1].server, nodes[0].server.port());
        let sentinels: Vec<Sentinel> = (0..3)
            .map(|_| Sentinel::start_monitoring(FRONT_HOST, nodes[0].server.port()))
            .collect();
        for s in &sentinels {
            // Not the 1 s of the support's sentinels: on this busy 2-core
            // machine a master just promoted often misses its pings for
            // about a second, and a second failover (the old master alive,
            // not demoted for 8 s) would mix split brain into a
            // measurement of lost replication. Unplanned failovers are
            // still counted (`switches`).
            s.cmd::<()>(&[
                "SENTINEL",
                "SET",
                MASTER_NAME,
                "down-after-milliseconds",
                "2000",
            ])
            .expect("SENTINEL SET down-after-milliseconds");
        }
        let topology = Topology {
            nodes,
            sentinels,
            live,
        };
        if topology.wait_healthy(Duration::from_secs(30)).is_none() {
            panic!("failover topology not healthy: {}", topology.describe());
        }
        topology
    }

    /// `redis://` URLs of the sentinels.
    pub(crate) fn sentinel_urls(&self) -> Vec<String> {
        self.sentinels.iter().map(Sentinel::url).collect()
    }

    /// The master's node when every sentinel names it, it says it is a
    /// master, the other node is its replica, online and acknowledging
    /// writes (`WAIT`), and every sentinel sees that replica up. The next
    /// failover can then only promote a replica that had everything
    /// written before.
    pub(crate) fn healthy(&self) -> Option<usize> {
        let port = self.agreed_master()?;
        let master = self.nodes.iter().position(|n| n.server.port() == port)?;
        let replica = &self.nodes[1 - master].server;
        let info = self.nodes[master]
            .server
            .try_cmd::<String>(&["INFO", "replication"])
            .ok()?;
        let online = format!("port={},state=online", replica.port());
        if !info.contains("role:master") || !info.contains(&online) {
            return None;
        }
        let replica_info = replica.try_cmd::<String>(&["INFO", "replication"]).ok()?;
        let points_at = format!("master_port:{port}");
        if !replica_info.contains(&points_at) || !replica_info.contains("master_link_status:up") {
            return None;
        }
        let server = &self.nodes[master].server;
        server.try_cmd::<()>(&["SET", "failover-probe", "1"]).ok()?;
        let acked: i64 = server.try_cmd(&["WAIT", "1", "200"]).ok()?;
        if acked < 1 {
            return None;
        }
        let seen_up = self.sentinels.iter().all(|s| {
            let replicas: Result<Vec<HashMap<String, String>>, String> =
                s.cmd(&["SENTINEL", "REPLICAS", MASTER_NAME]);
            replicas.is_ok_and(|list| {
                list.iter().any(|r| {
                    r.get("port").map(String::as_str) == Some(&*replica.port().to_string())
                        && r.get("flags").map(String::as_str) == Some("slave")
                })
            })
        });
        seen_up.then_some(master)
    }

    /// Polls [`healthy`](Self::healthy) until it says yes or `limit` passes.
    pub(crate) fn wait_healthy(&self, limit: Duration) -> Option<usize> {
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

    /// Starts losing what `node` sends to its replica (see [`Link`]).
    pub(crate) fn starve_replica_of(&self, node: usize) {
        self.nodes[node].link.starve_replicas();
    }

    /// Crashes `node`: its address goes dark (connections cut, connects
    /// refused, the withheld stream lost) and the server is `SIGKILL`ed.
    /// Returns how many replication bytes were lost.
    pub(crate) fn crash(&mut self, node: usize) -> u64 {
        let node = &mut self.nodes[node];
        let lost = node.link.down();
        node.server.stop();
        lost
    }

    /// Waits until every sentinel names `node` master and it says so;
    /// whether that happened within `limit`.
    pub(crate) fn wait_promoted(&self, node: usize, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        let port = self.nodes[node].server.port();
        loop {
            let promoted = self.agreed_master() == Some(port)
                && self.nodes[node]
                    .server
                    .try_cmd::<String>(&["INFO", "replication"])
                    .is_ok_and(|i| i.contains("role:master"));
            if promoted {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            thread::sleep(Duration::from_millis(50));
        }
    }

    /// Restarts the crashed `node` on its port, without persistence (it
    /// comes back empty), makes it a replica of `master` before its
    /// address answers again, then brings the address back: nobody ever
    /// sees it as an empty master.
    pub(crate) fn rejoin(&mut self, node: usize, master: usize) {
        let master_port = self.nodes[master].server.port();
        let node = &mut self.nodes[node];
        node.server.start_again();
        replicate(&node.server, master_port);
        node.link.up();
    }

    /// How many times the sentinels switched masters (the most any one of
    /// them logged): planned failovers plus any they started on their own.
    fn switches(&self) -> u64 {
        self.sentinels
            .iter()
            .map(|s| s.log().matches("+switch-master").count() as u64)
            .max()
            .unwrap_or(0)
    }

    /// What every process says, for a failure message.
    pub(crate) fn describe(&self) -> String {
        let mut text = String::new();
        for (i, node) in self.nodes.iter().enumerate() {
            let info = node
                .server
                .try_cmd::<String>(&["INFO", "replication"])
                .unwrap_or_else(|e| e.to_string());
            text.push_str(&format!(
                "\n--- node {i} :{} ---\n{info}",
                node.server.port()
            ));
        }
        for s in &self.sentinels {
            text.push_str(&format!(
                "\n--- sentinel {} ---\n{:?}",
                s.url(),
                s.master_state()
            ));
        }
        text.push_str(&format!(
            "\n--- first sentinel's log ---\n{}",
            self.sentinels[0].log()
        ));
        text
    }

    /// The master's port when all sentinels name the same one.
    fn agreed_master(&self) -> Option<u16> {
        let ports: Vec<Option<u16>> = self
            .sentinels
            .iter()
            .map(|s| s.master_port().ok())
            .collect();
        let first = ports[0]?;
        ports.iter().all(|p| *p == Some(first)).then_some(first)
    }
}

impl Node {
    fn start() -> Node {
        // Diskless sync without delay: a rejoining server is in sync in
        // milliseconds. The announced address is the link's.
        let server = RedisServer::start_with_args(&[
            "--repl-diskless-sync-delay",
            "0",
            "--replica-announce-ip",
            FRONT_HOST,
        ]);
        let link = Link::start(server.port());
        Node { server, link }
    }
}

/// `REPLICAOF` the server whose link is on `master_port`, sent to the
/// server directly.
fn replicate(server: &RedisServer, master_port: u16) {
    server.cmd::<()>(&["REPLICAOF", FRONT_HOST, &master_port.to_string()]);
}

impl Deployment for Topology {
    fn wait_healthy(&self, limit: Duration) -> Option<usize> {
        Topology::wait_healthy(self, limit)
    }

    fn starve_replica_of(&self, master: usize) {
        if !self.live {
            Topology::starve_replica_of(self, master);
        }
    }

    /// A crash of the master, the sentinels' promotion of the replica, the
    /// old master's rejoin. Live: the master cut off from the sentinels,
    /// their promotion of the replica, the split kept a while, and the
    /// sentinels let back in (the next wait for health waits until they
    /// have demoted it).
    fn fail_over(&mut self, master: usize) -> Result<u64, String> {
        if self.live {
            self.nodes[master].link.isolate_sentinels();
            let promoted = self.wait_promoted(1 - master, PROMOTION_LIMIT);
            if promoted {
                thread::sleep(SPLIT_AFTER_PROMOTION);
            }
            self.nodes[master].link.admit_sentinels();
            return if promoted {
                Ok(0)
            } else {
                Err(format!(
                    "no promotion within {PROMOTION_LIMIT:?}: {}",
                    self.describe()
                ))
            };
        }
        let withheld = self.crash(master);
        if !self.wait_promoted(1 - master, PROMOTION_LIMIT) {
            return Err(format!(
                "no promotion within {PROMOTION_LIMIT:?}: {}",
                self.describe()
            ));
        }
        self.rejoin(master, 1 - master);
        Ok(withheld)
    }

    fn switches(&self) -> u64 {
        Topology::switches(self)
    }

    fn describe(&self) -> String {
        Topology::describe(self)
    }
}
