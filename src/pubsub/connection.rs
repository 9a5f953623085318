//! The pub/sub socket, split in two: the subscriber thread reads from it
//! while any thread may write SUBSCRIBE / UNSUBSCRIBE on it at once.
//!
//! Writing from the waiting thread itself means a new subscription goes out
//! immediately, without first waking the reader blocked on the socket.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream, ToSocketAddrs};
use std::time::Duration;

use parking_lot::Mutex;
use redis::{ConnectionAddr, ConnectionInfo};

use super::resp::{self, Frame};

/// A connected socket, TCP or unix.
#[derive(Debug)]
pub(crate) enum Stream {
    Tcp(TcpStream),
    #[cfg(unix)]
    Unix(std::os::unix::net::UnixStream),
}

impl Stream {
    fn connect(addr: &ConnectionAddr, timeout: Duration) -> io::Result<Stream> {
        match addr {
            ConnectionAddr::Tcp(host, port) => {
                let mut last =
                    io::Error::new(io::ErrorKind::NotFound, format!("{host} has no address"));
                for sock_addr in (host.as_str(), *port).to_socket_addrs()? {
                    match TcpStream::connect_timeout(&sock_addr, timeout) {
                        Ok(s) => {
                            s.set_nodelay(true)?;
                            return Ok(Stream::Tcp(s));
                        }
                        Err(e) => last = e,
                    }
                }
                Err(last)
            }
            #[cfg(unix)]
            ConnectionAddr::Unix(path) => {
                Ok(Stream::Unix(std::os::unix::net::UnixStream::connect(path)?))
            }
            other => Err(io::Error::new(
                io::ErrorKind::Unsupported,
                format!("pub/sub over {other:?} is not supported by this build"),
            )),
        }
    }

    fn try_clone(&self) -> io::Result<Stream> {
        Ok(match self {
            Stream::Tcp(s) => Stream::Tcp(s.try_clone()?),
            #[cfg(unix)]
            Stream::Unix(s) => Stream::Unix(s.try_clone()?),
        })
    }

    fn set_read_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.set_read_timeout(t),
            #[cfg(unix)]
            Stream::Unix(s) => s.set_read_timeout(t),
        }
    }

    fn set_write_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.set_write_timeout(t),
            #[cfg(unix)]
            Stream::Unix(s) => s.set_write_timeout(t),
        }
    }

    fn shutdown(&self) {
        let _ = match self {
            Stream::Tcp(s) => s.shutdown(Shutdown::Both),
            #[cfg(unix)]
            Stream::Unix(s) => s.shutdown(Shutdown::Both),
        };
    }

    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.read(buf),
            #[cfg(unix)]
            Stream::Unix(s) => s.read(buf),
        }
    }

    fn write_all(&mut self, bytes: &[u8]) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.write_all(bytes),
            #[cfg(unix)]
            Stream::Unix(s) => s.write_all(bytes),
        }
    }
}

/// The reading half, owned by the subscriber thread.
#[derive(Debug)]
pub(crate) struct Reader {
    stream: Stream,
    buf: Vec<u8>,
}

/// The writing half, shared by every thread that subscribes. Empty while the
/// connection is down.
#[derive(Debug, Default)]
pub(crate) struct Writer {
    stream: Mutex<Option<Stream>>,
}

/// Opens a pub/sub connection, authenticates it and checks with a PING that
/// the server serves it. The reader wakes up every `tick` with `Ok(None)` so
/// that its owner can do housekeeping.
///
/// The PING matters after a disconnection: a server that accepts the socket
/// and then refuses the client (`maxclients` reached) or does not answer at
/// all (stalled) must count as a failed attempt, to be retried with
/// backoff, not as a connection that then fails at once, again and again.
pub(crate) fn connect(
    info: &ConnectionInfo,
    connect_timeout: Duration,
    response_timeout: Duration,
    tick: Duration,
) -> io::Result<(Reader, Stream)> {
    let stream = Stream::connect(info.addr(), connect_timeout)?;
    stream.set_write_timeout(Some(response_timeout))?;
    stream.set_read_timeout(Some(response_timeout))?;
    let mut writer = stream.try_clone()?;
    let mut reader = Reader {
        stream,
        buf: Vec::with_capacity(4096),
    };
    let settings = info.redis_settings();
    if let Some(password) = settings.password() {
        let mut args: Vec<&[u8]> = vec![b"AUTH"];
        if let Some(user) = settings.username() {
            args.push(user.as_bytes());
        }
        args.push(password.as_bytes());
        handshake(
            &mut reader,
            &mut writer,
            &args,
            io::ErrorKind::PermissionDenied,
        )?;
    }
    handshake(
        &mut reader,
        &mut writer,
        &[b"PING"],
        io::ErrorKind::ConnectionRefused,
    )?;
    reader.stream.set_read_timeout(Some(tick))?;
    Ok((reader, writer))
}

/// Sends one command during connection setup and expects a simple-string
/// reply (`+OK`, `+PONG`) within the read timeout. An error reply becomes an
/// I/O error of kind `refused`.
fn handshake(
    reader: &mut Reader,
    writer: &mut Stream,
    args: &[&[u8]],
    refused: io::ErrorKind,
) -> io::Result<()> {
    writer.write_all(&resp::command(args))?;
    let name = String::from_utf8_lossy(args[0]);
    match reader.next()? {
        Some(Frame::Simple(_)) => Ok(()),
        Some(Frame::Error(e)) => Err(io::Error::new(
            refused,
            String::from_utf8_lossy(&e).into_owned(),
        )),
        None => Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!("the server did not answer {name} in time"),
        )),
        Some(other) => Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("unexpected reply to {name}: {other:?}"),
        )),
    }
}

impl Reader {
    /// The next complete reply; `Ok(None)` when the read timeout passed first.
    pub(crate) fn next(&mut self) -> io::Result<Option<Frame>> {
        loop {
            match resp::parse(&self.buf) {
                Ok(Some((frame, used))) => {
                    self.buf.drain(..used);
                    return Ok(Some(frame));
                }
                Ok(None) => {}
                Err(e) => return Err(io::Error::new(io::ErrorKind::InvalidData, e.0)),
            }
            let mut chunk = [0u8; 4096];
            match self.stream.read(&mut chunk) {
                Ok(0) => {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the server closed the pub/sub connection",
                    ))
                }
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    return Ok(None)
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }
}

impl Writer {
    /// Makes `stream` the socket that commands go to.
    pub(crate) fn attach(&self, stream: Stream) {
        *self.stream.lock() = Some(stream);
    }

    /// Closes the socket, which also ends the reader's blocking read.
    pub(crate) fn detach(&self) {
        if let Some(stream) = self.stream.lock().take() {
            stream.shutdown();
        }
    }

    /// Sends one command. Fails when the connection is down; the subscriber
    /// then sends it again after reconnecting.
    pub(crate) fn send(&self, args: &[&[u8]]) -> io::Result<()> {
        let mut guard = self.stream.lock();
        let Some(stream) = guard.as_mut() else {
            return Err(io::Error::new(
                io::ErrorKind::NotConnected,
                "pub/sub connection is down",
            ));
        };
        let result = stream.write_all(&resp::command(args));
        if result.is_err() {
            // A half-written command leaves the stream unusable.
            if let Some(stream) = guard.take() {
                stream.shutdown();
            }
        }
        result
    }
}
