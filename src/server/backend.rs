//! How the client reaches its deployment: one server, a Redis Cluster, or a
//! master found through Sentinel; with or without TLS.

use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::{ConnectionInfo, ConnectionLike, IntoConnectionInfo, RedisResult};

#[cfg(feature = "cluster")]
use super::cluster_node::ScopedCluster;
use super::connection::Connection;
use super::opener::Opener;
#[cfg(feature = "sentinel")]
use super::sentinel::{Limits, Sentinels};
use super::stream::TlsConnector;
use super::url_problem::{url_problem, CRATE_SAYS};
use crate::config::{Config, Deployment};
use crate::error::{Error, Result};
use crate::redact::redact_url;

/// A way to open command connections and to find pub/sub endpoints.
pub(crate) enum Backend {
    /// One server (also TLS, also a replica set's master by URL).
    Standalone(Opener),
    /// A Redis Cluster: commands are routed by their first key.
    #[cfg(feature = "cluster")]
    Cluster {
        client: redis::cluster::ClusterClient,
        /// The nodes given by the user, for pub/sub and topology queries.
        seeds: Vec<ConnectionInfo>,
        /// The client's TLS roots, for `rediss://` nodes.
        tls: Arc<TlsConnector>,
    },
    /// The master of a Sentinel-managed group, resolved again for every new
    /// connection, so that a failover is followed. Look-ups hold no lock
    /// during I/O, and `timeouts` (connect, response) bound every call to a
    /// sentinel.
    #[cfg(feature = "sentinel")]
    Sentinel {
        sentinels: Sentinels,
        timeouts: (Duration, Duration),
    },
}

/// One command connection of any backend.
pub(crate) enum Conn {
    /// A connection to one server, and that server's address (for errors).
    Single(Connection, String),
    // Boxed: a cluster connection is several times the size of a plain one.
    #[cfg(feature = "cluster")]
    Cluster(Box<ScopedCluster>),
}

impl Conn {
    /// The connection as the redis crate's command target.
    pub(crate) fn as_dyn(&mut self) -> &mut dyn ConnectionLike {
        match self {
            Conn::Single(c, _) => c,
            #[cfg(feature = "cluster")]
            Conn::Cluster(c) => &mut **c,
        }
    }

    /// Who answers on this connection, for errors: `host:port`, or the
    /// cluster.
    pub(crate) fn peer(&self) -> &str {
        match self {
            Conn::Single(_, peer) => peer,
            #[cfg(feature = "cluster")]
            Conn::Cluster(_) => "the cluster",
        }
    }

    /// Whether an undo can be written behind this connection's last
    /// request: a connection to one server whose reply timed out (a cluster
    /// connection may have sent the request to any node).
    pub(crate) fn may_follow(&self) -> bool {
        matches!(self, Conn::Single(c, _) if c.is_late())
    }

    /// Writes `commands` (packed) behind the request whose reply never
    /// came, and closes the sending half when told (nobody reads the
    /// replies then): the server runs them in order when it gets to them.
    pub(crate) fn follow(&mut self, commands: &[u8], close_sending: bool) -> RedisResult<()> {
        match self {
            Conn::Single(c, _) => c.follow(commands, close_sending),
            #[cfg(feature = "cluster")]
            Conn::Cluster(_) => Err(std::io::Error::new(
                std::io::ErrorKind::Unsupported,
                "an undo cannot follow a request on a cluster connection",
            )
            .into()),
        }
    }

    /// Reads the next reply due on a connection an undo follows on, before
    /// `deadline`.
    pub(crate) fn receive(&mut self, deadline: Option<Instant>) -> RedisResult<redis::Value> {
        match self {
            Conn::Single(c, _) => c.receive(deadline),
            #[cfg(feature = "cluster")]
            Conn::Cluster(_) => Err(std::io::Error::new(
                std::io::ErrorKind::Unsupported,
                "no undo follows on a cluster connection",
            )
            .into()),
        }
    }

    /// Sets how long one read or write may block.
    pub(crate) fn set_timeouts(&self, timeout: Duration) -> RedisResult<()> {
        match self {
            Conn::Single(c, _) => {
                c.set_read_timeout(Some(timeout))?;
                c.set_write_timeout(Some(timeout))
            }
            #[cfg(feature = "cluster")]
            Conn::Cluster(c) => c.set_timeouts(timeout),
        }
    }
}

