//! Finding lock names with `SCAN` on every server that holds keys: the one
//! server, the sentinels' master, or each master of a cluster.

use std::collections::BTreeSet;

use redis::{ConnectionLike, RedisResult};

use super::pattern;
use super::snapshot::{QUEUE_PREFIX, TOKEN_PREFIX};
use crate::error::Result;
use crate::server::Server;

/// Keys asked for per `SCAN` call.
const PAGE: usize = 1000;

/// The names of every hash matching `pattern` and of every lock whose fair
/// queue exists and whose name matches it: candidates, each still to be
/// read to know whether it is a lock.
pub(super) fn lock_names(server: &Server, pattern: &str) -> Result<BTreeSet<String>> {
    on_every_master(server, |conn| collect(conn, pattern))
}

/// The names that may hold a semaphore or a count-down latch: every string
/// matching `pattern` but the library's helper keys, and the name of every
/// permit-expirable semaphore whose permit set (`{name}:timeout`) exists
/// and whose name matches it.
pub(super) fn counter_names(server: &Server, pattern: &str) -> Result<BTreeSet<String>> {
    on_every_master(server, |conn| collect_counters(conn, pattern))
}

/// Runs `collect` on every server that holds keys and merges what it finds.
fn on_every_master(
    server: &Server,
    collect: impl Fn(&mut dyn ConnectionLike) -> RedisResult<BTreeSet<String>>,
) -> Result<BTreeSet<String>> {
    #[cfg(feature = "cluster")]
    if server.is_cluster() {
        server.check_open()?;
        let mut names = BTreeSet::new();
        for (address, mut conn) in server.connect_masters()? {
            let found = collect(&mut conn).map_err(|source| crate::error::Error::Connect {
                url: format!("cluster node {address}"),
                source,
            })?;
            names.extend(found);
        }
        return Ok(names);
    }
    // Every pooled connection reaches the same server; a scan cut short by
    // a dropped connection starts again on the next.
    server.run(|conn| collect(conn))
}

/// The counter candidates on the server behind `conn`.
fn collect_counters(conn: &mut dyn ConnectionLike, pattern: &str) -> RedisResult<BTreeSet<String>> {
    let mut names = BTreeSet::new();
    scan(conn, pattern, "string", |conn, page| {
        names.extend(numbers(conn, page)?);
        Ok(())
    })?;
    scan(conn, "*:timeout", "zset", |_, page| {
        let found = page
            .into_iter()
            .filter_map(|key| String::from_utf8(key).ok())
            .filter_map(|key| name_of_permit_set(&key))
            .filter(|name| pattern::matches(pattern.as_bytes(), name.as_bytes()));
        names.extend(found);
        Ok(())
    })?;
    Ok(names)
}

/// The strings of `page` that hold a number and are not our helper keys,
/// their values read in one round trip (`GET`, pipelined): a keyspace of
/// other strings costs a pipelined command per key, not a script.
fn numbers(conn: &mut dyn ConnectionLike, page: Vec<Vec<u8>>) -> RedisResult<Vec<String>> {
    let page: Vec<String> = page
        .into_iter()
        .filter_map(|key| String::from_utf8(key).ok())
        .filter(|key| !is_helper_string(key))
        .collect();
    if page.is_empty() {
        return Ok(page);
    }
    let mut pipe = redis::pipe();
    for key in &page {
        pipe.cmd("GET").arg(key);
    }
    // Nil for a key deleted since the scan saw it.
    let values: Vec<Option<Vec<u8>>> = pipe.query(conn)?;
    Ok(page
        .into_iter()
        .zip(values)
        .filter(|(_, value)| {
            value
                .as_deref()
                .and_then(|v| std::str::from_utf8(v).ok())
                .is_some_and(|v| v.parse::<i64>().is_ok())
        })
        .map(|(key, _)| key)
        .collect())
}

/// Whether a string key is one of the library's own helpers: a request or
/// unlock latch, a fencing token counter, a read hold's timeout key.
fn is_helper_string(key: &str) -> bool {
    key.starts_with("redisson_unlock_latch:")
        || key.starts_with(TOKEN_PREFIX)
        || key.contains(":rwlock_timeout:")
}

/// The semaphore name of a permit set `{name}:timeout`, or `name:timeout`
/// for a name with its own hash tag (see `names::suffixed`).
fn name_of_permit_set(key: &str) -> Option<String> {
    let rest = key.strip_suffix(":timeout")?;
    if let Some(inner) = rest.strip_prefix('{').and_then(|r| r.strip_suffix('}')) {
        if !inner.contains('{') && !inner.is_empty() {
            return Some(inner.to_owned());
        }
    }
    rest.contains('{').then(|| rest.to_owned())
}

