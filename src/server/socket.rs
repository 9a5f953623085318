//! The pub/sub socket, split in two: the subscriber thread reads from it
//! while any thread may write SUBSCRIBE / UNSUBSCRIBE on it at once.
//!
//! Writing from the waiting thread itself means a new subscription goes out
//! immediately, without first waking the reader blocked on the socket. TLS
//! keeps that property: see the `tls` module.

use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use redis::ConnectionInfo;

use super::resp::{self, Frame};
use super::stream::time_left;
pub(crate) use super::stream::{Stream, TlsConnector};
use super::wire::Wire;

/// The reading half, owned by the subscriber thread.
#[derive(Debug)]
pub(crate) struct Reader {
    wire: Wire,
    /// How long one [`next`](Reader::next) may wait, whatever arrives.
    tick: Duration,
    /// The longest argument sent on this connection: see [`frame_cap`].
    longest_sent: Arc<AtomicUsize>,
}

/// The writing half, shared by every thread that subscribes. Empty while the
/// connection is down.
#[derive(Debug, Default)]
pub(crate) struct Writer {
    stream: Mutex<Option<Stream>>,
    /// The longest argument (a channel name) ever sent, shared with each
    /// reader attached, which sizes its frame cap by it.
    longest_sent: Arc<AtomicUsize>,
}

/// What a pub/sub frame may carry besides one of our channel names: its
/// kind (`smessage`, `sunsubscribe`), the payload or count, the headers.
/// Generous, so that a server's longer error text still fits.
pub(crate) const FRAME_SLACK: usize = 4096;

/// The longest frame a pub/sub connection accepts: every frame the server
/// may rightly send carries at most one of the names we sent (a message,
/// a confirmation) plus [`FRAME_SLACK`]. A longer one, or a length that
/// announces one, drops the connection (it reconnects) before the bytes
/// are kept.
fn frame_cap(longest_sent: usize) -> usize {
    longest_sent.saturating_add(FRAME_SLACK)
}

/// Opens a pub/sub connection (with `tls` for `rediss://` addresses),
/// authenticates it, and names it (`CLIENT SETNAME`, `identity.rs`; else a
/// PING) to check that the server serves it. The reader wakes up every
/// `tick` with `Ok(None)` so that its owner can do housekeeping.
///
/// The check matters after a disconnection: a server that accepts the socket
/// and then refuses the client (`maxclients` reached) or does not answer at
/// all (stalled) must count as a failed attempt, to be retried with
/// backoff, not as a connection that then fails at once, again and again.
pub(crate) fn connect(
    info: &ConnectionInfo,
    tls: &TlsConnector,
    connect_timeout: Duration,
    response_timeout: Duration,
    tick: Duration,
    name: Option<&str>,
) -> io::Result<(Reader, Stream)> {
    let stream = Stream::connect(info.addr(), tls, connect_timeout)?;
    stream.set_write_timeout(Some(response_timeout))?;
    stream.set_read_timeout(Some(response_timeout))?;
    let mut writer = stream.try_clone()?;
    let mut reader = Reader {
        wire: Wire::new(stream, frame_cap(0)),
        tick,
        longest_sent: Arc::default(),
    };
    // AUTH and PING share one response timeout, as a command connection's
    // set-up shares one connect timeout.
    let deadline = Instant::now().checked_add(response_timeout);
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
            deadline,
        )
        .map_err(|e| explain(e, info, response_timeout))?;
    }
    let check: Vec<&[u8]> =
        name.map_or(vec![b"PING"], |n| vec![b"CLIENT", b"SETNAME", n.as_bytes()]);
    match handshake(
        &mut reader,
        &mut writer,
        &check,
        io::ErrorKind::ConnectionRefused,
        deadline,
    ) {
        // An ACL that denies CLIENT SETNAME: the server answers all the same.
        Err(e) if name.is_some() && e.to_string().starts_with("NOPERM") => {}
        other => other.map_err(|e| explain(e, info, response_timeout))?,
    }
    Ok((reader, writer))
}

/// Names the server in a set-up error, and says which timeout ran out: the
/// handshake's own texts know neither.
fn explain(e: io::Error, info: &ConnectionInfo, response_timeout: Duration) -> io::Error {
    let addr = info.addr();
    match e.kind() {
        io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock => io::Error::new(
            io::ErrorKind::TimedOut,
            format!(
                "no reply from {addr} within {} ms (response timeout): {e}",
                response_timeout.as_millis()
            ),
        ),
        io::ErrorKind::InvalidData => io::Error::new(
            io::ErrorKind::InvalidData,
            format!("the server at {addr} {} ({e})", crate::error::NOT_RESP),
        ),
        _ => e,
    }
}

/// Sends one command during connection setup and expects a simple-string
/// reply (`+OK`, `+PONG`) before `deadline` (if any). An error reply becomes an I/O
/// error of kind `refused`.
fn handshake(
    reader: &mut Reader,
    writer: &mut Stream,
    args: &[&[u8]],
    refused: io::ErrorKind,
    deadline: Option<Instant>,
) -> io::Result<()> {
    time_left(deadline)?;
    writer.write_all(&resp::command(args))?;
    let name = String::from_utf8_lossy(args[0]);
    // One deadline for the whole reply, however slowly it comes.
    match reader.wire.read_until(deadline, resp::Decoder::frame)? {
        Some(Frame::Simple(_)) => Ok(()),
        Some(Frame::Error(e)) => Err(io::Error::new(
            refused,
            String::from_utf8_lossy(&e).into_owned(),
        )),
        None => Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!("the server did not answer {name} in time"),
        )),
        // RESP, just not the reply expected: not `InvalidData`, which
        // stands for a peer that does not speak RESP at all.
        Some(other) => Err(io::Error::other(format!(
            "unexpected reply to {name}: {other:?}"
        ))),
    }
}

impl Reader {
    /// The next complete reply; `Ok(None)` when one tick passed first, even
    /// while bytes keep coming (so that the owner's liveness checks run
    /// under a steady stream). A frame longer than the cap is an
    /// `InvalidData` error: the connection must be dropped.
    pub(crate) fn next(&mut self) -> io::Result<Option<Frame>> {
        let longest = self.longest_sent.load(Ordering::Relaxed);
        self.wire.set_cap(frame_cap(longest));
        let deadline = Instant::now().checked_add(self.tick);
        self.wire.read_until(deadline, resp::Decoder::frame)
    }
}

impl Writer {
    /// Makes `stream` the socket that commands go to, and has `reader`
    /// (its other half) accept frames as long as the names sent on it.
    pub(crate) fn attach(&self, stream: Stream, reader: &mut Reader) {
        reader.longest_sent = Arc::clone(&self.longest_sent);
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
        let longest = args.iter().map(|a| a.len()).max().unwrap_or(0);
        // Before the command goes out: its reply may come at once.
        self.longest_sent.fetch_max(longest, Ordering::Relaxed);
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