fn invalid_url(url: &str, e: impl std::fmt::Display) -> Error {
    // The redis crate says only that the URL did not parse: say which part.
    let said = e.to_string();
    let reason = match url_problem(url) {
        Some(part) if said.contains(CRATE_SAYS) => part,
        _ => said,
    };
    Error::InvalidUrl {
        url: redact_url(url),
        reason: format!(
            "{reason}; expected redis://[user:password@]host[:port][/db], rediss://… or redis+unix:///path"
        ),
    }
}

/// Parses one URL, refusing address types this build cannot reach.
fn parse(url: &str) -> Result<ConnectionInfo> {
    #[cfg(not(feature = "tls"))]
    if is_tls_scheme(url) {
        return Err(invalid_url(url, NEEDS_TLS_FEATURE));
    }
    let info = url
        .into_connection_info()
        .map_err(|e| invalid_url(url, e))?;
    if !info.addr().is_supported() {
        return Err(invalid_url(
            url,
            "unix sockets are not supported on this platform",
        ));
    }
    Ok(info)
}

/// Why a `rediss://` URL is refused by a build without the `tls` feature,
/// with the line that turns it on.
#[cfg(not(feature = "tls"))]
const NEEDS_TLS_FEATURE: &str = "TLS (rediss://) needs redhold's `tls` feature, which is off by \
     default: depend on redhold = { version = \"0.1\", features = [\"tls\"] }";

/// Whether `url` asks for TLS (`rediss://`, `valkeys://`), read before the
/// redis crate's own, vaguer, refusal.
#[cfg(not(feature = "tls"))]
fn is_tls_scheme(url: &str) -> bool {
    let scheme = url.split_once("://").map_or("", |(scheme, _)| scheme);
    scheme.eq_ignore_ascii_case("rediss") || scheme.eq_ignore_ascii_case("valkeys")
}

#[cfg(feature = "tls")]
fn certificates(config: &Config) -> Option<redis::TlsCertificates> {
    config
        .tls_root_cert
        .as_ref()
        .map(|pem| redis::TlsCertificates {
            client_tls: None,
            root_cert: Some(pem.clone()),
        })
}

/// TLS through rustls needs a process-wide crypto provider; install ring's
/// unless the program installed one already.
#[cfg(feature = "tls")]
pub(crate) fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

impl Backend {
    /// Parses the deployment's URLs; no I/O.
    pub(crate) fn new(config: &Config) -> Result<Backend> {
        #[cfg(feature = "tls")]
        install_crypto_provider();
        match &config.deployment {
            Deployment::Standalone => {
                let info = parse(&config.url)?;
                let tls = Arc::new(TlsConnector::new(config.tls_root_cert.clone()));
                Opener::new(info, tls)
                    .map(|opener| opener.named(config.connection_name.as_deref()))
                    .map(Backend::Standalone)
                    .map_err(|e| invalid_url(&config.url, e))
            }
            #[cfg(feature = "cluster")]
            Deployment::Cluster(nodes) => {
                let seeds = nodes.iter().map(|n| parse(n)).collect::<Result<Vec<_>>>()?;
                let builder = redis::cluster::ClusterClient::builder(seeds.clone())
                    .connection_timeout(config.connect_timeout)
                    .response_timeout(config.response_timeout)
                    // Our own retry rule applies on top; keep the crate's short.
                    .retries(1);
                #[cfg(feature = "tls")]
                let builder = match certificates(config) {
                    Some(certs) => builder.certs(certs),
                    None => builder,
                };
                let client = builder.build().map_err(|e| Error::InvalidUrl {
                    url: crate::redact::redact_all(nodes),
                    reason: e.to_string(),
                })?;
                let tls = Arc::new(TlsConnector::new(config.tls_root_cert.clone()));
                Ok(Backend::Cluster { client, seeds, tls })
            }
            #[cfg(feature = "sentinel")]
            Deployment::Sentinel { sentinels, master } => {
                let infos = sentinels
                    .iter()
                    .map(|s| parse(s))
                    .collect::<Result<Vec<_>>>()?;
                if infos.is_empty() {
                    return Err(invalid_url("", "no sentinel URL given"));
                }
                let tls = Arc::new(TlsConnector::new(config.tls_root_cert.clone()));
                Ok(Backend::Sentinel {
                    sentinels: Sentinels::new(infos, master.clone(), tls)
                        .naming_master_connections(config.connection_name.as_deref()),
                    timeouts: (config.connect_timeout, config.response_timeout),
                })
            }
        }
    }

