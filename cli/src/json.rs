//! `--json`: the locks as JSON documents, made with serde.
//!
//! `show --json` prints one object; `list --json` prints one array (`[]`
//! when nothing matches), so that `jq .` and `python3 -m json.tool` read
//! the whole output; `list --json-lines` prints one object per line for
//! streaming tools.
//!
//! An object: `{"name", "locked", "kind", "mode", "ttl_ms", "holders":
//! [{"client", "thread", "owner", "client_name", "host", "pid", "count",
//! "write"}] ("thread" is an owner's id when "owner" is true),
//! "queue": [{"client", "thread", "client_name", "host", "pid", "field",
//! "deadline_ms"}], "subscribers", "token"}`; `null` where a value is
//! unknown or does not apply (`client_name`, `host` and `pid` of a
//! Redisson client).

use std::time::UNIX_EPOCH;

use redhold::inspect::{LockInfo, Waiter};
use redhold::ClientIdentity;
use serde::Serialize;

/// One lock, as the JSON object described above.
#[derive(Debug, Serialize)]
struct LockJson<'a> {
    name: &'a str,
    locked: bool,
    kind: &'a str,
    mode: Option<&'a str>,
    ttl_ms: Option<u128>,
    holders: Vec<HolderJson<'a>>,
    queue: Vec<WaiterJson<'a>>,
    subscribers: u64,
    token: Option<u64>,
}

/// One holder of a lock.
#[derive(Debug, Serialize)]
struct HolderJson<'a> {
    client: String,
    /// The thread's number, or the owner's id.
    thread: u64,
    /// Whether the holder is an owner, not a thread.
    owner: bool,
    #[serde(flatten)]
    identity: IdentityJson<'a>,
    count: u64,
    write: bool,
}

/// Who a holder or waiter is; every field `null` when unknown (a Redisson
/// client, or `CLIENT LIST` refused).
#[derive(Debug, Serialize)]
struct IdentityJson<'a> {
    client_name: Option<&'a str>,
    host: Option<&'a str>,
    pid: Option<u32>,
}

impl<'a> IdentityJson<'a> {
    fn new(identity: Option<&'a ClientIdentity>) -> Self {
        IdentityJson {
            client_name: identity.map(|i| i.name.as_str()),
            host: identity.map(|i| i.host.as_str()),
            pid: identity.map(|i| i.pid),
        }
    }
}

/// One entry of a fair lock's queue.
#[derive(Debug, Serialize)]
struct WaiterJson<'a> {
    /// The waiting client's id, when the field is `<uuid>:<thread>`.
    client: Option<&'a str>,
    /// The waiting thread's number, when the field is `<uuid>:<thread>`.
    thread: Option<u64>,
    #[serde(flatten)]
    identity: IdentityJson<'a>,
    /// The field as stored in the queue.
    field: &'a str,
    /// When the entry times out, in Unix milliseconds, as the queue's
    /// timeout set stores it.
    deadline_ms: Option<u128>,
}

impl<'a> LockJson<'a> {
    fn new(info: &'a LockInfo) -> Self {
        LockJson {
            name: &info.name,
            locked: info.locked,
            kind: info.kind.as_str(),
            mode: info.mode.map(|m| m.as_str()),
            ttl_ms: info.ttl.map(|ttl| ttl.as_millis()),
            holders: info
                .holders
                .iter()
                .map(|h| HolderJson {
                    client: h.client.hyphenated().to_string(),
                    thread: h.thread,
                    owner: h.owner,
                    identity: IdentityJson::new(h.identity.as_ref()),
                    count: h.count,
                    write: h.write,
                })
                .collect(),
            queue: info.queue.iter().map(WaiterJson::new).collect(),
            subscribers: info.subscribers,
            token: info.token,
        }
    }
}

impl<'a> WaiterJson<'a> {
    fn new(waiter: &'a Waiter) -> Self {
        let parsed = waiter
            .field
            .rsplit_once(':')
            .and_then(|(client, thread)| Some((client, thread.parse::<u64>().ok()?)));
        WaiterJson {
            client: parsed.map(|(client, _)| client),
            thread: parsed.map(|(_, thread)| thread),
            identity: IdentityJson::new(waiter.identity.as_ref()),
            field: &waiter.field,
            deadline_ms: waiter
                .deadline
                .and_then(|at| at.duration_since(UNIX_EPOCH).ok())
                .map(|since| since.as_millis()),
        }
    }
}

/// The lock as one JSON object on one line.
pub(crate) fn lock(info: &LockInfo) -> String {
    serde_json::to_string(&LockJson::new(info)).expect("plain data always serializes")
}

/// The locks as one JSON array, pretty-printed.
pub(crate) fn locks(infos: &[LockInfo]) -> String {
    let all: Vec<LockJson<'_>> = infos.iter().map(LockJson::new).collect();
    serde_json::to_string_pretty(&all).expect("plain data always serializes")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_escaped_and_an_empty_list_is_an_array() {
        assert_eq!(locks(&[]), "[]");
        let quoted = serde_json::to_string("a\"b\\c\n\u{1}").unwrap();
        assert_eq!(quoted, "\"a\\\"b\\\\c\\n\\u0001\"");
    }
}
