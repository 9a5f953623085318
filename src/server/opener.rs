//! Opening one command connection: the TCP connect, TLS, and every set-up
//! command within one connect timeout, with errors that say what happened.
//!
//! The TCP connect, the TLS handshake, AUTH and SELECT share one deadline:
//! each reply gets only what is left of it, all its bytes together (the
//! redis crate's own connect gave each set-up reply the whole timeout, and
//! its timeout applied to each read). A client's connection is named
//! (`CLIENT SETNAME`, `identity.rs`), as its pub/sub connection is; one
//! that sends nothing else gets a PING: every new connection proves that
//! a Redis server answers before it is used. The connection speaks RESP2 (a URL's
//! `protocol=resp3` is not followed: scripts answer the same either way).

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::{ConnectionAddr, ConnectionInfo, ErrorKind, RedisResult};

use super::connection::Connection;
use super::stream::{time_left, Stream, TlsConnector};
use crate::error::NOT_RESP;

/// How long a peer that answered something else than RESP gets to answer
/// again, for the error, when the connect timeout is too long to represent.
const PROBE_WITHOUT_DEADLINE: Duration = Duration::from_secs(5);

/// How many bytes of a reply that is not RESP an error shows.
const SHOWN: usize = 32;

/// Opens command connections to one server.
pub(crate) struct Opener {
    info: ConnectionInfo,
    /// The client's TLS roots, for `rediss://`.
    tls: Arc<TlsConnector>,
    /// The database to select, from the URL.
    db: i64,
    /// The client's connection name (`identity.rs`), if it names them.
    name: Option<Arc<str>>,
}

impl Opener {
    /// An opener for `info`, trusting `tls`'s roots for `rediss://`. No I/O.
    pub(crate) fn new(info: ConnectionInfo, tls: Arc<TlsConnector>) -> RedisResult<Opener> {
        let db = info.redis_settings().db();
        Ok(Opener {
            info,
            tls,
            db,
            name: None,
        })
    }

    /// The same opener, naming every connection it opens `name`.
    pub(crate) fn named(self, name: Option<&str>) -> Opener {
        Opener {
            name: name.map(Arc::from),
            ..self
        }
    }

    /// Where and how connections go (the database is not part of it:
    /// pub/sub ignores it).
    pub(crate) fn info(&self) -> &ConnectionInfo {
        &self.info
    }

    /// The server's address, `host:port` or the socket's path, for errors.
    pub(crate) fn address(&self) -> String {
        self.info().addr().to_string()
    }

    /// A new connection, set up and answering, within `timeout`: a
    /// connection that took longer fails with an I/O error of kind
    /// `TimedOut` that says so. Its reads and writes have no timeout yet.
    pub(crate) fn open(&self, timeout: Duration) -> RedisResult<Connection> {
        // A timeout too long to represent is no timeout at all.
        let deadline = Instant::now().checked_add(timeout);
        self.set_up(timeout, deadline)
            .map_err(|e| self.explain(e, timeout, deadline))
    }

    fn set_up(&self, timeout: Duration, deadline: Option<Instant>) -> RedisResult<Connection> {
        let stream = Stream::connect(self.info.addr(), &self.tls, timeout)?;
        let mut conn = Connection::new(stream, self.db);
        let settings = self.info.redis_settings();
        if let Some(password) = settings.password() {
            let mut auth = redis::cmd("AUTH");
            if let Some(user) = settings.username() {
                auth.arg(user);
            }
            run_before(&mut conn, auth.arg(password), deadline)?;
        }
        if self.db != 0 {
            run_before(&mut conn, redis::cmd("SELECT").arg(self.db), deadline)?;
        }
        if let Some(name) = &self.name {
            let setname = redis::cmd("CLIENT")
                .arg("SETNAME")
                .arg(name.as_ref())
                .clone();
            match run_before(&mut conn, &setname, deadline) {
                // An ACL that denies CLIENT SETNAME: the server answers all
                // the same.
                Err(e) if e.code() == Some("NOPERM") => {}
                other => other?,
            }
        } else if self.db == 0 && settings.password().is_none() {
            run_before(&mut conn, &redis::cmd("PING"), deadline)?;
        }
        conn.set_read_timeout(None)?;
        conn.set_write_timeout(None)?;
        Ok(conn)
    }

