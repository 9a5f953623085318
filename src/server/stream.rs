//! A connected socket to one server (TCP, TLS over TCP, or unix), as the
//! pub/sub connection and our own command connections use it, and the
//! deadline arithmetic every read and write of theirs shares.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use redis::ConnectionAddr;

#[cfg(feature = "tls")]
pub(crate) use super::tls::TlsConnector;

/// What is left before `deadline`: `None` (no limit) without one, a
/// `TimedOut` error once it has passed.
pub(crate) fn time_left(deadline: Option<Instant>) -> io::Result<Option<Duration>> {
    let Some(deadline) = deadline else {
        return Ok(None);
    };
    match deadline.checked_duration_since(Instant::now()) {
        Some(left) if !left.is_zero() => Ok(Some(left)),
        _ => Err(io::Error::from(io::ErrorKind::TimedOut)),
    }
}

/// Stands in for the TLS setup in a build without the `tls` feature, where
/// `rediss://` addresses are refused.
#[cfg(not(feature = "tls"))]
#[derive(Debug)]
pub(crate) struct TlsConnector;

#[cfg(not(feature = "tls"))]
impl TlsConnector {
    /// Nothing to set up; the root certificate cannot be given without the
    /// `tls` feature.
    pub(crate) fn new(root_pem: Option<Vec<u8>>) -> TlsConnector {
        let _ = root_pem;
        TlsConnector
    }
}

/// A connected socket: TCP, TLS over TCP, or unix.
#[derive(Debug)]
pub(crate) enum Stream {
    /// `redis://`.
    Tcp(TcpStream),
    /// `rediss://`: one half of a TLS session over TCP.
    #[cfg(feature = "tls")]
    Tls(super::tls::TlsStream),
    /// `redis+unix://`.
    #[cfg(unix)]
    Unix(std::os::unix::net::UnixStream),
}

/// Opens a TCP connection to the first address of `host` that answers
/// within `timeout`.
fn connect_tcp(host: &str, port: u16, timeout: Duration) -> io::Result<TcpStream> {
    let mut last = io::Error::new(io::ErrorKind::NotFound, format!("{host} has no address"));
    for sock_addr in (host, port).to_socket_addrs()? {
        match TcpStream::connect_timeout(&sock_addr, timeout) {
            Ok(s) => {
                s.set_nodelay(true)?;
                return Ok(s);
            }
            Err(e) => last = e,
        }
    }
    Err(last)
}

