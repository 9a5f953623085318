//! The connection to one cluster node, for the redis crate's cluster
//! client (`ClusterClient::get_generic_connection`): ours (one deadline
//! for each whole reply, see [`connection`](super::connection)) for
//! `redis://` and unix nodes.
//!
//! `rediss://` nodes keep the redis crate's own connection: the crate hands
//! a node's TLS roots over only in a type of its own that nothing outside
//! it can read, so our TLS stream cannot be given them. Their replies keep
//! the crate's timeout per read (docs/security.md says so).

use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::{ConnectionAddr, ConnectionLike, IntoConnectionInfo, RedisResult, Value};

use super::connection::Connection;
use super::opener::Opener;
use super::stream::TlsConnector;

/// One node's connection.
pub(crate) enum ClusterNode {
    /// `redis://` or unix: ours.
    Plain(Connection),
    /// `rediss://`: the redis crate's.
    Tls(Box<redis::Connection>),
}

impl redis::cluster::Connect for ClusterNode {
    fn connect<T: IntoConnectionInfo>(info: T, timeout: Option<Duration>) -> RedisResult<Self> {
        let info = info.into_connection_info()?;
        if let ConnectionAddr::TcpTls { .. } = info.addr() {
            let conn = <redis::Connection as redis::cluster::Connect>::connect(info, timeout)?;
            return Ok(ClusterNode::Tls(Box::new(conn)));
        }
        let timeout = timeout.unwrap_or(Duration::MAX);
        let conn = Opener::new(info, Arc::new(TlsConnector::new(None)))?.open(timeout)?;
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
