//! A Redis Cluster, each node a [`RedisServer`] of its own, formed with
//! `redis-cli --cluster create` and stopped when dropped: masters only, or
//! each master with one replica (for failovers).

use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use super::cli::run_bounded;
use super::RedisServer;

/// How long the cluster may take to agree that it is whole (about 4 s here).
const FORM_TIMEOUT: Duration = Duration::from_secs(20);

/// How long `redis-cli --cluster create` may run.
const CREATE_TIMEOUT: Duration = Duration::from_secs(20);

/// Redis Cluster's number of hash slots.
const SLOTS: usize = 16384;

/// A running cluster of masters, each with no replica or one.
///
/// Dropping it kills every node and removes their directories.
#[derive(Debug)]
pub(crate) struct RedisCluster {
    nodes: Vec<RedisServer>,
    /// `owner[slot]` is the index in `nodes` of the master serving `slot`.
    owner: Vec<usize>,
}

impl RedisCluster {
    /// Starts `masters` cluster-enabled servers on free ports, joins them
    /// into one cluster that covers every slot, and waits until every node
    /// reports `cluster_state:ok` and knows every other node.
    ///
    /// # Panics
    ///
    /// If a server does not start, `redis-cli` is missing or fails, or the
    /// cluster is not whole within 20 s (the message has each node's view).
    pub(crate) fn start(masters: usize) -> RedisCluster {
        RedisCluster::start_with(masters, 0)
    }

    /// Like [`start`](Self::start), with one replica per master (so
    /// `2 * masters` nodes), and returns once every replica is in sync.
    ///
    /// # Panics
    ///
    /// As [`start`](Self::start) does, or if a replica is not in sync
    /// within 20 s.
    pub(crate) fn start_with_replicas(masters: usize) -> RedisCluster {
        let cluster = RedisCluster::start_with(masters, 1);
        cluster.wait_until_replicas_settle(masters);
        cluster
    }

    /// Waits until every replica's link is up and every node knows every
    /// replica as one: a master ignores a `CLUSTER FAILOVER` request from a
    /// replica it does not know yet.
    fn wait_until_replicas_settle(&self, masters: usize) {
        let deadline = Instant::now() + FORM_TIMEOUT;
        loop {
            let links_up = (0..self.nodes.len())
                .filter(|&i| !self.is_master(i))
                .all(|i| {
                    self.nodes[i]
                        .try_cmd::<String>(&["INFO", "replication"])
                        .is_ok_and(|info| info.contains("master_link_status:up"))
                });
            let views: Vec<String> = self
                .nodes
                .iter()
                .map(|n| {
                    n.try_cmd::<String>(&["CLUSTER", "NODES"])
                        .unwrap_or_default()
                })
                .collect();
            let replicas_known = views.iter().all(|view| {
                view.lines()
                    .filter(|l| l.split(' ').nth(2).is_some_and(|f| f.contains("slave")))
                    .count()
                    == masters
            });
            if links_up && replicas_known {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "replicas not settled within {FORM_TIMEOUT:?} (links up: {links_up}):\n{}",
                views.join("\n---\n")
            );
            thread::sleep(Duration::from_millis(50));
        }
    }

    fn start_with(masters: usize, replicas: usize) -> RedisCluster {
        assert!(masters >= 3, "Redis Cluster needs at least 3 masters");
        let nodes: Vec<RedisServer> = (0..masters * (1 + replicas))
            .map(|_| {
                RedisServer::start_with_args(&[
                    "--cluster-enabled",
                    "yes",
                    // Relative to the server's --dir, so each node has its own.
                    "--cluster-config-file",
                    "nodes.conf",
                    "--cluster-node-timeout",
                    "5000",
                    // Otherwise a replica's first sync waits 5 s.
                    "--repl-diskless-sync-delay",
                    "0",
                ])
            })
            .collect();
        let mut cluster = RedisCluster {
            nodes,
            owner: Vec::new(),
        };
        cluster.create(replicas);
        cluster.wait_until_whole();
        cluster.owner = cluster.read_slot_owners(None);
        cluster
    }

