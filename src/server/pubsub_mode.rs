//! Sharded or classic pub/sub: how releases are announced and heard,
//! chosen once when the client starts.

use super::pool::Pool;
#[cfg(feature = "cluster")]
use super::topology;
use crate::config::Config;
#[cfg(feature = "cluster")]
use crate::error::Error;
use crate::error::Result;

/// How releases are announced and heard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PubSubMode {
    /// `PUBLISH` / `SUBSCRIBE`: one server, a sentinel's master, or a
    /// cluster with classic pub/sub (every node hears every message).
    Classic,
    /// `SPUBLISH` / `SSUBSCRIBE`: a cluster where only the slot's owner
    /// delivers a channel's messages.
    #[cfg(feature = "cluster")]
    Sharded,
}

/// Chosen once, when the client starts: how the client listens, and the
/// command its releases publish with (see `Server::publish_command`): on a
/// cluster, sharded when the builder says so or, by default, when every
/// master serves it; and both ways when the masters serve sharded pub/sub
/// and the builder did not turn `publish_both_ways` off.
pub(super) fn choose_pubsub_mode(
    pool: &Pool,
    config: &Config,
) -> Result<(PubSubMode, &'static str)> {
    #[cfg(feature = "cluster")]
    if pool.backend().is_cluster() {
        let seed = pool
            .backend()
            .pubsub_target(0)
            .map_err(|source| Error::Connect {
                url: config.target(),
                source,
            })?;
        // The masters are asked only when the answer changes something.
        let serves_sharded = match (config.sharded_pubsub, config.publish_both_ways) {
            (Some(false), false) => false,
            (Some(true), false) => true,
            _ => topology::serves_sharded_pubsub(pool, &seed, config)?,
        };
        let mode = if config.sharded_pubsub.unwrap_or(serves_sharded) {
            PubSubMode::Sharded
        } else {
            PubSubMode::Classic
        };
        let publish = match mode {
            _ if serves_sharded && config.publish_both_ways => crate::scripts::PUBLISH_BOTH,
            PubSubMode::Sharded => "spublish",
            PubSubMode::Classic => "publish",
        };
        return Ok((mode, publish));
    }
    let _ = (pool, config);
    Ok((PubSubMode::Classic, "publish"))
}
