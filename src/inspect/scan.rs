//! Finding lock names with `SCAN` on every server that holds keys: the one
//! server, the sentinels' master, or each master of a cluster.

use std::collections::BTreeSet;

use redis::{ConnectionLike, RedisResult};

use super::pattern;
use super::snapshot::QUEUE_PREFIX;
use crate::client::Client;
use crate::error::Result;

/// Keys asked for per `SCAN` call.
const PAGE: usize = 1000;

/// The names of every hash matching `pattern` and of every lock whose fair
/// queue exists and whose name matches it: candidates, each still to be
/// read to know whether it is a lock.
pub(super) fn lock_names(client: &Client, pattern: &str) -> Result<BTreeSet<String>> {
    #[cfg(feature = "cluster")]
    if let crate::config::Deployment::Cluster(seeds) = &client.config().deployment {
        let mut names = BTreeSet::new();
        for mut master in cluster::masters(client, seeds)? {
            let found = collect(&mut master.conn, pattern).map_err(|source| {
                crate::error::Error::Connect {
                    url: format!("cluster node {}", master.address),
                    source,
                }
            })?;
            names.extend(found);
        }
        return Ok(names);
    }
    // Every pooled connection reaches the same server; a scan cut short by
    // a dropped connection starts again on the next.
    client.run(|conn| collect(conn, pattern))
}

/// The candidate names on the server behind `conn`.
fn collect(conn: &mut dyn ConnectionLike, pattern: &str) -> RedisResult<BTreeSet<String>> {
    let mut names = BTreeSet::new();
    for key in scan(conn, pattern, "hash")? {
        if let Ok(name) = String::from_utf8(key) {
            names.insert(name);
        }
    }
    let queues = format!("{QUEUE_PREFIX}:*");
    for key in scan(conn, &queues, "list")? {
        let name = String::from_utf8(key)
            .ok()
            .and_then(|key| name_of_helper(QUEUE_PREFIX, &key));
        if let Some(name) = name {
            if pattern::matches(pattern.as_bytes(), name.as_bytes()) {
                names.insert(name);
            }
        }
    }
    Ok(names)
}

/// Every key of `key_type` matching `pattern` on the server behind `conn`.
fn scan(conn: &mut dyn ConnectionLike, pattern: &str, key_type: &str) -> RedisResult<Vec<Vec<u8>>> {
    let mut keys = Vec::new();
    let mut cursor: u64 = 0;
    loop {
        let (next, page): (u64, Vec<Vec<u8>>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(pattern)
            .arg("COUNT")
            .arg(PAGE)
            .arg("TYPE")
            .arg(key_type)
            .query(conn)?;
        keys.extend(page);
        if next == 0 {
            return Ok(keys);
        }
        cursor = next;
    }
}

/// The lock name inside a helper key `prefix:{name}` or `prefix:name` (the
/// latter for names that carry their own hash tag). `prefix:{x}` is read as
/// lock `x`, although lock `{x}` has the same helper keys.
fn name_of_helper(prefix: &str, key: &str) -> Option<String> {
    let rest = key.strip_prefix(prefix)?.strip_prefix(':')?;
    if let Some(inner) = rest.strip_prefix('{').and_then(|r| r.strip_suffix('}')) {
        if !inner.contains('{') && !inner.is_empty() {
            return Some(inner.to_owned());
        }
    }
    rest.contains('{').then(|| rest.to_owned())
}

#[cfg(feature = "cluster")]
mod cluster {
    //! Direct connections to each master of a cluster: `SCAN` covers only
    //! the node it is sent to, and the cluster client routes a keyless
    //! command to any one node.

    use std::collections::BTreeSet;

    use redis::{IntoConnectionInfo, Value};

    use crate::client::Client;
    use crate::error::{Error, Result};

    /// A connection to one master.
    pub(super) struct Master {
        /// `host:port`, for errors.
        pub(super) address: String,
        pub(super) conn: redis::Connection,
    }

    /// Connects to every master listed by `CLUSTER SLOTS`, with the
    /// credentials and TLS settings of the first seed.
    pub(super) fn masters(client: &Client, seeds: &[String]) -> Result<Vec<Master>> {
        let reply: Value = client.run(|conn| redis::cmd("CLUSTER").arg("SLOTS").query(conn))?;
        let seed = seeds
            .first()
            .map(String::as_str)
            .unwrap_or_default()
            .into_connection_info()
            .map_err(|e| Error::InvalidUrl {
                url: crate::config::redact_url(seeds.first().map_or("", String::as_str)),
                reason: e.to_string(),
            })?;
        let config = client.config();
        let mut masters = Vec::new();
        for (host, port) in addresses(&reply) {
            let address = format!("{host}:{port}");
            let connect_error = |source| Error::Connect {
                url: format!("cluster node {address}"),
                source,
            };
            let info = crate::backend::node_at(&seed, &host, port);
            #[cfg(feature = "tls")]
            let node = match &config.tls_root_cert {
                Some(pem) => redis::Client::build_with_tls(
                    info,
                    redis::TlsCertificates {
                        client_tls: None,
                        root_cert: Some(pem.clone()),
                    },
                ),
                None => redis::Client::open(info),
            };
            #[cfg(not(feature = "tls"))]
            let node = redis::Client::open(info);
            let conn = node
                .and_then(|node| node.get_connection_with_timeout(config.connect_timeout))
                .and_then(|conn| {
                    conn.set_read_timeout(Some(config.response_timeout))?;
                    conn.set_write_timeout(Some(config.response_timeout))?;
                    Ok(conn)
                })
                .map_err(connect_error)?;
            masters.push(Master { address, conn });
        }
        Ok(masters)
    }

    /// The distinct masters of a `CLUSTER SLOTS` reply, in order.
    fn addresses(reply: &Value) -> BTreeSet<(String, u16)> {
        let mut masters = BTreeSet::new();
        let Value::Array(ranges) = reply else {
            return masters;
        };
        for range in ranges {
            let Value::Array(parts) = range else { continue };
            let Some(Value::Array(master)) = parts.get(2) else {
                continue;
            };
            let host = match master.first() {
                Some(Value::BulkString(b)) => String::from_utf8_lossy(b).into_owned(),
                Some(Value::SimpleString(s)) => s.clone(),
                _ => continue,
            };
            let Some(port) = master.get(1).and_then(|p| match p {
                Value::Int(p) => u16::try_from(*p).ok(),
                _ => None,
            }) else {
                continue;
            };
            masters.insert((host, port));
        }
        masters
    }
}

#[cfg(test)]
mod tests {
    use super::name_of_helper;

    #[test]
    fn helper_keys_give_back_the_lock_name() {
        let q = "redisson_lock_queue";
        assert_eq!(
            name_of_helper(q, "redisson_lock_queue:{orders:42}").as_deref(),
            Some("orders:42")
        );
        assert_eq!(
            name_of_helper(q, "redisson_lock_queue:{orders}:42").as_deref(),
            Some("{orders}:42")
        );
        assert_eq!(
            name_of_helper(q, "redisson_lock_queue:{a}b}").as_deref(),
            Some("a}b")
        );
        assert_eq!(name_of_helper(q, "redisson_lock_queue:plain"), None);
        assert_eq!(name_of_helper(q, "other:{x}"), None);
    }
}
