//! A command connection of our own, in place of the redis crate's sync
//! `Connection`, whose read timeout applies to each `read`: a server that
//! trickles its reply one byte at a time kept a call blocked without end.
//! Here every command gets one deadline for its whole reply (the response
//! timeout, cut to the caller's own limit by the pool), and a connection
//! whose reply could not be read whole and in step (a timeout, bytes that
//! are not RESP, a reply over the cap, a closed socket) is closed for good:
//! [`is_open`](redis::ConnectionLike::is_open) says so, and every later
//! command on it fails at once.
//!
//! The bytes go through the bounded, incremental reader of [`resp`] (as on
//! the pub/sub connection) and, once a reply is known to be whole and
//! valid, through the redis crate's own parser into a `redis::Value`, so
//! server errors (`MOVED`, `NOSCRIPT`, `WRONGPASS`…) are classified as the
//! crate classifies them.

use std::cell::Cell;
use std::io;
use std::time::{Duration, Instant};

use redis::{ConnectionLike, ErrorKind, RedisError, RedisResult, Value};

use super::stream::Stream;
use super::wire::Wire;

/// The longest command reply accepted: Redis's own limit on one value
/// (`proto-max-bulk-len`, 512 MB) plus room for the headers, so that no
/// reply a real server sends is refused (a `SCAN` page of long lock names
/// for `redhold list`, a long name in a hash). Bytes are kept only as they
/// arrive, within the response timeout; a length announcing more is
/// refused on its header.
pub(crate) const REPLY_CAP: usize = 512 * 1024 * 1024 + 64 * 1024;

/// One command connection to one server, speaking RESP2.
#[derive(Debug)]
pub(crate) struct Connection {
    wire: Wire,
    db: i64,
    /// The whole reply's time, for each command (`None`: no limit).
    response_timeout: Cell<Option<Duration>>,
    /// The time a command's bytes get to go out.
    write_timeout: Cell<Option<Duration>>,
    /// The write timeout the socket has now (a system call to change).
    socket_write_timeout: Option<Duration>,
    /// False once a reply could not be read whole and in step.
    open: bool,
    /// Set when a reply did not come in time: the request may still run
    /// late, and the socket stays open for an undo to follow it.
    late: bool,
}

impl Connection {
    /// A connection over `stream`, already set up for database `db`.
    pub(crate) fn new(stream: Stream, db: i64) -> Connection {
        Connection {
            wire: Wire::new(stream, REPLY_CAP),
            db,
            response_timeout: Cell::new(None),
            write_timeout: Cell::new(None),
            socket_write_timeout: None,
            open: true,
            late: false,
        }
    }

    /// How long each reply may take, all its bytes together.
    pub(crate) fn set_read_timeout(&self, timeout: Option<Duration>) -> RedisResult<()> {
        self.response_timeout.set(timeout);
        Ok(())
    }

    /// How long each command's bytes may take to go out.
    pub(crate) fn set_write_timeout(&self, timeout: Option<Duration>) -> RedisResult<()> {
        self.write_timeout.set(timeout);
        Ok(())
    }

    /// Sends `bytes`, one or more commands.
    pub(crate) fn send(&mut self, bytes: &[u8]) -> RedisResult<Instant> {
        if !self.open {
            return Err(io::Error::new(
                io::ErrorKind::NotConnected,
                "this connection was closed after a reply that could not be read",
            )
            .into());
        }
        let started = Instant::now();
        let mut sent = Ok(());
        if self.socket_write_timeout != self.write_timeout.get() {
            self.socket_write_timeout = self.write_timeout.get();
            sent = self
                .wire
                .stream
                .set_write_timeout(self.socket_write_timeout);
        }
        let sent = sent.and_then(|()| self.wire.stream.write_all(bytes));
        if let Err(e) = sent {
            // Part of a command may have gone out.
            self.open = false;
            return Err(e.into());
        }
        Ok(started)
    }

    /// Reads one reply, all of it before `deadline`.
    pub(crate) fn receive(&mut self, deadline: Option<Instant>) -> RedisResult<Value> {
        let read = self.wire.read_until(deadline, redis::parse_redis_value);
        let result = match read {
            Ok(Some(value)) => value,
            Ok(None) => Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the reply did not come in time",
            )
            .into()),
            Err(e) if e.kind() == io::ErrorKind::InvalidData => Err(RedisError::from((
                ErrorKind::Parse,
                "the reply is not valid RESP",
                e.to_string(),
            ))),
            Err(e) => Err(e.into()),
        };
        match &result {
            Ok(_) => {}
            // Still open for an undo (see `follow`); closed on drop.
            Err(e) if e.is_timeout() => {
                self.open = false;
                self.late = true;
            }
            Err(_) => {
                self.open = false;
                self.wire.stream.shutdown();
            }
        }
        result
    }

    /// Whether the last reply did not come in time (see `follow`).
    pub(crate) fn is_late(&self) -> bool {
        self.late
    }

    /// Writes `commands` behind the request whose reply did not come in
    /// time, and closes the sending half when told: the server runs them
    /// in order when it gets to them (a stalled server, when it wakes).
    /// Once only: the connection is then good for reading their replies.
    pub(crate) fn follow(&mut self, commands: &[u8], close_sending: bool) -> RedisResult<()> {
        if !self.late {
            return Err(io::Error::new(
                io::ErrorKind::NotConnected,
                "an undo follows only a request whose reply did not come",
            )
            .into());
        }
        self.late = false;
        let written = self.wire.stream.write_all(commands);
        if close_sending {
            self.wire.stream.shutdown_write();
        }
        written.map_err(Into::into)
    }

    /// The deadline of the replies to commands sent at `started`.
    pub(crate) fn deadline(&self, started: Instant) -> Option<Instant> {
        self.response_timeout
            .get()
            .and_then(|timeout| started.checked_add(timeout))
    }
}

impl ConnectionLike for Connection {
    fn req_packed_command(&mut self, cmd: &[u8]) -> RedisResult<Value> {
        let started = self.send(cmd)?;
        self.receive(self.deadline(started))
    }

    /// A pipeline: its replies share one deadline, as one request's would.
    fn req_packed_commands(
        &mut self,
        cmd: &[u8],
        offset: usize,
        count: usize,
    ) -> RedisResult<Vec<Value>> {
        let started = self.send(cmd)?;
        let deadline = self.deadline(started);
        let mut replies = Vec::with_capacity(count);
        let mut refused = None;
        // Every reply is read, so that the connection stays in step.
        for index in 0..offset + count {
            match self.receive(deadline)? {
                // An error inside a transaction (before EXEC) fails it.
                Value::ServerError(e) if index < offset => {
                    refused.get_or_insert(e);
                }
                reply if index >= offset => replies.push(reply),
                _ => {}
            }
        }
        match refused {
            Some(e) => Err(e.into()),
            None => Ok(replies),
        }
    }

    fn get_db(&self) -> i64 {
        self.db
    }

    fn check_connection(&mut self) -> bool {
        redis::cmd("PING").query::<String>(self).is_ok()
    }

    fn is_open(&self) -> bool {
        self.open
    }
}
