//! The only code that talks to Redis: command connections to one server, a
//! cluster or a sentinel-managed master ([`pool`], [`backend`], [`opener`],
//! [`sentinel`]), the pub/sub socket with its TLS and RESP reader
//! ([`socket`], [`tls`], [`resp`]), the cluster's shape ([`topology`],
//! [`slot`]), and the facts of the protocol that every kind of lock shares
//! (the publish command, the unlock latch's lifetime, replica sync), kept on
//! [`Server`].
//!
//! Everything above this layer (the kinds, the engine, pub/sub, the
//! watchdog) reaches Redis through a [`Server`] and never opens a socket of
//! its own.

pub(crate) mod backend;
#[cfg(feature = "cluster")]
mod cluster_node;
pub(crate) mod connection;
pub(crate) mod late;
mod opener;
pub(crate) mod pool;
mod pubsub_mode;
mod recorder;
pub(crate) mod request;
pub(crate) mod resp;
#[cfg(test)]
mod resp_props;
#[cfg(feature = "sentinel")]
mod sentinel;
pub(crate) mod slot;
pub(crate) mod socket;
mod stream;
#[cfg(feature = "tls")]
mod tls;
#[cfg(feature = "cluster")]
pub(crate) mod topology;
mod url_problem;
mod wire;

use std::cell::Cell;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::{ConnectionInfo, ConnectionLike, RedisResult};

use crate::config::Config;
use crate::error::{Error, Result};
pub(crate) use late::{LateRequests, Trailing};
use pool::Pool;
use pubsub_mode::choose_pubsub_mode;
pub(crate) use pubsub_mode::PubSubMode;
pub(crate) use recorder::Recorder;
pub(crate) use request::{Request, Resends};
#[cfg(feature = "sentinel")]
pub(crate) use sentinel::Sentinels;
use socket::{Reader, Stream, TlsConnector};

thread_local! {
    /// Set while the thread gives back holds after close: see
    /// [`Server::giving_back`].
    static GIVING_BACK: Cell<bool> = const { Cell::new(false) };
}

/// The scope of [`Server::giving_back`]; dropping it ends it.
#[derive(Debug)]
#[must_use = "the scope ends when this is dropped"]
pub(crate) struct GivingBack {
    /// Whether the thread was giving back already (scopes nest).
    was: bool,
}

impl Drop for GivingBack {
    fn drop(&mut self) {
        GIVING_BACK.set(self.was);
    }
}

/// One deployment of Redis as the rest of the crate sees it.
#[derive(Debug)]
pub(crate) struct Server {
    pool: Pool,
    pubsub_mode: PubSubMode,
    /// What [`publish_command`](Self::publish_command) answers.
    publish: &'static str,
    /// The trusted roots for `rediss://` pub/sub sockets, prepared once; the
    /// command connections get the same roots through the redis crate.
    tls: Arc<TlsConnector>,
    /// Set by [`close`](Self::close): every later command fails with
    /// [`Error::Shutdown`].
    closed: AtomicBool,
    /// The process that opened the connections: a `fork()` child shares
    /// the parent's sockets and holder ids, and must not use them.
    pid: u32,
}

impl Server {
    /// Parses the URLs, connects and checks that the deployment answers
    /// (and, on a cluster, chooses between sharded and classic pub/sub).
    pub(crate) fn open(config: &Config) -> Result<Server> {
        let pool = Pool::open(config)?;
        let (pubsub_mode, publish) = choose_pubsub_mode(&pool, config)?;
        log::debug!("redhold: pub/sub is {pubsub_mode:?}, releases announced with {publish}");
        Ok(Server {
            pool,
            pubsub_mode,
            publish,
            tls: Arc::new(TlsConnector::new(config.tls_root_cert.clone())),
            closed: AtomicBool::new(false),
            pid: std::process::id(),
        })
    }

    /// The settings the client was built with.
    pub(crate) fn config(&self) -> &Config {
        self.pool.config()
    }

    /// The command connections themselves, for the callers that must not be
    /// stopped by [`close`](Self::close) (the watchdog's last pass, the
    /// pub/sub layer's topology queries) or need a deadline.
    pub(crate) fn pool(&self) -> &Pool {
        &self.pool
    }

    /// Runs a command with the retry rule.
    pub(crate) fn run<T>(
        &self,
        op: impl FnMut(&mut dyn ConnectionLike) -> RedisResult<T>,
    ) -> Result<T> {
        self.check_open()?;
        self.pool.run(op)
    }

    /// Runs a write with the retry rule and, when the client syncs replicas
    /// and `wrote` says the write changed something, checks that enough
    /// replicas have it: [`Error::ReplicasNotSynced`] otherwise (the write
    /// stands on the master; the caller decides whether to undo it).
    pub(crate) fn run_write<T>(
        &self,
        lock: &str,
        op: impl FnMut(&mut dyn ConnectionLike) -> RedisResult<T>,
        wrote: impl Fn(&T) -> bool,
    ) -> Result<T> {
        self.run_write_until(lock, None, op, wrote)
    }

