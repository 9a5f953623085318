//! What the server says about a client, read from a connection of the
//! test's own: its connections (`CLIENT LIST`).

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