    fn create(&self, replicas: usize) {
        let addrs: Vec<String> = self
            .nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port()))
            .collect();
        let mut command = Command::new("redis-cli");
        let replicas = replicas.to_string();
        command.arg("--cluster").arg("create").args(&addrs).args([
            "--cluster-replicas",
            &replicas,
            "--cluster-yes",
        ]);
        let out = run_bounded(command, CREATE_TIMEOUT, "redis-cli --cluster create");
        assert!(
            out.status_ok && out.stdout.contains("All 16384 slots covered"),
            "redis-cli --cluster create {addrs:?} failed\n--- stdout ---\n{}\n--- stderr ---\n{}",
            out.stdout,
            out.stderr
        );
    }

    /// Polls `CLUSTER INFO` on every node until each says the cluster is ok,
    /// every slot is assigned and every node is known.
    fn wait_until_whole(&self) {
        let deadline = Instant::now() + FORM_TIMEOUT;
        let known = format!("cluster_known_nodes:{}", self.nodes.len());
        let assigned = format!("cluster_slots_assigned:{SLOTS}");
        loop {
            let infos: Vec<String> = self
                .nodes
                .iter()
                .map(|n| {
                    n.try_cmd::<String>(&["CLUSTER", "INFO"])
                        .unwrap_or_default()
                })
                .collect();
            let whole = infos.iter().all(|info| {
                info.contains("cluster_state:ok")
                    && info.contains(&assigned)
                    && info.lines().any(|l| l.trim() == known)
            });
            // Every node must also agree on who owns each slot, or a client
            // that asks one node for the map would be sent elsewhere.
            if whole && self.nodes_agree_on_slots(None) {
                return;
            }
            if Instant::now() >= deadline {
                let views: Vec<String> = self
                    .nodes
                    .iter()
                    .zip(&infos)
                    .map(|(n, info)| format!("--- node :{} ---\n{info}", n.port()))
                    .collect();
                panic!(
                    "cluster not whole within {FORM_TIMEOUT:?}\n{}",
                    views.join("\n")
                );
            }
            thread::sleep(Duration::from_millis(100));
        }
    }

    /// Whether every node but `dead` has the same slot map.
    fn nodes_agree_on_slots(&self, dead: Option<usize>) -> bool {
        let views: Vec<Option<String>> = self
            .nodes
            .iter()
            .enumerate()
            .filter(|(i, _)| Some(*i) != dead)
            .map(|(_, n)| {
                let text = n.try_cmd::<String>(&["CLUSTER", "NODES"]).ok()?;
                let mut lines: Vec<String> = text
                    .lines()
                    .map(|l| {
                        // id, address and slot ranges; not flags or epochs.
                        let f: Vec<&str> = l.split(' ').collect();
                        let slots = f.get(8..).unwrap_or_default().join(" ");
                        Some(format!("{} {} {slots}", f.first()?, f.get(1)?))
                    })
                    .collect::<Option<Vec<String>>>()?;
                lines.sort();
                Some(lines.join("\n"))
            })
            .collect();
        views.iter().all(|v| v.is_some() && *v == views[0])
    }

    /// Which node owns which slot, from each node's own `myself` line of
    /// `CLUSTER NODES` (but that of `dead`, which cannot answer).
    fn read_slot_owners(&self, dead: Option<usize>) -> Vec<usize> {
        let mut owner = vec![usize::MAX; SLOTS];
        for (index, node) in self.nodes.iter().enumerate() {
            if Some(index) == dead {
                continue;
            }
            let text: String = node.cmd(&["CLUSTER", "NODES"]);
            let myself = text
                .lines()
                .find(|l| l.split(' ').nth(2).is_some_and(|f| f.contains("myself")))
                .unwrap_or_else(|| panic!("no `myself` line in CLUSTER NODES:\n{text}"));
            for range in myself.split(' ').skip(8) {
                let (first, last) = match range.split_once('-') {
                    Some((a, b)) => (a, b),
                    None => (range, range),
                };
                let first: usize = first.parse().expect("slot number");
                let last: usize = last.parse().expect("slot number");
                for slot in &mut owner[first..=last] {
                    *slot = index;
                }
            }
        }
        assert!(
            owner.iter().all(|&o| o != usize::MAX),
            "some slots have no owner"
        );
        owner
    }

    /// The `myself` line of `CLUSTER NODES` split into its fields, as the
    /// node at `index` has it.
    fn own_view(&self, index: usize) -> Option<Vec<String>> {
        let text = self.nodes[index]
            .try_cmd::<String>(&["CLUSTER", "NODES"])
            .ok()?;
        let myself = text
            .lines()
            .find(|l| l.split(' ').nth(2).is_some_and(|f| f.contains("myself")))?;
        Some(myself.split(' ').map(str::to_owned).collect())
    }

    /// Whether the node at `index` says it is a master.
    fn is_master(&self, index: usize) -> bool {
        self.own_view(index)
            .is_some_and(|fields| fields.get(2).is_some_and(|f| f.contains("master")))
    }

    /// The index of the replica of the master at `master`.
    ///
    /// # Panics
    ///
    /// If it has none (a cluster from [`start`](Self::start)).
    pub(crate) fn replica_of(&self, master: usize) -> usize {
        let id = self.node_id(master);
        (0..self.nodes.len())
            .find(|&i| {
                self.own_view(i)
                    .is_some_and(|fields| fields.get(3).map(String::as_str) == Some(&*id))
            })
            .unwrap_or_else(|| panic!("master {master} has no replica"))
    }

    /// Fails the master at `master` over to its replica with a coordinated
    /// `CLUSTER FAILOVER` (the master stops taking writes until the replica
    /// has them all, then becomes its replica); returns the new master's
    /// index once every node agrees on the slots it now serves.
    ///
    /// # Panics
    ///
    /// If that does not happen within 20 s.
    pub(crate) fn fail_over(&mut self, master: usize) -> usize {
        let replica = self.replica_of(master);
        self.nodes[replica].cmd::<()>(&["CLUSTER", "FAILOVER"]);
        self.wait_for_promotion(master, replica, None);
        replica
    }

    /// Kills the master at `master` (SIGKILL); the other nodes mark it
    /// failed after the node timeout (5 s) and its replica takes over.
    /// Returns the new master's index once the nodes still running agree
    /// on the slots it now serves.
    ///
    /// # Panics
    ///
    /// If that does not happen within 20 s.
    pub(crate) fn kill_master(&mut self, master: usize) -> usize {
        let replica = self.replica_of(master);
        self.nodes[master].stop();
        self.wait_for_promotion(master, replica, Some(master));
        replica
    }

    fn wait_for_promotion(&mut self, master: usize, replica: usize, dead: Option<usize>) {
        let deadline = Instant::now() + FORM_TIMEOUT;
        let demoted = |cluster: &Self| dead == Some(master) || !cluster.is_master(master);
        while !(self.is_master(replica) && demoted(self) && self.nodes_agree_on_slots(dead)) {
            assert!(
                Instant::now() < deadline,
                "no failover of :{} to :{} within {FORM_TIMEOUT:?}\n--- views ---\n{:#?}\n\
                 --- replica log ---\n{}",
                self.nodes[master].port(),
                self.nodes[replica].port(),
                (0..self.nodes.len())
                    .map(|i| self.own_view(i).map(|v| v.join(" ")))
                    .collect::<Vec<_>>(),
                self.nodes[replica].log()
            );
            thread::sleep(Duration::from_millis(50));
        }
        self.owner = self.read_slot_owners(dead);
    }

    /// The cluster id of the node at `index` (`CLUSTER MYID`).
    pub(crate) fn node_id(&self, index: usize) -> String {
        self.nodes[index].cmd(&["CLUSTER", "MYID"])
    }

    /// Moves `slot`, with its keys, to the node at `to`, the way
    /// `redis-cli --cluster reshard` does: IMPORTING/MIGRATING, MIGRATE of
    /// every key, then `SETSLOT NODE` on every node (the old owner first
    /// after the new one, so clients are redirected from then on).
    ///
    /// # Panics
    ///
    /// If a step fails, or a node still disagrees after 10 s.
    pub(crate) fn move_slot(&mut self, slot: usize, to: usize) {
        let from = self.owner[slot];
        assert_ne!(from, to, "slot {slot} is already on node {to}");
        let slot_text = slot.to_string();
        let (from_id, to_id) = (self.node_id(from), self.node_id(to));
        let to_port = self.nodes[to].port().to_string();
        let importing = ["CLUSTER", "SETSLOT", &slot_text, "IMPORTING", &from_id];
        self.nodes[to].cmd::<()>(&importing);
        let migrating = ["CLUSTER", "SETSLOT", &slot_text, "MIGRATING", &to_id];
        self.nodes[from].cmd::<()>(&migrating);
        loop {
            let keys: Vec<String> =
                self.nodes[from].cmd(&["CLUSTER", "GETKEYSINSLOT", &slot_text, "100"]);
            if keys.is_empty() {
                break;
            }
            let mut args = vec!["MIGRATE", "127.0.0.1", &to_port, "", "0", "5000", "KEYS"];
            args.extend(keys.iter().map(String::as_str));
            let _: () = self.nodes[from].cmd(&args);
        }
        let mut order: Vec<usize> = vec![to, from];
        order.extend((0..self.nodes.len()).filter(|i| *i != to && *i != from));
        for i in order {
            self.nodes[i].cmd::<()>(&["CLUSTER", "SETSLOT", &slot_text, "NODE", &to_id]);
        }
        self.owner[slot] = to;
        let deadline = Instant::now() + Duration::from_secs(10);
        while !self.nodes_agree_on_slots(None) {
            assert!(
                Instant::now() < deadline,
                "nodes disagree on slot {slot} after moving it"
            );
            thread::sleep(Duration::from_millis(50));
        }
    }

    /// How many nodes there are (masters, and replicas if any).
    pub(crate) fn len(&self) -> usize {
        self.nodes.len()
    }

    /// The node at `index`, for raw commands and `freeze`/`stop`.
    pub(crate) fn node(&self, index: usize) -> &RedisServer {
        &self.nodes[index]
    }

    /// `redis://127.0.0.1:<port>/` of every node, the seed list for a client.
    pub(crate) fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(RedisServer::url).collect()
    }

    /// The hash slot of `key` (asked of the cluster, hash tags included).
    pub(crate) fn slot_of(&self, key: &str) -> usize {
        let slot: i64 = self.nodes[0].cmd(&["CLUSTER", "KEYSLOT", key]);
        usize::try_from(slot).expect("slot is not negative")
    }

    /// The index of the node that owns `key`'s slot.
    pub(crate) fn node_for_key(&self, key: &str) -> usize {
        self.owner[self.slot_of(key)]
    }

    /// The node that owns `key`'s slot.
    pub(crate) fn owner_of(&self, key: &str) -> &RedisServer {
        &self.nodes[self.node_for_key(key)]
    }

    /// Runs `args` on the node that owns `key` (which need not be one of the
    /// arguments), e.g. `cluster.cmd_for_key::<i64>("a", &["PTTL", "a"])`.
    ///
    /// # Panics
    ///
    /// If the command fails.
    pub(crate) fn cmd_for_key<T: redis::FromRedisValue>(&self, key: &str, args: &[&str]) -> T {
        self.owner_of(key).cmd(args)
    }

    /// One name per master, `names[i]` landing on master `i`, made of
    /// `prefix` and a number: `prefix-0`, `prefix-1`, … until each master
    /// has one.
    ///
    /// # Panics
    ///
    /// If 10 000 candidates leave a master without a name (they do not: the
    /// slots are spread evenly).
    pub(crate) fn names_on_each_master(&self, prefix: &str) -> Vec<String> {
        let mut names: Vec<Option<String>> = vec![None; self.nodes.len()];
        for n in 0..10_000 {
            let candidate = format!("{prefix}-{n}");
            let owner = self.node_for_key(&candidate);
            if names[owner].is_none() {
                names[owner] = Some(candidate);
            }
            if names.iter().all(Option::is_some) {
                return names.into_iter().flatten().collect();
            }
        }
        panic!("no name starting with {prefix:?} for every master: {names:?}");
    }
}