/// The candidate names on the server behind `conn`.
fn collect(conn: &mut dyn ConnectionLike, pattern: &str) -> RedisResult<BTreeSet<String>> {
    let mut names = BTreeSet::new();
    scan(conn, pattern, "hash", |conn, page| {
        names.extend(lock_like(conn, page)?);
        Ok(())
    })?;
    let queues = format!("{QUEUE_PREFIX}:*");
    scan(conn, &queues, "list", |_, page| {
        let found = page
            .into_iter()
            .filter_map(|key| String::from_utf8(key).ok())
            .filter_map(|key| name_of_helper(QUEUE_PREFIX, &key))
            .filter(|name| pattern::matches(pattern.as_bytes(), name.as_bytes()));
        names.extend(found);
        Ok(())
    })?;
    Ok(names)
}

/// Calls `each_page` with every page of keys of `key_type` matching
/// `pattern` on the server behind `conn`.
fn scan(
    conn: &mut dyn ConnectionLike,
    pattern: &str,
    key_type: &str,
    mut each_page: impl FnMut(&mut dyn ConnectionLike, Vec<Vec<u8>>) -> RedisResult<()>,
) -> RedisResult<()> {
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
        if !page.is_empty() {
            each_page(conn, page)?;
        }
        if next == 0 {
            return Ok(());
        }
        cursor = next;
    }
}

/// The hashes of `page` that may be locks, asked in one round trip: one
/// field of each (`HRANDFIELD`, pipelined). Every field of a lock's hash is
/// a holder id or a read-write lock's `mode`, so a hash whose field is
/// neither is no lock; the others are read in full later. A keyspace of
/// hashes that are not locks thus costs a pipelined command per key, not a
/// script.
fn lock_like(conn: &mut dyn ConnectionLike, page: Vec<Vec<u8>>) -> RedisResult<Vec<String>> {
    let mut pipe = redis::pipe();
    for key in &page {
        pipe.cmd("HRANDFIELD").arg(key);
    }
    // Nil for a hash deleted since the scan saw it.
    let fields: Vec<Option<Vec<u8>>> = pipe.query(conn)?;
    Ok(page
        .into_iter()
        .zip(fields)
        .filter(|(_, field)| field.as_deref().is_some_and(holder_or_mode))
        .filter_map(|(key, _)| String::from_utf8(key).ok())
        .collect())
}

/// Whether `field` can be a field of a lock's hash: `mode`, or
/// `<uuid>:<thread>` (with `:write` after it for a writer).
fn holder_or_mode(field: &[u8]) -> bool {
    if field == b"mode" {
        return true;
    }
    let id = field.strip_suffix(b":write").unwrap_or(field);
    match id.iter().rposition(|&b| b == b':') {
        Some(colon) => {
            let (client, thread) = (&id[..colon], &id[colon + 1..]);
            client.len() == 36
                && client.iter().all(|b| b.is_ascii_hexdigit() || *b == b'-')
                && !thread.is_empty()
                && thread.iter().all(u8::is_ascii_digit)
        }
        None => false,
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
    use super::{holder_or_mode, is_helper_string, name_of_helper, name_of_permit_set};

    #[test]
    fn only_holder_ids_and_mode_make_a_hash_a_candidate() {
        let id = "2a6c8f5e-4b1d-4f7e-9c3a-1d2e3f4a5b6c";
        assert!(holder_or_mode(format!("{id}:1").as_bytes()));
        assert!(holder_or_mode(format!("{id}:12:write").as_bytes()));
        assert!(holder_or_mode(b"mode"));
        assert!(!holder_or_mode(b"name"));
        assert!(!holder_or_mode(format!("{id}:").as_bytes()));
        assert!(!holder_or_mode(format!("{id}:x").as_bytes()));
        assert!(!holder_or_mode(b"short:1"));
    }

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
        assert_eq!(
            name_of_permit_set("{pool}:timeout").as_deref(),
            Some("pool")
        );
        assert_eq!(
            name_of_permit_set("{p}:1:timeout").as_deref(),
            Some("{p}:1")
        );
        assert_eq!(name_of_permit_set("plain:timeout"), None);
        assert!(is_helper_string("redisson_unlock_latch:{x}:id:1"));
        assert!(is_helper_string("{x}:id:1:rwlock_timeout:1"));
        assert!(!is_helper_string("permits"));
        assert_eq!(name_of_helper(q, "other:{x}"), None);
    }
}
