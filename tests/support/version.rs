//! The `redis-server` on PATH (Redis 6.2 or later, or Valkey), read once
//! per test binary from `redis-server --version`, and what its version
//! means for a test: which pub/sub a cluster of it uses, how `DEBUG` is
//! enabled, how `CLIENT LIST` names its own command.
//!
//! The suite runs on every version the README names; a test whose
//! expectation depends on the version asks here and asserts what that
//! version should do, never skips. To run the suite against another
//! server, put its `redis-server` and `redis-cli` first on PATH (see
//! docs/server-versions.md).

use std::io::ErrorKind;
use std::process::Command;
use std::sync::OnceLock;

use super::NOT_FOUND;

/// The oldest version the tests (and the README) support.
const OLDEST: (u32, u32) = (6, 2);

/// What `redis-server --version` says about the server on PATH.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ServerVersion {
    /// `7` of `v=7.0.15`.
    pub(crate) major: u32,
    /// `0` of `v=7.0.15`.
    pub(crate) minor: u32,
    /// The whole `v=` value, e.g. `7.0.15` or `8.0.1`, for messages.
    pub(crate) text: String,
    /// Valkey (`Valkey server v=8.0.1 …`) rather than Redis: its version
    /// numbers are its own, and it has every Redis 7.2 feature from 7.2 on.
    pub(crate) valkey: bool,
}

impl ServerVersion {
    /// Redis 7.0 or later, or any Valkey (forked from Redis 7.2).
    pub(crate) fn since_7(&self) -> bool {
        self.valkey || self.major >= 7
    }

    /// Sharded pub/sub (`SSUBSCRIBE`, `SPUBLISH`, `PUBSUB SHARDNUMSUB`)
    /// came with Redis 7.0 (and is in every Valkey): the library uses it
    /// on a cluster whose masters all have it, classic pub/sub otherwise.
    pub(crate) fn has_sharded_pubsub(&self) -> bool {
        self.since_7()
    }

    /// Arguments that let a test send `DEBUG` (e.g. `DEBUG SLEEP`): Redis
    /// 7.0 turned it off by default behind `--enable-debug-command`, a
    /// setting 6.2 does not know and refuses to start with (it always
    /// accepts `DEBUG`).
    pub(crate) fn debug_command_args(&self) -> &'static [&'static str] {
        if self.since_7() {
            &["--enable-debug-command", "yes"]
        } else {
            &[]
        }
    }

    /// An ACL rule that refuses `CLIENT SETNAME`: `-client|setname` from
    /// 7.0 on; Redis 6.2's ACL cannot take one subcommand away, so there it
    /// refuses every `CLIENT` subcommand (`-client`).
    pub(crate) fn acl_refusing_client_setname(&self) -> &'static str {
        if self.since_7() {
            "-client|setname"
        } else {
            "-client"
        }
    }

    /// The name `INFO commandstats` counts `command subcommand` under:
    /// `config|resetstat` from 7.0 on, just `config` on 6.2.
    pub(crate) fn stat_name(&self, command: &str, subcommand: &str) -> String {
        if self.since_7() {
            format!("{command}|{subcommand}")
        } else {
            command.to_owned()
        }
    }

    /// The `cmd=` value `CLIENT LIST` shows for the connection that runs
    /// it: `client|list` from 7.0 on (subcommands are named), `client`
    /// before.
    pub(crate) fn client_list_cmd(&self) -> &'static str {
        if self.since_7() {
            "client|list"
        } else {
            "client"
        }
    }
}

/// The server on PATH, read once.
///
/// # Panics
///
/// When `redis-server` is missing, older than 6.2, or its version cannot be
/// read: tests never skip silently.
pub(crate) fn server_version() -> &'static ServerVersion {
    static READ: OnceLock<Result<ServerVersion, String>> = OnceLock::new();
    match READ.get_or_init(read) {
        Ok(version) => version,
        Err(message) => panic!("{message}"),
    }
}

/// Runs `redis-server --version` and checks the result.
fn read() -> Result<ServerVersion, String> {
    let out = match Command::new("redis-server").arg("--version").output() {
        Ok(out) => out,
        Err(e) if e.kind() == ErrorKind::NotFound => return Err(NOT_FOUND.to_string()),
        Err(e) => return Err(format!("cannot run `redis-server --version`: {e}")),
    };
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let version = parse(&text).ok_or_else(|| {
        format!("cannot read the version from `redis-server --version`: {text:?}")
    })?;
    if !version.valkey && (version.major, version.minor) < OLDEST {
        return Err(format!(
            "redis-server on PATH is {}: tests need Redis 6.2 or later",
            version.text
        ));
    }
    Ok(version)
}

/// Reads `Redis server v=7.0.15 sha=…` or `Valkey server v=8.0.1 sha=…`.
fn parse(text: &str) -> Option<ServerVersion> {
    let version = text.split_whitespace().find_map(|w| w.strip_prefix("v="))?;
    let mut parts = version.split('.');
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some(ServerVersion {
        major,
        minor,
        text: version.to_owned(),
        valkey: text.trim_start().starts_with("Valkey"),
    })
}