impl Stream {
    /// Connects to `addr`; the TCP connect and the TLS handshake together
    /// get `timeout`, and a timeout says so, with the address.
    pub(crate) fn connect(
        addr: &ConnectionAddr,
        tls: &TlsConnector,
        timeout: Duration,
    ) -> io::Result<Stream> {
        let started = Instant::now();
        Stream::connect_within(addr, tls, timeout, started).map_err(|e| {
            if matches!(
                e.kind(),
                io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock
            ) {
                io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "connecting to {addr} timed out after {} ms",
                        timeout.as_millis()
                    ),
                )
            } else {
                e
            }
        })
    }

    fn connect_within(
        addr: &ConnectionAddr,
        tls: &TlsConnector,
        timeout: Duration,
        started: Instant,
    ) -> io::Result<Stream> {
        match addr {
            ConnectionAddr::Tcp(host, port) => Ok(Stream::Tcp(connect_tcp(host, *port, timeout)?)),
            #[cfg(feature = "tls")]
            ConnectionAddr::TcpTls {
                host,
                port,
                insecure,
                ..
            } => {
                let tcp = connect_tcp(host, *port, timeout)?;
                let left = timeout
                    .checked_sub(started.elapsed())
                    .filter(|left| !left.is_zero())
                    .ok_or_else(|| io::Error::from(io::ErrorKind::TimedOut))?;
                Ok(Stream::Tls(tls.handshake(tcp, host, *insecure, left)?))
            }
            #[cfg(not(feature = "tls"))]
            ConnectionAddr::TcpTls { host, port, .. } => {
                let _ = tls;
                Err(io::Error::new(
                    io::ErrorKind::Unsupported,
                    format!(
                        "pub/sub over TLS (rediss://{host}:{port}) needs redhold's `tls` feature"
                    ),
                ))
            }
            #[cfg(unix)]
            ConnectionAddr::Unix(path) => {
                Ok(Stream::Unix(std::os::unix::net::UnixStream::connect(path)?))
            }
            other => {
                let _ = started;
                Err(io::Error::new(
                    io::ErrorKind::Unsupported,
                    format!("pub/sub over {other:?} is not supported by this build"),
                ))
            }
        }
    }

    /// The other half: a handle on the same socket (and TLS session).
    pub(crate) fn try_clone(&self) -> io::Result<Stream> {
        Ok(match self {
            Stream::Tcp(s) => Stream::Tcp(s.try_clone()?),
            #[cfg(feature = "tls")]
            Stream::Tls(s) => Stream::Tls(s.try_clone()?),
            #[cfg(unix)]
            Stream::Unix(s) => Stream::Unix(s.try_clone()?),
        })
    }

    /// Bounds each blocking read; shared by both halves.
    pub(crate) fn set_read_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.set_read_timeout(t),
            #[cfg(feature = "tls")]
            Stream::Tls(s) => s.tcp().set_read_timeout(t),
            #[cfg(unix)]
            Stream::Unix(s) => s.set_read_timeout(t),
        }
    }

    /// Bounds each blocking write; shared by both halves.
    pub(crate) fn set_write_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.set_write_timeout(t),
            #[cfg(feature = "tls")]
            Stream::Tls(s) => s.tcp().set_write_timeout(t),
            #[cfg(unix)]
            Stream::Unix(s) => s.set_write_timeout(t),
        }
    }

    /// Closes the sending half only: the server reads what was sent, then
    /// the end of the stream; its replies may still come.
    pub(crate) fn shutdown_write(&self) {
        let _ = match self {
            Stream::Tcp(s) => s.shutdown(Shutdown::Write),
            #[cfg(feature = "tls")]
            Stream::Tls(s) => s.tcp().shutdown(Shutdown::Write),
            #[cfg(unix)]
            Stream::Unix(s) => s.shutdown(Shutdown::Write),
        };
    }

    /// Closes the socket for both halves. A TLS connection gets no
    /// close_notify: sending it could block on a dead peer, and the server
    /// treats a plain close the same way.
    pub(crate) fn shutdown(&self) {
        let _ = match self {
            Stream::Tcp(s) => s.shutdown(Shutdown::Both),
            #[cfg(feature = "tls")]
            Stream::Tls(s) => s.tcp().shutdown(Shutdown::Both),
            #[cfg(unix)]
            Stream::Unix(s) => s.shutdown(Shutdown::Both),
        };
    }

    /// Blocks until data arrives and appends it to `buf`; returns how many
    /// bytes it appended, 0 when the server closed the connection.
    pub(crate) fn read_into(&mut self, buf: &mut Vec<u8>) -> io::Result<usize> {
        let mut chunk = [0u8; 4096];
        let read = match self {
            Stream::Tcp(s) => s.read(&mut chunk)?,
            #[cfg(feature = "tls")]
            Stream::Tls(s) => return s.read_into(buf),
            #[cfg(unix)]
            Stream::Unix(s) => s.read(&mut chunk)?,
        };
        buf.extend_from_slice(&chunk[..read]);
        Ok(read)
    }

    /// Sends `bytes` whole (encrypted, over TLS).
    pub(crate) fn write_all(&mut self, bytes: &[u8]) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.write_all(bytes),
            #[cfg(feature = "tls")]
            Stream::Tls(s) => s.write_all(bytes),
            #[cfg(unix)]
            Stream::Unix(s) => s.write_all(bytes),
        }
    }
}
