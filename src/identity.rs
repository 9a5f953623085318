//! Who a client is, for an operator paged at night: its name
//! ([`ClientBuilder::name`](crate::ClientBuilder::name), by default the
//! executable's), host and process id. They travel in the name of each of
//! the client's connections (`CLIENT SETNAME`), where `CLIENT LIST`,
//! [`Client::inspect`](crate::Client::inspect) and `redhold show` find them
//! (a cluster's command connections excepted: the redis crate's cluster
//! client opens them and cannot name them; its pub/sub connections are
//! named).
//!
//! Nothing is written beside the locks (their hash is Redisson's layout,
//! and a key of our own would need renewing and cleaning up): a client's
//! connections, and so its identity, live exactly as long as the client,
//! and the pub/sub connection stays open for its whole life.
//!
//! The connection name is `redhold:<client-uuid>:<pid>:<host>:<name>`,
//! with every byte Redis does not allow in a name (spaces, controls,
//! non-ASCII) replaced by `_`, the host and name cut to 64 bytes each.

use std::fmt;

use uuid::Uuid;

/// What every connection name of a redhold client starts with.
const PREFIX: &str = "redhold:";
/// Longest host or client name kept in a connection name.
const LONGEST_PART: usize = 64;

/// Who a redhold client is: what it was named, where it runs.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct ClientIdentity {
    /// [`ClientBuilder::name`](crate::ClientBuilder::name), by default the
    /// executable's file name.
    pub name: String,
    /// The host name of the machine the client runs on (`unknown` when it
    /// could not be read).
    pub host: String,
    /// The client's process id.
    pub pid: u32,
}

impl fmt::Display for ClientIdentity {
    /// `name@host:pid`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}@{}:{}", self.name, self.host, self.pid)
    }
}

impl ClientIdentity {
    /// This process's identity under `name` (the executable's name when
    /// `None`).
    pub(crate) fn of_this_process(name: Option<&str>) -> ClientIdentity {
        ClientIdentity {
            name: clean(name.map_or_else(executable_name, str::to_owned)),
            host: clean(host_name()).replace(':', "_"),
            pid: std::process::id(),
        }
    }

    /// The connection name of client `id` with this identity.
    pub(crate) fn connection_name(&self, id: Uuid) -> String {
        format!(
            "{PREFIX}{}:{}:{}:{}",
            id.hyphenated(),
            self.pid,
            self.host,
            self.name
        )
    }

    /// The client id and identity in a connection name made by
    /// [`connection_name`](Self::connection_name); `None` for any other.
    pub(crate) fn parse(connection_name: &str) -> Option<(Uuid, ClientIdentity)> {
        let rest = connection_name.strip_prefix(PREFIX)?;
        let mut parts = rest.splitn(4, ':');
        let id = Uuid::try_parse(parts.next()?).ok()?;
        let pid = parts.next()?.parse().ok()?;
        let host = parts.next()?.to_owned();
        let name = parts.next()?.to_owned();
        Some((id, ClientIdentity { name, host, pid }))
    }
}

/// The executable's file name without its extension, or `redhold`.
fn executable_name() -> String {
    std::env::current_exe()
        .ok()
        .and_then(|path| path.file_stem()?.to_str().map(str::to_owned))
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "redhold".to_owned())
}

/// The machine's host name: the kernel's on Linux, else `$HOSTNAME`, else
/// `unknown`.
fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|host| host.trim().to_owned())
        .filter(|host| !host.is_empty())
        .unwrap_or_else(|| "unknown".to_owned())
}

/// `text` as Redis accepts it in a connection name (printable ASCII, no
/// space), cut to [`LONGEST_PART`] bytes. A host name never holds `:`; a
/// client name may, since it comes last.
fn clean(text: String) -> String {
    text.chars()
        .map(|c| if c.is_ascii_graphic() { c } else { '_' })
        .take(LONGEST_PART)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connection_name_gives_back_the_id_and_identity() {
        let id = Uuid::new_v4();
        let me = ClientIdentity {
            name: "billing:worker".into(),
            host: "web-3".into(),
            pid: 4242,
        };
        let name = me.connection_name(id);
        assert!(name.starts_with("redhold:"), "{name}");
        assert_eq!(ClientIdentity::parse(&name), Some((id, me.clone())));
        assert_eq!(me.to_string(), "billing:worker@web-3:4242");
        assert_eq!(ClientIdentity::parse("redisson-client"), None);
        assert_eq!(ClientIdentity::parse("redhold:not-a-uuid:1:h:n"), None);
    }

    #[test]
    fn names_are_cleaned_for_redis() {
        let me = ClientIdentity::of_this_process(Some("my service\n\u{e9}"));
        assert_eq!(me.name, "my_service__");
        assert!(me
            .connection_name(Uuid::nil())
            .bytes()
            .all(|b| b.is_ascii_graphic()));
        let long = ClientIdentity::of_this_process(Some(&"x".repeat(500)));
        assert_eq!(long.name.len(), LONGEST_PART);
        assert_eq!(long.pid, std::process::id());
    }
}
