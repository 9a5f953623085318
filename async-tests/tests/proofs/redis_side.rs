//! What the server says about a client, read from a connection of the
//! test's own: its connections (`CLIENT LIST`), and everything of it left
//! in the keyspace (hash fields, fair-queue entries, read-hold keys).

use redhold::Client;

use crate::support::RedisServer;

/// A client's connections as `CLIENT LIST` shows them. Only a client's
/// pub/sub connection carries its name (`CLIENT SETNAME`), so a client
/// whose connections are counted logs in as an ACL user of its own
/// ([`own_user`]), and its connections are those of that user.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Connections {
    /// Command connections.
    pub(crate) commands: usize,
    /// Pub/sub connections (flag `P`).
    pub(crate) pubsub: usize,
}

/// Makes an ACL user `user` (password `pw`, every key, channel and
/// command) and returns a URL that logs in as it.
pub(crate) fn own_user(server: &RedisServer, user: &str) -> String {
    server.cmd::<()>(&["ACL", "SETUSER", user, "on", ">pw", "~*", "&*", "+@all"]);
    format!("redis://{user}:pw@127.0.0.1:{}/", server.port())
}

/// The connections of ACL user `user` now.
pub(crate) fn connections(server: &RedisServer, user: &str) -> Connections {
    let list: String = server.cmd(&["CLIENT", "LIST"]);
    let user = format!(" user={user} ");
    let mut found = Connections {
        commands: 0,
        pubsub: 0,
    };
    for line in list
        .lines()
        .map(|line| format!(" {line} "))
        .filter(|line| line.contains(&user))
    {
        let flags = line
            .split(' ')
            .find_map(|field| field.strip_prefix("flags="))
            .unwrap_or("");
        if flags.contains('P') {
            found.pubsub += 1;
        } else {
            found.commands += 1;
        }
    }
    found
}

/// Every trace of `client` in the keyspace: a key whose name carries its
/// id (a read-hold key), a hash field (a hold), a list element (a fair
/// queue entry) or a sorted-set member (a fair waiter's deadline) that
/// does. Unlock latches (`redisson_unlock_latch:…`, which remember a
/// release's reply for its resend and expire on their own) are not traces
/// of a hold and are left out.
pub(crate) fn traces(server: &RedisServer, client: &Client) -> Vec<String> {
    let id = client.id().to_string();
    let mut con = server.connection();
    let mut found = Vec::new();
    let mut cursor = 0u64;
    loop {
        let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("COUNT")
            .arg(1000)
            .query(&mut con)
            .expect("SCAN");
        for key in keys {
            if key.starts_with("redisson_unlock_latch:") {
                continue;
            }
            if key.contains(&id) {
                found.push(format!("key {key}"));
                continue;
            }
            let kind: String = redis::cmd("TYPE").arg(&key).query(&mut con).expect("TYPE");
            let members: Vec<String> = match kind.as_str() {
                "hash" => redis::cmd("HKEYS").arg(&key).query(&mut con),
                "list" => redis::cmd("LRANGE")
                    .arg(&key)
                    .arg(0)
                    .arg(-1)
                    .query(&mut con),
                "zset" => redis::cmd("ZRANGE")
                    .arg(&key)
                    .arg(0)
                    .arg(-1)
                    .query(&mut con),
                _ => Ok(Vec::new()),
            }
            .expect("reading a key");
            found.extend(
                members
                    .into_iter()
                    .filter(|member| member.contains(&id))
                    .map(|member| format!("{kind} {key}: {member}")),
            );
        }
        if next == 0 {
            return found;
        }
        cursor = next;
    }
}
