//! Finding the master of a Sentinel-managed group, with every network call
//! bounded by the client's timeouts.
//!
//! The redis crate's sync `SentinelClient` waits for a sentinel without a
//! timeout and needs `&mut self`, so one stopped sentinel (SIGSTOP, a frozen
//! VM: it accepts connections but never answers) would hang every thread
//! that opens a connection, queued behind a mutex. This follows the Sentinel
//! client specification instead: ask each sentinel in turn, each connect and
//! each reply bounded, skip one that fails, and start the next look-up with
//! the sentinel that answered last.

use std::collections::HashMap;
use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use redis::{ConnectionAddr, ConnectionInfo, ErrorKind, RedisError, RedisResult, Role};

use super::connection::Connection;
use super::opener::Opener;
use super::socket::{self, Reader, Stream};
use super::stream::TlsConnector;

/// The connect and response timeouts of one look-up, and the moment by
/// which it must be over, if any.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    pub(crate) connect: Duration,
    pub(crate) response: Duration,
    pub(crate) deadline: Option<Instant>,
}

impl Limits {
    /// `timeout` cut to the time left before the deadline; a timeout error
    /// when none is left.
    fn cut(&self, timeout: Duration) -> RedisResult<Duration> {
        let Some(deadline) = self.deadline else {
            return Ok(timeout);
        };
        match deadline.checked_duration_since(Instant::now()) {
            Some(left) if !left.is_zero() => Ok(timeout.min(left)),
            _ => Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "no time left before the deadline to look up the master",
            )
            .into()),
        }
    }
}

/// One sentinel: where it is, and a connection kept for the next look-up.
struct Node {
    info: ConnectionInfo,
    /// Taken out while in use, so that no lock is held during I/O; threads
    /// that find it empty open their own connection.
    idle: Mutex<Option<Connection>>,
}

/// The sentinels of one master group.
pub(crate) struct Sentinels {
    nodes: Vec<Node>,
    master_name: String,
    /// The master is reached with the settings (credentials, TLS or not)
    /// of the first sentinel URL; only its address comes from the sentinels.
    master_template: ConnectionInfo,
    /// The sentinel that answered last; look-ups start with it.
    first: AtomicUsize,
    /// The client's TLS roots (`tls_root_cert`), for `rediss://` sentinels
    /// and the master they name.
    tls: Arc<TlsConnector>,
    /// `ip:port` of the master the last look-up connected to.
    last_master: Mutex<Option<String>>,
    /// The master a `+switch-master` announced, until a sentinel asked in a
    /// look-up names it too: the sentinel asked first may not know the
    /// switch yet, and the old master may still answer as one.
    announced: Mutex<Option<(String, u16)>>,
    /// The name of the client's connections to the master (`identity.rs`).
    name: Option<String>,
}

impl std::fmt::Debug for Sentinels {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sentinels")
            .field("count", &self.nodes.len())
            .field("master_name", &self.master_name)
            .field("first", &self.first.load(Ordering::Relaxed))
            .finish()
    }
}

impl Sentinels {
    /// The sentinels at `infos` (at least one), watching `master_name`,
    /// reached over TLS (for `rediss://`) trusting `tls`'s roots.
    pub(crate) fn new(
        infos: Vec<ConnectionInfo>,
        master_name: String,
        tls: Arc<TlsConnector>,
    ) -> Self {
        let master_template = infos[0].clone();
        Sentinels {
            nodes: infos
                .into_iter()
                .map(|info| Node {
                    info,
                    idle: Mutex::new(None),
                })
                .collect(),
            master_name,
            master_template,
            first: AtomicUsize::new(0),
            tls,
            last_master: Mutex::new(None),
            announced: Mutex::new(None),
            name: None,
        }
    }

    /// The same sentinels, naming the connections to the master `name`.
    pub(crate) fn naming_master_connections(self, name: Option<&str>) -> Self {
        Sentinels {
            name: name.map(str::to_owned),
            ..self
        }
    }

    /// The sentinels announced that the master moved to `address`
    /// (`ip:port`): the next look-ups go there first, until a sentinel
    /// asked names it too.
    pub(crate) fn switched_to(&self, address: &str) {
        let parsed = address
            .rsplit_once(':')
            .and_then(|(host, port)| Some((host.to_owned(), port.parse().ok()?)));
        *self.announced.lock() = parsed;
    }

