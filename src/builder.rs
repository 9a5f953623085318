//! How a [`Client`] is made: [`Client::open`] with the defaults, or
//! [`Client::builder`] and every setting with its default, checked before
//! anything connects.

use std::sync::Arc;
use std::time::Duration;

use crate::client::Client;
use crate::config::{lease_millis, non_zero, wire_millis, Config, Deployment};
use crate::error::{Error, Result};
use crate::lost_callbacks::LostHold;

#[cfg(feature = "cluster")]
mod pubsub;

impl Client {
    /// Connects to the server at `url` with default settings.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidUrl`] for a malformed URL; [`Error::Connect`] when the
    /// server does not answer within the connect timeout (5 s) or refuses the
    /// credentials.
    pub fn open(url: &str) -> Result<Client> {
        Client::builder().url(url).build()
    }

    /// A builder for a client with settings other than the defaults.
    pub fn builder() -> ClientBuilder {
        ClientBuilder::default()
    }
}

/// Builds a [`Client`]: `Client::builder().url(..).watchdog_timeout(..).build()`.
///
/// Every setting has a default, so `Client::builder().build()` connects to
/// `redis://127.0.0.1:6379/` with the defaults listed on each setter.
#[derive(Debug, Clone, Default)]
#[must_use = "a builder does nothing until .build() is called"]
pub struct ClientBuilder {
    config: Config,
}

impl ClientBuilder {
    /// The server to use, as a `redis://[user:password@]host:port/[db]` or
    /// `redis+unix:///path` URL.
    ///
    /// Defaults to `redis://127.0.0.1:6379/`.
    pub fn url(mut self, url: impl Into<String>) -> Self {
        self.config.url = url.into();
        self
    }

