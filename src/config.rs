//! Client settings: what the builder collects and every layer reads.

use std::fmt;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::lost_callbacks::LostCallback;
#[cfg(any(feature = "cluster", feature = "sentinel"))]
use crate::redact::redact_all;
use crate::redact::redact_url;

/// The URL used when none is given.
pub(crate) const DEFAULT_URL: &str = "redis://127.0.0.1:6379/";

/// What the client connects to. `Debug` hides passwords.
#[derive(Clone)]
pub(crate) enum Deployment {
    /// The server at `Config::url`.
    Standalone,
    /// A Redis Cluster reached through these nodes.
    #[cfg(feature = "cluster")]
    Cluster(Vec<String>),
    /// The master called `master`, found through these sentinels.
    #[cfg(feature = "sentinel")]
    Sentinel {
        sentinels: Vec<String>,
        master: String,
    },
}

impl fmt::Debug for Deployment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Deployment::Standalone => f.write_str("Standalone"),
            #[cfg(feature = "cluster")]
            Deployment::Cluster(nodes) => write!(f, "Cluster([{}])", redact_all(nodes)),
            #[cfg(feature = "sentinel")]
            Deployment::Sentinel { sentinels, master } => f
                .debug_struct("Sentinel")
                .field("sentinels", &redact_all(sentinels))
                .field("master", master)
                .finish(),
        }
    }
}

/// Settings a [`Client`](crate::Client) runs with, checked by
/// [`ClientBuilder::build`](crate::ClientBuilder::build).
#[derive(Clone)]
pub(crate) struct Config {
    pub(crate) url: String,
    pub(crate) deployment: Deployment,
    pub(crate) tls_root_cert: Option<Vec<u8>>,
    /// `WAIT numreplicas timeout` after every write, when set.
    pub(crate) sync_replicas: Option<(usize, Duration)>,
    /// Sharded pub/sub on a cluster: `None` decides by the servers' version.
    pub(crate) sharded_pubsub: Option<bool>,
    /// Releases on a cluster that serves sharded pub/sub also `PUBLISH`.
    pub(crate) publish_both_ways: bool,
    /// A cluster client that listens sharded also hears classic releases.
    pub(crate) hear_classic_releases: bool,
    pub(crate) watchdog_timeout: Duration,
    pub(crate) connect_timeout: Duration,
    pub(crate) response_timeout: Duration,
    pub(crate) retry_attempts: u32,
    pub(crate) retry_delay: Duration,
    pub(crate) max_idle_connections: usize,
    pub(crate) subscription_linger: Duration,
    pub(crate) fair_wait_timeout: Duration,
    /// How long a waiting acquire keeps trying while Redis is unreachable;
    /// `None`: as long as its own wait.
    pub(crate) outage_tolerance: Option<Duration>,
    /// How many threads run the Redis calls of async callers.
    pub(crate) async_threads: usize,
    pub(crate) on_lock_lost: Option<LostCallback>,
    /// `ClientBuilder::name`; `None`: the executable's name.
    pub(crate) client_name: Option<String>,
    /// The name every connection of the client is given (`CLIENT SETNAME`),
    /// set when the client starts: see `identity.rs`.
    pub(crate) connection_name: Option<String>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            url: DEFAULT_URL.to_owned(),
            deployment: Deployment::Standalone,
            tls_root_cert: None,
            sync_replicas: None,
            sharded_pubsub: None,
            publish_both_ways: true,
            hear_classic_releases: false,
            watchdog_timeout: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(5),
            response_timeout: Duration::from_secs(3),
            retry_attempts: 3,
            retry_delay: Duration::from_millis(50),
            max_idle_connections: 16,
            subscription_linger: Duration::from_secs(10),
            fair_wait_timeout: Duration::from_secs(300),
            outage_tolerance: Some(Duration::from_secs(60)),
            async_threads: 4,
            on_lock_lost: None,
            client_name: None,
            connection_name: None,
        }
    }
}

impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Config")
            .field("url", &redact_url(&self.url))
            .field("deployment", &self.deployment)
            .field("tls_root_cert", &self.tls_root_cert.is_some())
            .field("sync_replicas", &self.sync_replicas)
            .field("sharded_pubsub", &self.sharded_pubsub)
            .field("publish_both_ways", &self.publish_both_ways)
            .field("hear_classic_releases", &self.hear_classic_releases)
            .field("watchdog_timeout", &self.watchdog_timeout)
            .field("connect_timeout", &self.connect_timeout)
            .field("response_timeout", &self.response_timeout)
            .field("retry_attempts", &self.retry_attempts)
            .field("retry_delay", &self.retry_delay)
            .field("max_idle_connections", &self.max_idle_connections)
            .field("subscription_linger", &self.subscription_linger)
            .field("fair_wait_timeout", &self.fair_wait_timeout)
            .field("outage_tolerance", &self.outage_tolerance)
            .field("async_threads", &self.async_threads)
            .field("on_lock_lost", &self.on_lock_lost.is_some())
            .field("client_name", &self.client_name)
            .finish()
    }
}

impl Config {
    /// What the client connects to, for errors and logs (passwords hidden).
    pub(crate) fn target(&self) -> String {
        match &self.deployment {
            Deployment::Standalone => redact_url(&self.url),
            #[cfg(feature = "cluster")]
            Deployment::Cluster(nodes) => format!("cluster {}", redact_all(nodes)),
            #[cfg(feature = "sentinel")]
            Deployment::Sentinel { sentinels, master } => {
                format!("master {master:?} via sentinels {}", redact_all(sentinels))
            }
        }
    }
}

/// Refuses a zero duration for the setting `what`.
pub(crate) fn non_zero(what: &'static str, value: Duration) -> Result<()> {
    if value.is_zero() {
        return Err(Error::InvalidArgument {
            what,
            reason: "must be greater than zero".into(),
        });
    }
    Ok(())
}

/// The longest duration the library sends to Redis, in ms: a century.
/// `PEXPIRE` refuses values that overflow its internal arithmetic, and
/// `WAIT` reads its timeout as a signed 64-bit number; a century is far
/// beyond any sensible lease, wait or timeout.
pub(crate) const LONGEST_MS: u64 = 100 * 365 * 24 * 3600 * 1000;

/// Converts a lease to whole milliseconds for Redis, refusing zero and values
/// that round down to zero.
pub(crate) fn lease_millis(lease: Duration) -> Result<u64> {
    let ms = wire_millis("lease", lease)?;
    if ms == 0 {
        return Err(Error::InvalidArgument {
            what: "lease",
            reason: format!("{lease:?} is less than the 1 ms Redis can keep a key for"),
        });
    }
    Ok(ms)
}

/// Converts the setting `what` to whole milliseconds for Redis, refusing
/// more than [`LONGEST_MS`] (a silent narrowing once sent a huge value as
/// "0").
pub(crate) fn wire_millis(what: &'static str, value: Duration) -> Result<u64> {
    match u64::try_from(value.as_millis()) {
        Ok(ms) if ms <= LONGEST_MS => Ok(ms),
        _ => Err(Error::InvalidArgument {
            what,
            reason: format!(
                "{value:?} is longer than a century ({LONGEST_MS} ms), the longest \
                 this library sends to Redis"
            ),
        }),
    }
}

/// Whole milliseconds of a duration, saturating at `u64::MAX` (585 million
/// years): for values already bounded by [`wire_millis`] or by a cap of
/// their own, where saturating is the intended reading of "very long".
pub(crate) fn saturating_millis(value: Duration) -> u64 {
    u64::try_from(value.as_millis()).unwrap_or(u64::MAX)
}

/// The moment `wait` after `from`, for a deadline: a wait too long to
/// represent (absurd settings such as `Duration::MAX`) is a year, which no
/// call waits for anyway, never "now".
pub(crate) fn deadline_after(from: std::time::Instant, wait: Duration) -> std::time::Instant {
    const YEAR: Duration = Duration::from_secs(365 * 24 * 3600);
    from.checked_add(wait.min(YEAR))
        .or_else(|| from.checked_add(Duration::from_secs(3600)))
        .unwrap_or(from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leases_must_be_whole_milliseconds() {
        assert!(lease_millis(Duration::ZERO).is_err());
        assert!(lease_millis(Duration::from_micros(999)).is_err());
        assert_eq!(lease_millis(Duration::from_millis(1)).unwrap(), 1);
        assert!(lease_millis(Duration::from_secs(365 * 24 * 3600)).is_ok());
        assert!(lease_millis(Duration::MAX).is_err());
    }
}