    /// [`run_write`](Self::run_write) that ends its attempts at `deadline`
    /// when one is given (see [`Pool::run_until`]).
    pub(crate) fn run_write_until<T>(
        &self,
        lock: &str,
        deadline: Option<Instant>,
        op: impl FnMut(&mut dyn ConnectionLike) -> RedisResult<T>,
        wrote: impl Fn(&T) -> bool,
    ) -> Result<T> {
        self.run_write_keeping(lock, deadline, None, op, wrote)
    }

    /// [`run_write_until`](Self::run_write_until) that keeps in `late` the
    /// connections of attempts whose reply did not come in time (see
    /// `late.rs`).
    pub(crate) fn run_write_keeping<T>(
        &self,
        lock: &str,
        deadline: Option<Instant>,
        late: Option<&mut LateRequests>,
        op: impl FnMut(&mut dyn ConnectionLike) -> RedisResult<T>,
        wrote: impl Fn(&T) -> bool,
    ) -> Result<T> {
        self.check_open()?;
        let (value, acknowledged) = self.pool.run_write(deadline, late, op, wrote)?;
        self.synced(lock, value, acknowledged)
    }

    /// Sends one look of `request` on lock `name` (see `request.rs`): with
    /// the retry rule, the latch's life checked and the replicas' sync
    /// checked like [`run_write`](Self::run_write). A look the replicas
    /// did not confirm is one the call does not keep.
    pub(crate) fn run_request<T>(
        &self,
        name: &str,
        request: &mut Request,
        op: impl FnMut(&mut dyn ConnectionLike, &str, u64, u64) -> RedisResult<T>,
        wrote: impl Fn(&T) -> bool,
    ) -> Result<T> {
        self.check_open()?;
        let (value, acknowledged) = request.run(&self.pool, name, op, wrote)?;
        self.synced(name, value, acknowledged)
            .inspect_err(|_| request.unkept())
    }

    /// Ends `request`'s call with `undo` behind its late attempts (see
    /// [`Request::undo`]: whether a reply confirmed it), also while the
    /// client shuts down.
    pub(crate) fn undo_request(&self, request: &mut Request, undo: &redis::Cmd) -> Result<bool> {
        self.check_process()?;
        request.undo(&self.pool, undo)
    }

    /// `value`, or [`Error::ReplicasNotSynced`] when fewer replicas than
    /// wanted `acknowledged` the write that gave it.
    fn synced<T>(&self, lock: &str, value: T, acknowledged: Option<usize>) -> Result<T> {
        match (acknowledged, self.pool.replicas_wanted()) {
            (Some(acknowledged), Some(wanted)) if acknowledged < wanted => {
                Err(Error::ReplicasNotSynced {
                    lock: crate::names::shorten(lock),
                    wanted,
                    acknowledged,
                })
            }
            _ => Ok(value),
        }
    }

    /// Runs a command that takes back this client's own traces in Redis (a
    /// waiter leaving a fair queue), with the retry rule, also while the
    /// client shuts down: shutdown waits for it.
    pub(crate) fn run_cleanup<T>(
        &self,
        op: impl FnMut(&mut dyn ConnectionLike) -> RedisResult<T>,
    ) -> Result<T> {
        self.check_process()?;
        self.pool.run(op)
    }

    /// Fails with [`Error::Shutdown`] once closed (unless the calling
    /// thread is [`giving_back`](Self::giving_back) a hold), and with
    /// [`Error::ForkedProcess`] in a forked child.
    pub(crate) fn check_open(&self) -> Result<()> {
        self.check_process()?;
        if self.is_closed() && !GIVING_BACK.get() {
            return Err(Error::Shutdown);
        }
        Ok(())
    }

    /// Lets the calling thread's commands through after
    /// [`close`](Self::close) until the returned value drops (never in a
    /// forked child): it gives back holds that an acquire took as the
    /// client shut down, which would otherwise stay in Redis until their
    /// TTL runs out. Shutdown waits for acquire calls, so this ends before
    /// it returns (within its grace).
    pub(crate) fn giving_back(&self) -> GivingBack {
        GivingBack {
            was: GIVING_BACK.replace(true),
        }
    }

    /// Fails with [`Error::ForkedProcess`] unless called in the process
    /// that opened the server.
    pub(crate) fn check_process(&self) -> Result<()> {
        let pid = std::process::id();
        if pid != self.pid {
            return Err(Error::ForkedProcess {
                parent: self.pid,
                child: pid,
            });
        }
        Ok(())
    }