    /// A new connection to the current master, checked with `ROLE`. Tries
    /// the master a `+switch-master` announced first, when one did (see
    /// [`switched_to`](Self::switched_to)); then asks the sentinels in
    /// turn, starting with the one that answered last, until one names a
    /// master that answers as a master. Each connect
    /// waits at most `limits.connect`, each reply `limits.response`, and
    /// nothing starts after `limits.deadline`.
    ///
    /// The error, when every sentinel failed, is one met on a master a
    /// sentinel named (the one a user can act on) or else the last one.
    pub(crate) fn connect_master(
        &self,
        limits: Limits,
    ) -> RedisResult<(ConnectionInfo, Connection)> {
        let announced = self.announced.lock().clone();
        if let Some(address) = announced.clone() {
            let named = format!("{}:{}", address.0, address.1);
            match self.open_master(address, limits) {
                Ok(found) => {
                    *self.last_master.lock() = Some(named);
                    return Ok(found);
                }
                Err(e) => {
                    // Gone, or demoted since: the sentinels know better.
                    log::debug!(
                        "redhold: the announced master {named} does not answer as one: {e}"
                    );
                    *self.announced.lock() = None;
                }
            }
        }
        let count = self.nodes.len();
        let start = self.first.load(Ordering::Relaxed) % count;
        let mut master_error = None;
        let mut last_error = None;
        for i in (0..count).map(|k| (start + k) % count) {
            let address = match self.ask(&self.nodes[i], limits) {
                Ok(address) => address,
                Err(e) => {
                    log::debug!(
                        "redhold: sentinel {} gave no master: {e}",
                        self.nodes[i].info.addr()
                    );
                    last_error = Some(e);
                    continue;
                }
            };
            let named = format!("{}:{}", address.0, address.1);
            if announced.as_ref() == Some(&address) {
                // The sentinels caught up with the announcement.
                *self.announced.lock() = None;
            }
            match self.open_master(address, limits) {
                Ok(found) => {
                    self.first.store(i, Ordering::Relaxed);
                    *self.last_master.lock() = Some(named);
                    return Ok(found);
                }
                Err(e) => {
                    log::debug!(
                        "redhold: the master named by sentinel {} does not answer as one: {e}",
                        self.nodes[i].info.addr()
                    );
                    master_error = Some(e);
                }
            }
        }
        Err(master_error.or(last_error).unwrap_or_else(|| {
            RedisError::from((ErrorKind::EmptySentinelList, "no sentinel to ask"))
        }))
    }

    /// How many sentinels there are.
    pub(crate) fn count(&self) -> usize {
        self.nodes.len()
    }

    /// The name the sentinels know the master by.
    pub(crate) fn master_name(&self) -> &str {
        &self.master_name
    }

    /// `ip:port` of the master the last look-up connected to, if any.
    pub(crate) fn last_master(&self) -> Option<String> {
        self.last_master.lock().clone()
    }

    /// Opens a pub/sub socket to sentinel `index` (modulo their number),
    /// authenticated and checked with `PING`, whose reader wakes every
    /// `tick`; and names that sentinel, for logs.
    pub(crate) fn open_watch(
        &self,
        index: usize,
        timeouts: (Duration, Duration),
        tick: Duration,
    ) -> io::Result<(Reader, Stream, String)> {
        let node = &self.nodes[index % self.nodes.len()];
        let (connect, response) = timeouts;
        let (reader, stream) =
            socket::connect(&node.info, &self.tls, connect, response, tick, None)?;
        Ok((reader, stream, node.info.addr().to_string()))
    }

    /// Asks one sentinel where the master is: `SENTINEL MASTER <name>`.
    fn ask(&self, node: &Node, limits: Limits) -> RedisResult<(String, u16)> {
        let kept = node.idle.lock().take();
        let state = match kept {
            // A kept connection may have been closed since (the sentinel
            // restarted): one that fails fast gets one more try on a fresh
            // connection. One that timed out does not: the sentinel stalls.
            Some(conn) => match self.query(conn, node, limits) {
                Err(e) if !e.is_timeout() && (e.is_io_error() || e.is_connection_dropped()) => {
                    self.query(self.open(node, limits)?, node, limits)?
                }
                result => result?,
            },
            None => self.query(self.open(node, limits)?, node, limits)?,
        };
        master_address(&state).ok_or_else(|| {
            RedisError::from((
                ErrorKind::MasterNameNotFoundBySentinel,
                "the sentinel knows no master by that name that is up",
            ))
        })
    }