    /// The client's name for operators, shown with its host and process id
    /// beside its holds in `redhold show`/`list` and in `CLIENT LIST` (see
    /// [`Client::identity`]). Bytes Redis does not allow in a connection
    /// name (spaces, control and non-ASCII characters) become `_`; at most
    /// 64 are kept.
    ///
    /// Defaults to the executable's file name.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.config.client_name = Some(name.into());
        self
    }

    /// Connects to a Redis Cluster through any of `nodes` (URLs like
    /// `redis://host:port`, with credentials if the cluster needs them)
    /// instead of [`url`](Self::url). Scripts go to the node that owns the
    /// lock's slot; releases are announced with sharded pub/sub when every
    /// node runs Redis 7 or later (see [`sharded_pubsub`](Self::sharded_pubsub)).
    ///
    /// Defaults to no cluster. Not combinable with
    /// [`sync_replicas`](Self::sync_replicas).
    #[cfg(feature = "cluster")]
    pub fn cluster<I, S>(mut self, nodes: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.config.deployment = Deployment::Cluster(nodes.into_iter().map(Into::into).collect());
        self
    }

    /// Connects to the master called `master_name` as reported by any of
    /// `sentinels` (URLs like `redis://host:26379`), instead of
    /// [`url`](Self::url). The master is looked up again for every new
    /// connection, so the client follows a failover on its own; and the
    /// client listens to every sentinel (five at most, a thread and a
    /// connection each) for `+switch-master`, so that it leaves a replaced
    /// master at once, even one that still runs, and even when some
    /// sentinels never learn the switch. The user name and password of the first sentinel URL, its
    /// scheme (`rediss://` for TLS) and the `tls_root_cert`
    /// are used for the master too.
    ///
    /// Defaults to no sentinel.
    #[cfg(feature = "sentinel")]
    pub fn sentinel<I, S>(mut self, sentinels: I, master_name: impl Into<String>) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.config.deployment = Deployment::Sentinel {
            sentinels: sentinels.into_iter().map(Into::into).collect(),
            master: master_name.into(),
        };
        self
    }

    /// Trusts the certificate authority in `pem` (PEM bytes) for `rediss://`
    /// connections, commands and pub/sub alike, instead of the system's
    /// roots.
    ///
    /// Defaults to the system's root certificates.
    #[cfg(feature = "tls")]
    pub fn tls_root_cert(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.config.tls_root_cert = Some(pem.into());
        self
    }

    /// After every acquire, release and renewal, waits (Redis `WAIT`) until
    /// at least `replicas` replicas have the change, for at most `timeout`.
    /// An acquire that is not replicated in time is undone and fails with
    /// [`Error::ReplicasNotSynced`]; a release or renewal that is not is
    /// reported the same way (release) or logged (renewal). This narrows,
    /// but does not close, the window in which a failover loses a lock.
    ///
    /// Defaults to off. `timeout` must be shorter than the response timeout.
    pub fn sync_replicas(mut self, replicas: usize, timeout: Duration) -> Self {
        self.config.sync_replicas = Some((replicas, timeout));
        self
    }

    /// How long a lock taken without a lease lives in Redis if this process
    /// stops renewing it (dies, hangs, loses the network). The watchdog renews
    /// held locks every third of it.
    ///
    /// Defaults to 30 seconds, as in Redisson. Must not be zero.
    pub fn watchdog_timeout(mut self, timeout: Duration) -> Self {
        self.config.watchdog_timeout = timeout;
        self
    }

    /// How long opening a connection may take before it fails: the TCP
    /// connect, TLS, and the set-up commands (`AUTH`, `SELECT`, a `PING`)
    /// together, not each. A timed-out connect reports "connecting to
    /// host:port timed out after N ms".
    ///
    /// Defaults to 5 seconds. Must not be zero.
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.config.connect_timeout = timeout;
        self
    }

    /// How long the server may take to answer one command before the attempt
    /// fails with a timeout (and is retried, see [`retry_attempts`](Self::retry_attempts)).
    ///
    /// Defaults to 3 seconds. Must not be zero.
    pub fn response_timeout(mut self, timeout: Duration) -> Self {
        self.config.response_timeout = timeout;
        self
    }

    /// How many times a command is sent again after a transient failure
    /// (connection refused or dropped, timeout). Releases stay exactly-once
    /// across retries; see `docs/wire-format.md`.
    ///
    /// Together with the timeouts this bounds every call that does not wait
    /// (and each attempt of one that does, which waits an outage out: see
    /// [`outage_tolerance`](Self::outage_tolerance)) when Redis is down or
    /// stalled: one command fails within
    /// `(retry_attempts + 1) × (connect_timeout + response_timeout) + retry_attempts × retry_delay`
    /// (see `docs/reliability.md`); an acquire that fails with its outcome
    /// unknown adds one `response_timeout` to find out and give back what
    /// it may have taken.
    ///
    /// Defaults to 3.
    pub fn retry_attempts(mut self, attempts: u32) -> Self {
        self.config.retry_attempts = attempts;
        self
    }

    /// The pause before each retry of a failed command.
    ///
    /// Defaults to 50 milliseconds.
    pub fn retry_delay(mut self, delay: Duration) -> Self {
        self.config.retry_delay = delay;
        self
    }

    /// How many idle command connections the client keeps open for reuse.
    /// More connections than this are opened when that many threads talk to
    /// Redis at once, and closed when they are returned.
    ///
    /// Defaults to 16. Must not be zero.
    pub fn max_idle_connections(mut self, count: usize) -> Self {
        self.config.max_idle_connections = count;
        self
    }

    /// How long a fair lock's waiter keeps its place in the queue after its
    /// turn was due; a waiter that died is dropped from the queue then, so
    /// it stalls the waiters behind it for at most this long.
    ///
    /// Defaults to 5 minutes, as in Redisson. Must not be zero.
    pub fn fair_wait_timeout(mut self, timeout: Duration) -> Self {
        self.config.fair_wait_timeout = timeout;
        self
    }

    /// How long a call that waits for a lock (`lock()`, `try_lock_for`,
    /// `lock_interruptibly`) keeps trying while Redis is unreachable: the
    /// connection is refused, dropped or times out, or the server is
    /// loading its data or failing over. Such a call sleeps a backoff (100
    /// ms doubling to 1 s, with jitter), checks that Redis answers, and
    /// tries the lock again, so a restart or a failover costs the waiter
    /// time, not an error. Once Redis has been unreachable for this long
    /// (counted from the first attempt that failed, and again from zero
    /// after any attempt that reached it), the call fails with
    /// [`Error::Unreachable`], which says for how long. Its own wait time
    /// ends it first when shorter (with the same error: the lock's state
    /// is unknown). `None` waits as long as the call would: forever for
    /// `lock()`. `Some(Duration::ZERO)` gives up at the first failed
    /// attempt. Calls that do not wait (`try_lock`, `is_locked`, releases)
    /// are not affected: they fail within the bound of
    /// [`retry_attempts`](Self::retry_attempts).
    ///
    /// Defaults to 60 seconds.
    pub fn outage_tolerance(mut self, tolerance: Option<Duration>) -> Self {
        self.config.outage_tolerance = tolerance;
        self
    }

    /// How many threads of the client's own run the Redis calls of async
    /// callers (`lock_async` and the other `_async` forms): no executor
    /// thread ever waits on Redis, and a waiting task costs no thread. The
    /// threads start with the first async call. More help when many async
    /// calls run at once against a slow or stalled server (each call in
    /// flight occupies one thread for up to a command's bound).
    ///
    /// Defaults to 4.
    ///
    /// # Panics
    ///
    /// Never; zero is taken as one.
    pub fn async_threads(mut self, threads: usize) -> Self {
        self.config.async_threads = threads.max(1);
        self
    }

    /// A function called once for each lock this client finds lost while it
    /// was held (it expired or was deleted under us), with the lock's name.
    ///
    /// It runs on a thread of the client's own (`redhold-callbacks`), one
    /// call at a time, never while the client holds an internal lock: a
    /// callback that blocks delays the next callbacks, not the renewals. It
    /// may call [`Client::shutdown`]. A panic in it is caught and logged.
    /// The same loss is also reported by [`LockGuard::is_held`](crate::LockGuard::is_held),
    /// by [`Error::LockLost`] on release, and by a warning in the log.
    ///
    /// Defaults to none.
    pub fn on_lock_lost(mut self, callback: impl Fn(&str) + Send + Sync + 'static) -> Self {
        self.config.on_lock_lost = Some(Arc::new(move |lost: &LostHold| callback(&lost.lock)));
        self
    }

    /// Like [`on_lock_lost`](Self::on_lock_lost), called with the whole
    /// [`LostHold`]: the lock, and who held it (a thread, or the
    /// [`Owner`](crate::Owner)). It replaces an `on_lock_lost` callback set
    /// before (and the other way round): one is all it takes.
    ///
    /// Defaults to none.
    pub fn on_hold_lost(mut self, callback: impl Fn(&LostHold) + Send + Sync + 'static) -> Self {
        self.config.on_lock_lost = Some(Arc::new(callback));
        self
    }

    /// Checks the settings, connects to the server, checks that it answers
    /// and starts the client's subscriber and watchdog threads.
    ///
    /// On one server it returns within about twice the connect timeout plus
    /// the response timeout, whatever the server does (silent, or answering
    /// one byte at a time): the command connection's set-up shares one
    /// connect timeout, the pub/sub connection gets a connect timeout for
    /// its socket and one response timeout for all of its handshake. A
    /// Cluster or Sentinel asks more servers, each within the same limits.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for a zero timeout, [`Error::InvalidUrl`]
    /// for a malformed URL, [`Error::Connect`] when the server cannot be
    /// reached or refuses the credentials within the connect timeout.
    pub fn build(self) -> Result<Client> {
        self.validate()?;
        Client::start(self.config)
    }

    fn validate(&self) -> Result<()> {
        let c = &self.config;
        non_zero("watchdog timeout", c.watchdog_timeout)?;
        non_zero("connect timeout", c.connect_timeout)?;
        non_zero("response timeout", c.response_timeout)?;
        non_zero("fair wait timeout", c.fair_wait_timeout)?;
        // Sent to the fair lock's scripts with every acquire.
        wire_millis("fair wait timeout", c.fair_wait_timeout)?;
        if c.client_name.as_deref() == Some("") {
            return Err(Error::InvalidArgument {
                what: "client name",
                reason: "it is empty; leave it unset to use the executable's name".into(),
            });
        }
        if let Some((replicas, timeout)) = c.sync_replicas {
            if replicas == 0 {
                return Err(Error::InvalidArgument {
                    what: "sync_replicas",
                    reason: "the number of replicas must be at least 1".into(),
                });
            }
            non_zero("sync_replicas timeout", timeout)?;
            // Sent as WAIT's timeout, where 0 would mean "for ever".
            wire_millis("sync_replicas timeout", timeout)?;
            if timeout >= c.response_timeout {
                return Err(Error::InvalidArgument {
                    what: "sync_replicas timeout",
                    reason: format!(
                        "{timeout:?} must be shorter than the response timeout ({:?}), \
                         or every WAIT would time out on the socket first",
                        c.response_timeout
                    ),
                });
            }
        }
        match &c.deployment {
            Deployment::Standalone => {}
            #[cfg(feature = "cluster")]
            Deployment::Cluster(nodes) => {
                if nodes.is_empty() {
                    return Err(Error::InvalidArgument {
                        what: "cluster nodes",
                        reason: "give at least one node URL".into(),
                    });
                }
                if c.sync_replicas.is_some() {
                    return Err(Error::InvalidArgument {
                        what: "sync_replicas",
                        reason: "not supported on a cluster: WAIT must reach the node that \
                                 took the write"
                            .into(),
                    });
                }
            }
            #[cfg(feature = "sentinel")]
            Deployment::Sentinel { sentinels, master } => {
                if sentinels.is_empty() || master.is_empty() {
                    return Err(Error::InvalidArgument {
                        what: "sentinel",
                        reason: "give at least one sentinel URL and the master's name".into(),
                    });
                }
            }
        }
        if c.max_idle_connections == 0 {
            return Err(Error::InvalidArgument {
                what: "max idle connections",
                reason: "must be at least 1".into(),
            });
        }
        // The watchdog timeout becomes every renewed lock's TTL: the same
        // bounds as a lease.
        lease_millis(c.watchdog_timeout).map_err(|e| match e {
            Error::InvalidArgument { reason, .. } => Error::InvalidArgument {
                what: "watchdog timeout",
                reason,
            },
            other => other,
        })?;
        // Redis keeps TTLs in whole milliseconds.
        if c.watchdog_timeout < Duration::from_millis(3) {
            return Err(Error::InvalidArgument {
                what: "watchdog timeout",
                reason: "must be at least 3 ms, so that renewing every third of it is possible"
                    .into(),
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_timeouts_are_refused() {
        let b = ClientBuilder::default().watchdog_timeout(Duration::ZERO);
        assert!(matches!(b.validate(), Err(Error::InvalidArgument { .. })));
        let b = ClientBuilder::default().response_timeout(Duration::ZERO);
        assert!(matches!(b.validate(), Err(Error::InvalidArgument { .. })));
    }
}