    /// Refuses every later command (but cleanups); returns whether this call
    /// closed it (false when it was closed already).
    pub(crate) fn close(&self) -> bool {
        !self.closed.swap(true, Ordering::SeqCst)
    }

    /// Whether [`close`](Self::close) was called.
    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    /// Closes the idle command connections.
    pub(crate) fn close_idle(&self) {
        self.pool.close_idle();
    }

    // ---- the protocol every kind shares ----

    /// Sharded or classic pub/sub.
    #[cfg(feature = "cluster")]
    pub(crate) fn pubsub_mode(&self) -> PubSubMode {
        self.pubsub_mode
    }

    /// The command a release announces itself with, an argument of every
    /// script that publishes: `publish`, `spublish`, or
    /// [`PUBLISH_BOTH`](crate::scripts::PUBLISH_BOTH) on a cluster that
    /// serves sharded pub/sub and whose fleet may mix both ways of listening
    /// (see `ClientBuilder::publish_both_ways`).
    pub(crate) fn publish_command(&self) -> &'static str {
        self.publish
    }

    /// The commands [`publish_command`](Self::publish_command) stands for,
    /// for a publish sent outside a script.
    pub(crate) fn publish_commands(&self) -> &'static [&'static str] {
        match self.publish {
            crate::scripts::PUBLISH_BOTH => &["publish", "spublish"],
            "spublish" => &["spublish"],
            _ => &["publish"],
        }
    }

    /// The commands a channel is subscribed and unsubscribed with.
    pub(crate) fn subscribe_commands(&self) -> (&'static [u8], &'static [u8]) {
        match self.pubsub_mode {
            PubSubMode::Classic => (b"SUBSCRIBE", b"UNSUBSCRIBE"),
            #[cfg(feature = "cluster")]
            PubSubMode::Sharded => (b"SSUBSCRIBE", b"SUNSUBSCRIBE"),
        }
    }

    /// The latch key of request `request_id` on lock `name`, resent only by
    /// the retry rule, and its TTL in ms (see `lua/release.lua`).
    pub(crate) fn unlock_latch(&self, name: &str, request_id: &str) -> (String, u64) {
        let request = self.request(name, request_id, Resends::Retries);
        (request.latch().to_owned(), request.latch_ttl_ms())
    }

    /// Request `request_id` on lock (or synchronizer) `name`, resent as
    /// `resends` says: its latch key and lifetime (see `request.rs`).
    pub(crate) fn request(&self, name: &str, request_id: &str, resends: Resends) -> Request {
        Request::new(
            crate::names::unlock_latch(name, request_id),
            resends,
            self.config(),
        )
    }

    // ---- pub/sub sockets and topology ----

    /// Where a classic pub/sub connection goes: the server, the current
    /// master, or a cluster node (`attempt` picks which seed, so that
    /// reconnects try them in turn).
    pub(crate) fn pubsub_target(&self, attempt: usize) -> RedisResult<ConnectionInfo> {
        self.pool.backend().pubsub_target(attempt)
    }

    /// Opens an authenticated pub/sub socket to `target`; its reader wakes
    /// every `tick` so that its owner can do housekeeping.
    pub(crate) fn open_pubsub(
        &self,
        target: &ConnectionInfo,
        tick: Duration,
    ) -> io::Result<(Reader, Stream)> {
        socket::connect(
            target,
            &self.tls,
            self.config().connect_timeout,
            self.config().response_timeout,
            tick,
            self.config().connection_name.as_deref(),
        )
    }

    /// Whether this is a cluster.
    pub(crate) fn is_cluster(&self) -> bool {
        self.pool.backend().is_cluster()
    }

    /// The cluster's current slot map.
    #[cfg(feature = "cluster")]
    pub(crate) fn slot_map(&self) -> Result<topology::SlotMap> {
        topology::SlotMap::load(&self.pool)
    }

    /// A connection of its own to every master of the cluster (`SCAN`
    /// covers only the node it is sent to), with its `host:port`.
    #[cfg(feature = "cluster")]
    pub(crate) fn connect_masters(&self) -> Result<Vec<(String, connection::Connection)>> {
        let seed = self.cluster_seed()?;
        let mut masters = Vec::new();
        for node in self.slot_map()?.masters() {
            let address = node.address();
            let info = topology::node_at(&seed, &node);
            let conn = backend::direct_connection(info, self.config()).map_err(|source| {
                Error::Connect {
                    url: format!("cluster node {address}"),
                    source,
                }
            })?;
            masters.push((address, conn));
        }
        Ok(masters)
    }

    /// The settings (credentials, TLS) of the first cluster seed, which
    /// every node is reached with.
    #[cfg(feature = "cluster")]
    pub(crate) fn cluster_seed(&self) -> RedisResult<ConnectionInfo> {
        self.pool.backend().pubsub_target(0)
    }
}