    fn open(&self, node: &Node, limits: Limits) -> RedisResult<Connection> {
        Opener::new(node.info.clone(), Arc::clone(&self.tls))?.open(limits.cut(limits.connect)?)
    }

    /// Sends `SENTINEL MASTER <name>` on `conn`, which is kept for the next
    /// look-up if it answered. After a network error or a timeout it is
    /// dropped: a late reply may still be on its way.
    fn query(
        &self,
        mut conn: Connection,
        node: &Node,
        limits: Limits,
    ) -> RedisResult<HashMap<String, String>> {
        let response = limits.cut(limits.response)?;
        conn.set_read_timeout(Some(response))?;
        conn.set_write_timeout(Some(response))?;
        let state = redis::cmd("SENTINEL")
            .arg("MASTER")
            .arg(&self.master_name)
            .query(&mut conn);
        match &state {
            Err(e) if e.is_io_error() || e.is_timeout() || e.is_connection_dropped() => {}
            _ => {
                node.idle.lock().get_or_insert(conn);
            }
        }
        state
    }

    /// Connects to the address a sentinel named and checks that it is a
    /// master (a sentinel's view may be stale right after a failover).
    fn open_master(
        &self,
        (host, port): (String, u16),
        limits: Limits,
    ) -> RedisResult<(ConnectionInfo, Connection)> {
        let addr = match self.master_template.addr() {
            // The master is reached as the first sentinel is: TLS or not,
            // verified or not (`#insecure`).
            ConnectionAddr::TcpTls { insecure, .. } => ConnectionAddr::TcpTls {
                host,
                port,
                insecure: *insecure,
                tls_params: None,
            },
            _ => ConnectionAddr::Tcp(host, port),
        };
        let info = self.master_template.clone().set_addr(addr);
        let mut conn = Opener::new(info.clone(), Arc::clone(&self.tls))?
            .named(self.name.as_deref())
            .open(limits.cut(limits.connect)?)?;
        let response = limits.cut(limits.response)?;
        conn.set_read_timeout(Some(response))?;
        conn.set_write_timeout(Some(response))?;
        match redis::cmd("ROLE").query::<Role>(&mut conn)? {
            Role::Primary { .. } => Ok((info, conn)),
            _ => Err(RedisError::from((
                ErrorKind::MasterNameNotFoundBySentinel,
                "the node the sentinel named is not a master (yet)",
            ))),
        }
    }
}

/// The master's address from `SENTINEL MASTER` fields, when the sentinel
/// sees it as an up master.
fn master_address(state: &HashMap<String, String>) -> Option<(String, u16)> {
    let flags = state.get("flags")?;
    let is_up_master = flags.split(',').any(|f| f == "master")
        && !flags.split(',').any(|f| f == "s_down" || f == "o_down");
    if !is_up_master {
        return None;
    }
    let port = state.get("port")?.parse().ok()?;
    Some((state.get("ip")?.clone(), port))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(flags: &str) -> HashMap<String, String> {
        [("ip", "10.0.0.1"), ("port", "6380"), ("flags", flags)]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect()
    }

    #[test]
    fn only_an_up_master_has_an_address() {
        assert_eq!(
            master_address(&state("master")),
            Some(("10.0.0.1".to_owned(), 6380))
        );
        assert_eq!(master_address(&state("master,s_down")), None);
        assert_eq!(master_address(&state("master,s_down,o_down")), None);
        assert_eq!(master_address(&state("slave")), None);
        let mut no_port = state("master");
        no_port.remove("port");
        assert_eq!(master_address(&no_port), None);
    }

    #[test]
    fn no_time_left_is_a_timeout() {
        let limits = Limits {
            connect: Duration::from_secs(1),
            response: Duration::from_secs(1),
            deadline: Some(Instant::now()),
        };
        let e = limits.cut(Duration::from_secs(1)).unwrap_err();
        assert!(e.is_timeout() || e.is_io_error(), "{e}");
        let unbounded = Limits {
            deadline: None,
            ..limits
        };
        assert_eq!(
            unbounded.cut(Duration::from_secs(1)).unwrap(),
            Duration::from_secs(1)
        );
    }
}
