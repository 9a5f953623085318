//! The end state: once every client of a schedule is shut down and every
//! TTL a lock, lease or unlock latch could have had has run out, Redis must
//! hold nothing of the run (the fencing token counters excepted: they must
//! outlive the locks) and nobody may be subscribed to its channels.

use std::collections::{BTreeMap, HashMap};
use std::thread;
use std::time::{Duration, Instant};

use redis::Connection;

/// Keys that are meant to stay: a fencing counter must never go back.
const KEPT: &str = "redisson_lock_token:";

/// What one server still has of the run.
#[derive(Debug, Default)]
struct Remains {
    /// Key → (type, PTTL in ms).
    keys: BTreeMap<String, (String, i64)>,
    channels: Vec<String>,
}

impl Remains {
    fn is_empty(&self) -> bool {
        self.keys.is_empty() && self.channels.is_empty()
    }

    /// Whether nothing left can still expire (waiting longer is useless).
    fn permanent(&self) -> bool {
        self.keys.values().all(|(_, ttl)| *ttl < 0)
    }
}

fn connect(url: &str) -> redis::RedisResult<Connection> {
    let conn = redis::Client::open(url)?.get_connection_with_timeout(Duration::from_secs(2))?;
    conn.set_read_timeout(Some(Duration::from_secs(5)))?;
    Ok(conn)
}

fn look(conn: &mut Connection, prefix: &str) -> redis::RedisResult<Remains> {
    let mut remains = Remains::default();
    let pattern = format!("*{prefix}:*");
    let mut cursor: u64 = 0;
    loop {
        let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(&pattern)
            .arg("COUNT")
            .arg(1000)
            .query(conn)?;
        for key in keys.into_iter().filter(|k| !k.starts_with(KEPT)) {
            let kind: String = redis::cmd("TYPE").arg(&key).query(conn)?;
            let ttl: i64 = redis::cmd("PTTL").arg(&key).query(conn)?;
            // PTTL -2: the key expired between the two calls. It is gone,
            // not a key without TTL (-1), which would stay for good.
            if kind != "none" && ttl != -2 {
                remains.keys.insert(key, (kind, ttl));
            }
        }
        if next == 0 {
            break;
        }
        cursor = next;
    }
    remains.channels = redis::cmd("PUBSUB")
        .arg("CHANNELS")
        .arg(&pattern)
        .query(conn)?;
    Ok(remains)
}

/// A key's content, shortened, for the report.
fn content(conn: &mut Connection, key: &str, kind: &str) -> String {
    let text: redis::RedisResult<Vec<String>> = match kind {
        "hash" => redis::cmd("HGETALL").arg(key).query(conn),
        "list" => redis::cmd("LRANGE").arg(key).arg(0).arg(-1).query(conn),
        "zset" => redis::cmd("ZRANGE")
            .arg(key)
            .arg(0)
            .arg(-1)
            .arg("WITHSCORES")
            .query(conn),
        "string" => redis::cmd("GET")
            .arg(key)
            .query::<String>(conn)
            .map(|s| vec![s]),
        _ => Ok(Vec::new()),
    };
    let joined = text.map(|t| t.join(" ")).unwrap_or_else(|e| e.to_string());
    joined.chars().take(200).collect()
}

/// Which clients the UUIDs in a text belong to, by `uuid → client tag`.
fn owners(text: &str, clients: &HashMap<String, String>) -> String {
    let mut found: Vec<&str> = clients
        .iter()
        .filter(|(id, _)| text.contains(id.as_str()))
        .map(|(_, tag)| tag.as_str())
        .collect();
    found.sort_unstable();
    found.dedup();
    if found.is_empty() {
        String::new()
    } else {
        format!(" [holder/waiter clients: {}]", found.join(", "))
    }
}

/// A wait that may have left its queue entry behind: `(client tag, short
/// lock name, description)`.
pub(crate) type DeadWait = (String, String, String);

/// Polls every server until it has nothing of the run left, or until
/// `deadline`; returns one problem description per server and category.
/// `clients` maps client UUIDs to tags; `dead_waits` are fair-lock waits
/// that ended without a clean give-up, named when their entry is left.
pub(crate) fn check(
    urls: &[String],
    prefix: &str,
    deadline: Instant,
    clients: &HashMap<String, String>,
    dead_waits: &[DeadWait],
) -> Vec<String> {
    let mut problems = Vec::new();
    for (server, url) in urls.iter().enumerate() {
        let mut conn = match connect(url) {
            Ok(conn) => conn,
            Err(e) => {
                problems.push(format!(
                    "server {server}: cannot look at the end state: {e}"
                ));
                continue;
            }
        };
        let remains = loop {
            match look(&mut conn, prefix) {
                Ok(r) if r.is_empty() => break r,
                Ok(r) if Instant::now() >= deadline || (r.permanent() && r.channels.is_empty()) => {
                    break r
                }
                Ok(_) => thread::sleep(Duration::from_millis(200)),
                Err(e) => {
                    problems.push(format!(
                        "server {server}: cannot look at the end state: {e}"
                    ));
                    break Remains::default();
                }
            }
        };
        let mut by_category: BTreeMap<&str, Vec<String>> = BTreeMap::new();
        for (key, (kind, ttl)) in &remains.keys {
            let category = if key.starts_with("redisson_unlock_latch:") {
                "unlock latch"
            } else if key.starts_with("redisson_lock_queue:") {
                "fair queue"
            } else if key.starts_with("redisson_lock_timeout:") {
                "fair deadlines"
            } else if key.contains(":rwlock_timeout:") {
                "read-hold key"
            } else if kind == "hash" {
                "lock hash"
            } else {
                "other key"
            };
            let text = content(&mut conn, key, kind);
            let ttl = if *ttl < 0 {
                "no TTL".to_owned()
            } else {
                format!("PTTL {ttl} ms")
            };
            let owners = owners(&text, clients);
            let mut line = format!("{key} ({kind}, {ttl}): {text}{owners}");
            for (client, name, wait) in dead_waits {
                if key.contains(&format!(":{name}}}")) && owners.contains(client.as_str()) {
                    line.push_str(&format!("\n            left by: {wait}"));
                }
            }
            by_category.entry(category).or_default().push(line);
        }
        for (category, keys) in by_category {
            let mut problem = format!(
                "server {server}: {} {category} key(s) of the run left after every client shut \
                 down and every TTL could have run out:",
                keys.len()
            );
            for key in keys.iter().take(6) {
                problem.push_str(&format!("\n        {key}"));
            }
            problems.push(problem);
        }
        if !remains.channels.is_empty() {
            let mut problem = format!(
                "server {server}: {} channel(s) of the run still subscribed after every client \
                 shut down:",
                remains.channels.len()
            );
            for channel in remains.channels.iter().take(6) {
                let subscribers: Result<(String, i64), _> = redis::cmd("PUBSUB")
                    .arg("NUMSUB")
                    .arg(channel)
                    .query(&mut conn);
                let count = subscribers.map_or(-1, |(_, n)| n);
                problem.push_str(&format!("\n        {channel} ({count} subscriber(s))"));
            }
            problems.push(problem);
        }
    }
    problems
}
