//! What a Redis Cluster looks like: its slot map (`CLUSTER SLOTS`), its
//! masters, the Redis version they run, and so whether releases travel by
//! sharded or classic pub/sub.

#![cfg(feature = "cluster")]

use std::collections::BTreeSet;
use std::sync::Arc;

use redis::{ConnectionAddr, ConnectionInfo, RedisResult, Value};

use super::backend;
use super::pool::Pool;
use crate::config::Config;
use crate::error::Result;

/// Sharded pub/sub (`SSUBSCRIBE`/`SPUBLISH`) needs Redis 7 on every master.
const SHARDED_SINCE_MAJOR: u32 = 7;

/// One master's address as `CLUSTER SLOTS` reports it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Node {
    pub(crate) host: String,
    pub(crate) port: u16,
}

impl Node {
    /// `host:port`, which also names the node's pub/sub connection.
    pub(crate) fn address(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }
}

/// Slot ranges and the master that serves each.
#[derive(Debug, Default)]
pub(crate) struct SlotMap {
    ranges: Vec<(u16, u16, Node)>,
}

impl SlotMap {
    /// Asks any node for the current slots.
    pub(crate) fn load(pool: &Pool) -> Result<SlotMap> {
        let reply: Value = pool.run(|conn| redis::cmd("CLUSTER").arg("SLOTS").query(conn))?;
        Ok(SlotMap::parse(&reply))
    }

    /// Reads a `CLUSTER SLOTS` reply; entries of another shape are skipped.
    fn parse(reply: &Value) -> SlotMap {
        let mut ranges = Vec::new();
        if let Value::Array(entries) = reply {
            ranges.extend(entries.iter().filter_map(parse_range));
        }
        SlotMap { ranges }
    }

    /// The master of `slot`, and its address with the settings of `seed`.
    pub(crate) fn owner(
        &self,
        slot: u16,
        seed: &ConnectionInfo,
    ) -> RedisResult<(Arc<str>, ConnectionInfo)> {
        let (_, _, node) = self
            .ranges
            .iter()
            .find(|(start, end, _)| (*start..=*end).contains(&slot))
            .ok_or_else(|| {
                redis::RedisError::from(std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    format!("no cluster node serves slot {slot}"),
                ))
            })?;
        Ok((Arc::from(node.address()), node_at(seed, node)))
    }

    /// Every distinct master, in address order.
    pub(crate) fn masters(&self) -> BTreeSet<Node> {
        self.ranges
            .iter()
            .map(|(_, _, node)| node.clone())
            .collect()
    }
}

/// Whether every master of a cluster runs Redis 7 or later, and so serves
/// sharded pub/sub (`SSUBSCRIBE`/`SPUBLISH`), as Redisson decides. A master
/// that cannot be asked counts as too old.
pub(crate) fn serves_sharded_pubsub(
    pool: &Pool,
    seed: &ConnectionInfo,
    config: &Config,
) -> Result<bool> {
    let masters = SlotMap::load(pool)?.masters();
    Ok(masters.iter().all(|node| {
        major_version(node_at(seed, node), config).is_some_and(|v| v >= SHARDED_SINCE_MAJOR)
    }))
}

/// The major version a node reports in `INFO server`.
fn major_version(info: ConnectionInfo, config: &Config) -> Option<u32> {
    let mut conn = backend::direct_connection(info, config).ok()?;
    let text: String = redis::cmd("INFO").arg("server").query(&mut conn).ok()?;
    let version = text
        .lines()
        .find_map(|line| line.strip_prefix("redis_version:"))?;
    version.split('.').next()?.trim().parse().ok()
}

fn parse_range(entry: &Value) -> Option<(u16, u16, Node)> {
    let Value::Array(parts) = entry else {
        return None;
    };
    let (Value::Int(start), Value::Int(end), Value::Array(master)) =
        (parts.first()?, parts.get(1)?, parts.get(2)?)
    else {
        return None;
    };
    let host = match master.first()? {
        Value::BulkString(b) => String::from_utf8(b.clone()).ok()?,
        Value::SimpleString(s) => s.clone(),
        _ => return None,
    };
    let Value::Int(port) = master.get(1)? else {
        return None;
    };
    let node = Node {
        host,
        port: u16::try_from(*port).ok()?,
    };
    Some((u16::try_from(*start).ok()?, u16::try_from(*end).ok()?, node))
}

/// The settings of `seed` (credentials, TLS) pointed at another cluster
/// node; a node that reports no host lives where the seed is.
pub(crate) fn node_at(seed: &ConnectionInfo, node: &Node) -> ConnectionInfo {
    let host = match (node.host.is_empty(), seed.addr()) {
        (true, ConnectionAddr::Tcp(h, _) | ConnectionAddr::TcpTls { host: h, .. }) => h.clone(),
        _ => node.host.clone(),
    };
    let port = node.port;
    let addr = match seed.addr() {
        ConnectionAddr::TcpTls {
            insecure,
            tls_params,
            ..
        } => ConnectionAddr::TcpTls {
            host,
            port,
            insecure: *insecure,
            tls_params: tls_params.clone(),
        },
        _ => ConnectionAddr::Tcp(host, port),
    };
    seed.clone().set_addr(addr)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range(start: i64, end: i64, host: &str, port: i64) -> Value {
        Value::Array(vec![
            Value::Int(start),
            Value::Int(end),
            Value::Array(vec![
                Value::BulkString(host.as_bytes().to_vec()),
                Value::Int(port),
            ]),
        ])
    }

    #[test]
    fn slots_are_read_and_owners_found() {
        let reply = Value::Array(vec![
            range(0, 8191, "10.0.0.1", 7000),
            range(8192, 16383, "", 7001),
            Value::Int(3), // not a range: skipped
        ]);
        let map = SlotMap::parse(&reply);
        let seed: ConnectionInfo =
            redis::IntoConnectionInfo::into_connection_info("redis://:pw@127.0.0.1:6379/").unwrap();
        let (id, info) = map.owner(100, &seed).unwrap();
        assert_eq!(&*id, "10.0.0.1:7000");
        assert_eq!(info.addr(), &ConnectionAddr::Tcp("10.0.0.1".into(), 7000));
        assert_eq!(info.redis_settings().password(), Some("pw"));
        // A node without a host lives where the seed is.
        let (_, info) = map.owner(9000, &seed).unwrap();
        assert_eq!(info.addr(), &ConnectionAddr::Tcp("127.0.0.1".into(), 7001));
        assert_eq!(map.masters().len(), 2);
        assert!(SlotMap::default().owner(0, &seed).is_err());
    }
}
