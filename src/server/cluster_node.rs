//! The connection to one cluster node, for the redis crate's cluster
//! client (`ClusterClient::get_generic_connection`): ours, with one
//! deadline for each whole reply (see [`connection`](super::connection)),
//! for `redis://`, `rediss://` and unix nodes.
//!
//! The crate opens node connections through a static function that gets
//! only the node's address, and hands TLS roots over only in a type of its
//! own that nothing outside it can read. So the client's TLS connector
//! (its `tls_root_cert`) travels beside the call instead: every call into a
//! cluster connection runs inside [`ScopedCluster`], which lends the
//! connector to the thread for that call (the sync cluster client opens
//! node connections on the calling thread). A node opened outside such a
//! call, which the client never does, falls back to the crate's connection
//! and its timeout per read.

use std::cell::RefCell;
use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::{ConnectionAddr, ConnectionLike, IntoConnectionInfo, RedisResult, Value};

use super::connection::Connection;
use super::opener::Opener;
use super::stream::TlsConnector;

thread_local! {
    /// The TLS connector of the cluster connection this thread is in a
    /// call of, if any.
    static LENT_TLS: RefCell<Option<Arc<TlsConnector>>> = const { RefCell::new(None) };
}

/// Runs `f` with `tls` lent to this thread for the node connections it
/// opens; the thread's previous loan is back afterwards, panic or not.
fn with_tls<T>(tls: &Arc<TlsConnector>, f: impl FnOnce() -> T) -> T {
    struct Restore(Option<Arc<TlsConnector>>);
    impl Drop for Restore {
        fn drop(&mut self) {
            LENT_TLS.with(|lent| *lent.borrow_mut() = self.0.take());
        }
    }
    let _restore = Restore(LENT_TLS.with(|lent| lent.borrow_mut().replace(Arc::clone(tls))));
    f()
}

/// A cluster connection that lends its client's TLS connector to every
/// call made into it (see the module docs).
pub(crate) struct ScopedCluster {
    conn: redis::cluster::ClusterConnection<ClusterNode>,
    tls: Arc<TlsConnector>,
}

impl ScopedCluster {
    /// Opens a cluster connection through `client`, its first node
    /// connections trusting `tls`.
    pub(crate) fn open(
        client: &redis::cluster::ClusterClient,
        tls: &Arc<TlsConnector>,
    ) -> RedisResult<ScopedCluster> {
        let conn = with_tls(tls, || client.get_generic_connection::<ClusterNode>())?;
        Ok(ScopedCluster {
            conn,
            tls: Arc::clone(tls),
        })
    }

    /// Sets how long one read or write of each node connection may block
    /// (ours also bound each whole reply by it).
    pub(crate) fn set_timeouts(&self, timeout: Duration) -> RedisResult<()> {
        self.conn.set_read_timeout(Some(timeout))?;
        self.conn.set_write_timeout(Some(timeout))
    }
}

impl ConnectionLike for ScopedCluster {
    fn req_packed_command(&mut self, cmd: &[u8]) -> RedisResult<Value> {
        let conn = &mut self.conn;
        with_tls(&self.tls, || conn.req_packed_command(cmd))
    }

    fn req_packed_commands(
        &mut self,
        cmd: &[u8],
        offset: usize,
        count: usize,
    ) -> RedisResult<Vec<Value>> {
        let conn = &mut self.conn;
        with_tls(&self.tls, || conn.req_packed_commands(cmd, offset, count))
    }

    fn get_db(&self) -> i64 {
        self.conn.get_db()
    }

    fn check_connection(&mut self) -> bool {
        let conn = &mut self.conn;
        with_tls(&self.tls, || conn.check_connection())
    }

    fn is_open(&self) -> bool {
        self.conn.is_open()
    }
}

/// One node's connection.
pub(crate) enum ClusterNode {
    /// Ours: `redis://`, unix, and `rediss://` opened within a call of a
    /// [`ScopedCluster`].
    Plain(Connection),
    /// The redis crate's: a `rediss://` node opened outside such a call.
    Tls(Box<redis::Connection>),
}

impl redis::cluster::Connect for ClusterNode {
    fn connect<T: IntoConnectionInfo>(info: T, timeout: Option<Duration>) -> RedisResult<Self> {
        let info = info.into_connection_info()?;
        let lent = LENT_TLS.with(|lent| lent.borrow().clone());
        let tls = match (info.addr(), lent) {
            (_, Some(tls)) => tls,
            (ConnectionAddr::TcpTls { .. }, None) => {
                log::debug!("redhold: a TLS cluster node opened outside a client call");
                let conn = <redis::Connection as redis::cluster::Connect>::connect(info, timeout)?;
                return Ok(ClusterNode::Tls(Box::new(conn)));
            }
            (_, None) => Arc::new(TlsConnector::new(None)),
        };
        let timeout = timeout.unwrap_or(Duration::MAX);
        let conn = Opener::new(info, tls)?.open(timeout)?;
        // The cluster client checks the node at once, before it sets the
        // response timeout: that reply gets the connect timeout.
        conn.set_read_timeout(Some(timeout))?;
        Ok(ClusterNode::Plain(conn))
    }

    fn send_packed_command(&mut self, cmd: &[u8]) -> RedisResult<()> {
        match self {
            ClusterNode::Plain(c) => c.send(cmd).map(|_| ()),
            ClusterNode::Tls(c) => c.send_packed_command(cmd),
        }
    }

    fn set_write_timeout(&self, dur: Option<Duration>) -> RedisResult<()> {
        match self {
            ClusterNode::Plain(c) => c.set_write_timeout(dur),
            ClusterNode::Tls(c) => c.set_write_timeout(dur),
        }
    }

    fn set_read_timeout(&self, dur: Option<Duration>) -> RedisResult<()> {
        match self {
            ClusterNode::Plain(c) => c.set_read_timeout(dur),
            ClusterNode::Tls(c) => c.set_read_timeout(dur),
        }
    }

    fn recv_response(&mut self) -> RedisResult<Value> {
        match self {
            ClusterNode::Plain(c) => c.receive(c.deadline(Instant::now())),
            ClusterNode::Tls(c) => c.recv_response(),
        }
    }
}

impl ConnectionLike for ClusterNode {
    fn req_packed_command(&mut self, cmd: &[u8]) -> RedisResult<Value> {
        self.as_dyn().req_packed_command(cmd)
    }

    fn req_packed_commands(
        &mut self,
        cmd: &[u8],
        offset: usize,
        count: usize,
    ) -> RedisResult<Vec<Value>> {
        self.as_dyn().req_packed_commands(cmd, offset, count)
    }

    fn get_db(&self) -> i64 {
        match self {
            ClusterNode::Plain(c) => c.get_db(),
            ClusterNode::Tls(c) => c.get_db(),
        }
    }

    fn check_connection(&mut self) -> bool {
        self.as_dyn().check_connection()
    }

    fn is_open(&self) -> bool {
        match self {
            ClusterNode::Plain(c) => c.is_open(),
            ClusterNode::Tls(c) => c.is_open(),
        }
    }
}

impl std::fmt::Debug for ClusterNode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ClusterNode::Plain(c) => c.fmt(f),
            ClusterNode::Tls(_) => f.write_str("ClusterNode::Tls"),
        }
    }
}

impl ClusterNode {
    fn as_dyn(&mut self) -> &mut dyn ConnectionLike {
        match self {
            ClusterNode::Plain(c) => c,
            ClusterNode::Tls(c) => &mut **c,
        }
    }
}
