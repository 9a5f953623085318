//! Small helpers shared by the fault tests.

use std::time::Duration;

use crate::bounded::wait_until;
use crate::support::RedisServer;

/// Generous bound for anything that should take milliseconds; far below the
/// 30 s watchdog timeout, so meeting it proves a wake-up, not an expiry.
pub(crate) const PROMPTLY: Duration = Duration::from_secs(5);

/// The pub/sub channel on which releases of lock `name` are announced.
pub(crate) fn channel_of(name: &str) -> String {
    if name.contains('{') {
        format!("redisson_lock__channel:{name}")
    } else {
        format!("redisson_lock__channel:{{{name}}}")
    }
}

/// How many connections subscribe to `channel`, as the server sees it.
pub(crate) fn subscribers(server: &RedisServer, channel: &str) -> i64 {
    let reply: (String, i64) = server.cmd(&["PUBSUB", "NUMSUB", channel]);
    reply.1
}

/// Waits until exactly `count` connections subscribe to `channel`.
///
/// # Panics
///
/// If that does not happen within [`PROMPTLY`].
#[track_caller]
pub(crate) fn wait_for_subscribers(server: &RedisServer, channel: &str, count: i64) {
    if wait_until(PROMPTLY, || subscribers(server, channel) == count).is_none() {
        panic!(
            "{channel} has {} subscribers after {PROMPTLY:?}, expected {count}",
            subscribers(server, channel)
        );
    }
}

/// The ids of the server's pub/sub connections, from `CLIENT LIST TYPE pubsub`.
pub(crate) fn pubsub_connection_ids(server: &RedisServer) -> Vec<String> {
    let list: String = server.cmd(&["CLIENT", "LIST", "TYPE", "pubsub"]);
    list.lines()
        .filter_map(|line| {
            line.split(' ')
                .find_map(|kv| kv.strip_prefix("id="))
                .map(str::to_owned)
        })
        .collect()
}