    /// Says what a failed set-up means: a timeout names the address and the
    /// timeout, a reply that is not RESP says that the server does not
    /// speak it. Other errors (refused, wrong password, the server's own
    /// error) are left as they are.
    fn explain(
        &self,
        e: redis::RedisError,
        timeout: Duration,
        deadline: Option<Instant>,
    ) -> redis::RedisError {
        if e.is_timeout() {
            return io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "connecting to {} timed out after {} ms",
                    self.address(),
                    timeout.as_millis()
                ),
            )
            .into();
        }
        if e.kind() != ErrorKind::Parse {
            return e;
        }
        let answered = match self.first_bytes(deadline) {
            Some(bytes) if !bytes.is_empty() => format!("it answered {}", shown(&bytes)),
            _ => format!("its reply could not be read: {e}"),
        };
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("the server at {} {NOT_RESP} ({answered})", self.address()),
        )
        .into()
    }

    /// What a plain TCP server answers to a PING on a connection of its
    /// own, read until `deadline`: the redis crate keeps no copy of a reply
    /// it could not parse. `None` over TLS or a unix socket, or when nothing
    /// came.
    fn first_bytes(&self, deadline: Option<Instant>) -> Option<Vec<u8>> {
        let ConnectionAddr::Tcp(host, port) = self.info().addr() else {
            return None;
        };
        // Without a deadline, a peer that answered garbage once gets as
        // long as the default connect timeout to answer again.
        let deadline = deadline.or_else(|| Instant::now().checked_add(PROBE_WITHOUT_DEADLINE));
        let left = || time_left(deadline).ok().flatten();
        let addr = std::net::ToSocketAddrs::to_socket_addrs(&(host.as_str(), *port))
            .ok()?
            .next()?;
        let mut stream = TcpStream::connect_timeout(&addr, left()?).ok()?;
        stream.set_write_timeout(Some(left()?)).ok()?;
        stream.write_all(b"*1\r\n$4\r\nPING\r\n").ok()?;
        let mut bytes = Vec::new();
        let mut chunk = [0u8; SHOWN + 1];
        while bytes.len() <= SHOWN {
            stream.set_read_timeout(Some(left()?)).ok()?;
            match stream.read(&mut chunk) {
                Ok(0) | Err(_) => break,
                Ok(n) => bytes.extend_from_slice(&chunk[..n]),
            }
        }
        Some(bytes)
    }
}

impl std::fmt::Debug for Opener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Opener")
            .field("address", &self.address())
            .field("db", &self.db)
            .finish()
    }
}

/// Runs one set-up command, its write and its whole reply bounded by what
/// is left before `deadline`.
fn run_before(
    conn: &mut Connection,
    cmd: &redis::Cmd,
    deadline: Option<Instant>,
) -> RedisResult<()> {
    let left = time_left(deadline)?;
    conn.set_read_timeout(left)?;
    conn.set_write_timeout(left)?;
    cmd.query::<()>(conn)
}

/// The first [`SHOWN`] bytes of `bytes`, quoted and escaped, with an
/// ellipsis when cut.
fn shown(bytes: &[u8]) -> String {
    let cut = &bytes[..bytes.len().min(SHOWN)];
    let text = String::from_utf8_lossy(cut);
    let more = if bytes.len() > SHOWN { "…" } else { "" };
    format!("\"{}{more}\"", text.escape_debug())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_are_shown_short_and_escaped() {
        assert_eq!(shown(b"HTTP/1.1 400\r\n"), r#""HTTP/1.1 400\r\n""#);
        let long = [b'a'; SHOWN + 5];
        let text = shown(&long);
        assert!(text.ends_with("…\""), "{text}");
        assert_eq!(text.chars().filter(|c| *c == 'a').count(), SHOWN);
        assert_eq!(shown(&[0x1b, b'"']), r#""\u{1b}\"""#);
    }
}
