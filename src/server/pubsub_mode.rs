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

/// Chooses the pub/sub mode once, when the client starts.
pub(super) fn choose_pubsub_mode(pool: &Pool, config: &Config) -> Result<PubSubMode> {
    #[cfg(feature = "cluster")]
    if pool.backend().is_cluster() {
        let seed = pool
            .backend()
            .pubsub_target(0)
            .map_err(|source| Error::Connect {
                url: config.target(),
                source,
            })?;
        if topology::sharded_pubsub(pool, &seed, config)? {
            return Ok(PubSubMode::Sharded);
        }
    }
    let _ = (pool, config);
    Ok(PubSubMode::Classic)
}
