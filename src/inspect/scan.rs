//! Finding lock names with `SCAN` on every server that holds keys: the one
//! server, the sentinels' master, or each master of a cluster.

use std::collections::BTreeSet;

use redis::{ConnectionLike, RedisResult};

use super::pattern;
use super::snapshot::QUEUE_PREFIX;
use crate::error::Result;
use crate::server::Server;

/// Keys asked for per `SCAN` call.
const PAGE: usize = 1000;

/// The names of every hash matching `pattern` and of every lock whose fair
/// queue exists and whose name matches it: candidates, each still to be
/// read to know whether it is a lock.
pub(super) fn lock_names(server: &Server, pattern: &str) -> Result<BTreeSet<String>> {
    #[cfg(feature = "cluster")]
    if server.is_cluster() {
        server.check_open()?;
        let mut names = BTreeSet::new();
        for (address, mut conn) in server.connect_masters()? {
            let found =
                collect(&mut conn, pattern).map_err(|source| crate::error::Error::Connect {
                    url: format!("cluster node {address}"),
                    source,
                })?;
            names.extend(found);
        }
        return Ok(names);
    }
    // Every pooled connection reaches the same server; a scan cut short by
    // a dropped connection starts again on the next.
    server.run(|conn| collect(conn, pattern))
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
