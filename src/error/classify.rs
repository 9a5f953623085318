//! What a Redis error says about its cause: the network (worth retrying),
//! a peer that is no Redis server, refused credentials.

/// Whether a Redis error is worth retrying: the network failed, not the
/// request, or the sentinels know no master that is up (they are failing
/// over: `server::sentinel` reports a master they see down, or a node they
/// name that does not answer as a master yet, with this kind).
pub(crate) fn is_transient(e: &redis::RedisError) -> bool {
    e.is_io_error()
        || e.is_timeout()
        || e.is_connection_refusal()
        || e.is_connection_dropped()
        || e.kind() == redis::ErrorKind::MasterNameNotFoundBySentinel
}

/// Whether a failed command left its connection in step with the server:
/// the whole reply was read, and it was an error reply (`-ERR…`, `NOSCRIPT`,
/// `WRONGTYPE`…) or a value of the wrong shape. Anything else (a reply
/// lost, cut, timed out or unreadable) leaves unread bytes, or none where
/// some were due: the next command on that connection would read the rest
/// of this reply as its own. Such a connection is closed, and a write sent
/// on it may or may not have run (see `engine/unsure.rs`).
pub(crate) fn reply_was_read(e: &redis::RedisError) -> bool {
    matches!(
        e.kind(),
        redis::ErrorKind::Server(_)
            | redis::ErrorKind::Extension
            | redis::ErrorKind::UnexpectedReturnType
    )
}

/// What the error of a peer that answers something else than RESP says:
/// `server::opener` and `server::socket` write it, [`is_not_resp`] looks for
/// it. It lives here, below `server`, so that the error types stay a leaf.
pub(crate) const NOT_RESP: &str = "does not speak the Redis protocol";

/// Whether a connection failed because the peer answered something that is
/// not RESP. The redis crate hides the I/O error's kind behind its own
/// type, so the text that `server::opener` wrote tells.
pub(crate) fn is_not_resp(e: &redis::RedisError) -> bool {
    e.is_io_error() && e.to_string().contains(NOT_RESP)
}

/// Whether a connection failed because the server refused AUTH.
pub(crate) fn refused_credentials(e: &redis::RedisError) -> bool {
    let text = format!("{e} {e:?}").to_lowercase();
    matches!(e.code(), Some("WRONGPASS" | "NOAUTH"))
        || ["wrongpass", "noauth", "authentication", "invalid password"]
            .iter()
            .any(|word| text.contains(word))
}

/// Whether the server asked for a password that the client did not send
/// (`NOAUTH`): a wrong one is refused with `WRONGPASS` instead.
pub(super) fn password_missing(e: &redis::RedisError) -> bool {
    e.code() == Some("NOAUTH") || format!("{e}").contains("NOAUTH")
}

/// True when TLS refused the server's certificate because it names another
/// host than the one connected to (rustls' `NotValidForName`).
pub(super) fn wrong_host_name(e: &redis::RedisError) -> bool {
    let text = e.to_string();
    text.contains("NotValidForName") || text.contains("not valid for name")
}
