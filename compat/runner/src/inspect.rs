//! Raw access to the servers under test, for what the checks look at
//! directly: keys, TTLs, queues and who is subscribed to which channel.

use std::sync::Mutex;
use std::time::Duration;

/// One connection per node; on a cluster, the slot table to route by key.
pub struct Inspector {
    nodes: Vec<Mutex<redis::Connection>>,
    /// `(first, last, node)` per slot range; empty outside a cluster.
    slots: Vec<(i64, i64, usize)>,
}

impl Inspector {
    /// One server at `url`.
    pub fn single(url: &str) -> Result<Inspector, String> {
        Ok(Inspector {
            nodes: vec![Mutex::new(connect(url)?)],
            slots: Vec::new(),
        })
    }

    /// The cluster of `urls`, its slot table read from the first node.
    pub fn cluster(urls: &[String]) -> Result<Inspector, String> {
        let mut nodes = Vec::new();
        let mut ports = Vec::new();
        for url in urls {
            let mut con = connect(url)?;
            let port: i64 = redis::cmd("CONFIG")
                .arg("GET")
                .arg("port")
                .query::<Vec<String>>(&mut con)
                .map_err(|e| e.to_string())?
                .get(1)
                .and_then(|p| p.parse().ok())
                .ok_or("no port in CONFIG GET port")?;
            ports.push(port);
            nodes.push(Mutex::new(con));
        }
        let ranges: Vec<redis::Value> = redis::cmd("CLUSTER")
            .arg("SLOTS")
            .query(&mut *nodes[0].lock().map_err(|_| "poisoned")?)
            .map_err(|e| e.to_string())?;
        let mut slots = Vec::new();
        for range in ranges {
            // [first, last, [host, port, id, ...], replicas...]
            let parts: Vec<redis::Value> =
                redis::from_redis_value(range).map_err(|e| e.to_string())?;
            let int = |v: Option<&redis::Value>| -> Result<i64, String> {
                let v = v.ok_or("short CLUSTER SLOTS entry")?;
                redis::from_redis_value_ref(v).map_err(|e| e.to_string())
            };
            let (first, last) = (int(parts.first())?, int(parts.get(1))?);
            let master: Vec<redis::Value> = match parts.get(2) {
                Some(v) => redis::from_redis_value_ref(v).map_err(|e| e.to_string())?,
                None => return Err("CLUSTER SLOTS entry without a master".into()),
            };
            let port = int(master.get(1))?;
            let node = ports
                .iter()
                .position(|p| *p == port)
                .ok_or("CLUSTER SLOTS names an unknown node")?;
            slots.push((first, last, node));
        }
        Ok(Inspector { nodes, slots })
    }

    pub fn is_cluster(&self) -> bool {
        !self.slots.is_empty()
    }

    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// The index of the node that serves `key`.
    pub fn node_for(&self, key: &str) -> Result<usize, String> {
        if !self.is_cluster() {
            return Ok(0);
        }
        let slot: i64 = self.on(0, redis::cmd("CLUSTER").arg("KEYSLOT").arg(key))?;
        self.slots
            .iter()
            .find(|(a, b, _)| (*a..=*b).contains(&slot))
            .map(|(_, _, n)| *n)
            .ok_or_else(|| format!("no node serves slot {slot}"))
    }

    /// Runs `cmd` on node `index`.
    pub fn on<T: redis::FromRedisValue>(
        &self,
        index: usize,
        cmd: &redis::Cmd,
    ) -> Result<T, String> {
        let mut con = self.nodes[index].lock().map_err(|_| "poisoned")?;
        cmd.query(&mut *con).map_err(|e| e.to_string())
    }

    /// Runs `cmd` on the node that serves `key`.
    pub fn at<T: redis::FromRedisValue>(&self, key: &str, cmd: &redis::Cmd) -> Result<T, String> {
        self.on(self.node_for(key)?, cmd)
    }

    /// `(classic, sharded)` subscriber counts of `channel`: classic summed
    /// over every node, sharded from the node that serves the channel's slot.
    pub fn subscribers(&self, channel: &str) -> Result<(i64, i64), String> {
        let mut classic = 0;
        for index in 0..self.nodes.len() {
            let (_, n): (String, i64) =
                self.on(index, redis::cmd("PUBSUB").arg("NUMSUB").arg(channel))?;
            classic += n;
        }
        let sharded = if self.is_cluster() {
            let (_, n): (String, i64) = self.at(
                channel,
                redis::cmd("PUBSUB").arg("SHARDNUMSUB").arg(channel),
            )?;
            n
        } else {
            0
        };
        Ok((classic, sharded))
    }

    /// Every key on every node that matches the glob `pattern`, sorted.
    pub fn keys(&self, pattern: &str) -> Result<Vec<String>, String> {
        let mut keys = Vec::new();
        for index in 0..self.nodes.len() {
            let found: Vec<String> = self.on(index, redis::cmd("KEYS").arg(pattern))?;
            keys.extend(found);
        }
        keys.sort();
        Ok(keys)
    }

    /// Names `prefix-0`, `prefix-1`, ...: the first one served by each node.
    pub fn name_per_node(&self, prefix: &str) -> Result<Vec<String>, String> {
        let mut names: Vec<Option<String>> = vec![None; self.nodes.len()];
        for n in 0..10_000 {
            let candidate = format!("{prefix}-{n}");
            let node = self.node_for(&candidate)?;
            if names[node].is_none() {
                names[node] = Some(candidate);
            }
            if names.iter().all(Option::is_some) {
                return Ok(names.into_iter().flatten().collect());
            }
        }
        Err(format!("no {prefix}-N name for every node"))
    }
}

fn connect(url: &str) -> Result<redis::Connection, String> {
    let con = redis::Client::open(url)
        .and_then(|c| c.get_connection_with_timeout(Duration::from_secs(2)))
        .map_err(|e| format!("{url}: {e}"))?;
    con.set_read_timeout(Some(Duration::from_secs(5)))
        .map_err(|e| e.to_string())?;
    Ok(con)
}
