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

/// Whether a connection failed because the peer answered something that is
/// not RESP. The redis crate hides the I/O error's kind behind its own
/// type, so the text that `server::opener` wrote tells.
pub(crate) fn is_not_resp(e: &redis::RedisError) -> bool {
    e.is_io_error() && e.to_string().contains(crate::server::NOT_RESP)
}

/// Whether a connection failed because the server refused AUTH.
pub(crate) fn refused_credentials(e: &redis::RedisError) -> bool {
    let text = format!("{e} {e:?}").to_lowercase();
    matches!(e.code(), Some("WRONGPASS" | "NOAUTH"))
        || ["wrongpass", "noauth", "authentication", "invalid password"]
            .iter()
            .any(|word| text.contains(word))
}