    /// Opens one command connection within `connect_timeout`. Through
    /// Sentinel, each look-up call is bounded by the timeouts too, and none
    /// starts after `deadline`.
    pub(crate) fn connect(
        &self,
        connect_timeout: Duration,
        response_timeout: Duration,
        deadline: Option<Instant>,
    ) -> RedisResult<Conn> {
        let _ = deadline; // only a sentinel look-up makes several calls
        let conn = match self {
            Backend::Standalone(opener) => {
                Conn::Single(opener.open(connect_timeout)?, opener.address())
            }
            #[cfg(feature = "cluster")]
            Backend::Cluster { client, tls, .. } => {
                Conn::Cluster(Box::new(ScopedCluster::open(client, tls)?))
            }
            #[cfg(feature = "sentinel")]
            Backend::Sentinel { sentinels, .. } => {
                let (info, conn) = sentinels.connect_master(Limits {
                    connect: connect_timeout,
                    response: response_timeout,
                    deadline,
                })?;
                Conn::Single(conn, info.addr().to_string())
            }
        };
        conn.set_timeouts(response_timeout)?;
        Ok(conn)
    }

    /// Where a single pub/sub connection goes: the server, the current
    /// master, or a cluster node (`attempt` picks which seed, so that
    /// reconnects try them in turn).
    pub(crate) fn pubsub_target(&self, attempt: usize) -> RedisResult<ConnectionInfo> {
        let _ = attempt; // only a cluster has several places to try
        match self {
            Backend::Standalone(opener) => Ok(opener.info().clone()),
            #[cfg(feature = "cluster")]
            Backend::Cluster { seeds, .. } => Ok(seeds[attempt % seeds.len()].clone()),
            #[cfg(feature = "sentinel")]
            Backend::Sentinel {
                sentinels,
                timeouts: (connect, response),
            } => {
                let (info, _) = sentinels.connect_master(Limits {
                    connect: *connect,
                    response: *response,
                    deadline: None,
                })?;
                Ok(info)
            }
        }
    }

    /// The sentinels, when the master is found through them.
    #[cfg(feature = "sentinel")]
    pub(crate) fn sentinels(&self) -> Option<&Sentinels> {
        match self {
            Backend::Sentinel { sentinels, .. } => Some(sentinels),
            _ => None,
        }
    }

    /// Whether this is a cluster.
    pub(crate) fn is_cluster(&self) -> bool {
        #[cfg(feature = "cluster")]
        if let Backend::Cluster { .. } = self {
            return true;
        }
        false
    }
}

impl std::fmt::Debug for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Backend::Standalone(_) => f.write_str("Standalone"),
            #[cfg(feature = "cluster")]
            Backend::Cluster { seeds, .. } => write!(f, "Cluster({} seeds)", seeds.len()),
            #[cfg(feature = "sentinel")]
            Backend::Sentinel { sentinels, .. } => write!(f, "{sentinels:?}"),
        }
    }
}

#[cfg(feature = "cluster")]
/// A connection of its own to one node (a cluster master asked for its
/// version, or scanned), opened within the connect timeout, with the
/// client's TLS roots and its response timeout on every read and write.
pub(crate) fn direct_connection(info: ConnectionInfo, config: &Config) -> RedisResult<Connection> {
    let tls = Arc::new(TlsConnector::new(config.tls_root_cert.clone()));
    let opener = Opener::new(info, tls)?;
    let conn = opener.open(config.connect_timeout)?;
    conn.set_read_timeout(Some(config.response_timeout))?;
    conn.set_write_timeout(Some(config.response_timeout))?;
    Ok(conn)
}
