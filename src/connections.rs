//! The client's command connections: a small pool, and the retry rule that
//! every command goes through.

use std::io;
use std::thread;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use redis::{Connection, ConnectionInfo, RedisResult};

use crate::config::{redact_url, Config};
use crate::error::{is_transient, Error, Result};

/// A pool of command connections to one server.
///
/// Each command checks a connection out, so threads never queue behind one
/// shared connection; idle connections are kept for reuse up to
/// `max_idle_connections`.
pub(crate) struct Connections {
    client: redis::Client,
    idle: Mutex<Vec<Connection>>,
    config: Config,
}

impl std::fmt::Debug for Connections {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connections")
            .field("url", &redact_url(&self.config.url))
            .field("idle", &self.idle.lock().len())
            .finish()
    }
}

impl Connections {
    /// Parses the URL and opens a first connection, which proves that the
    /// server answers and accepts our credentials.
    pub(crate) fn open(config: &Config) -> Result<Self> {
        let url = redact_url(&config.url);
        let client = redis::Client::open(config.url.as_str()).map_err(|e| Error::InvalidUrl {
            url: url.clone(),
            reason: format!(
                "{e}; expected redis://[user:password@]host[:port][/db] or redis+unix:///path"
            ),
        })?;
        if !client.get_connection_info().addr().is_supported() {
            return Err(Error::InvalidUrl {
                url,
                reason: "this address type (TLS or unix socket) is not supported by this build"
                    .into(),
            });
        }
        let pool = Connections {
            client,
            idle: Mutex::new(Vec::new()),
            config: config.clone(),
        };
        let mut first = pool.connect(None).map_err(|source| Error::Connect {
            url: url.clone(),
            source,
        })?;
        redis::cmd("PING")
            .query::<()>(&mut first)
            .map_err(|source| Error::Connect { url, source })?;
        pool.idle.lock().push(first);
        Ok(pool)
    }

    /// Where and how to connect, for the subscriber's own connection.
    pub(crate) fn connection_info(&self) -> &ConnectionInfo {
        self.client.get_connection_info()
    }

    /// Runs `op` on a pooled connection. A transient failure (refused,
    /// dropped, timed out) drops the connection and is retried up to
    /// `retry_attempts` times after `retry_delay`; any other error is returned
    /// at once. `op` must be safe to repeat (see the release latch).
    pub(crate) fn run<T>(&self, op: impl FnMut(&mut Connection) -> RedisResult<T>) -> Result<T> {
        self.run_until(None, op)
    }

    /// Like [`run`](Self::run), but gives up at `deadline` when one is given:
    /// no attempt starts after it, and each attempt's connect and response
    /// timeouts are cut to the time left. The watchdog needs this: a renewal
    /// still waiting for a stalled server when the lease runs out must not
    /// keep it from reporting the lock lost.
    pub(crate) fn run_until<T>(
        &self,
        deadline: Option<Instant>,
        mut op: impl FnMut(&mut Connection) -> RedisResult<T>,
    ) -> Result<T> {
        let mut retries_left = self.config.retry_attempts;
        loop {
            match self.run_once(deadline, &mut op) {
                Ok(value) => return Ok(value),
                Err(e) if is_transient(&e) && retries_left > 0 && self.may_retry(deadline) => {
                    retries_left -= 1;
                    log::debug!("redis command failed ({e}); retrying");
                    thread::sleep(self.config.retry_delay);
                }
                Err(e) => return Err(Error::Redis(e)),
            }
        }
    }

    /// Whether a retry after the retry delay still starts before `deadline`.
    fn may_retry(&self, deadline: Option<Instant>) -> bool {
        deadline.is_none_or(|d| {
            Instant::now()
                .checked_add(self.config.retry_delay)
                .is_some_and(|retry_at| retry_at < d)
        })
    }

    fn run_once<T>(
        &self,
        deadline: Option<Instant>,
        op: &mut impl FnMut(&mut Connection) -> RedisResult<T>,
    ) -> RedisResult<T> {
        let left = match deadline {
            None => None,
            Some(deadline) => match deadline.checked_duration_since(Instant::now()) {
                Some(left) if !left.is_zero() => Some(left),
                _ => return Err(deadline_passed()),
            },
        };
        let mut conn = self.checkout(left)?;
        if let Some(left) = left {
            set_timeouts(&conn, self.config.response_timeout.min(left))?;
        }
        let result = op(&mut conn);
        match &result {
            Err(e) if is_transient(e) => {
                // The server probably restarted or the network broke: the
                // other idle connections are likely dead too.
                self.idle.lock().clear();
            }
            // A connection whose timeouts were cut gets the full ones back
            // before anyone else uses it.
            _ if left.is_none() || set_timeouts(&conn, self.config.response_timeout).is_ok() => {
                self.checkin(conn)
            }
            _ => {}
        }
        result
    }

    /// An idle connection, or a new one opened within the connect timeout
    /// (cut to `left` when given).
    fn checkout(&self, left: Option<Duration>) -> RedisResult<Connection> {
        if let Some(conn) = self.idle.lock().pop() {
            return Ok(conn);
        }
        self.connect(left)
    }

    fn checkin(&self, conn: Connection) {
        let mut idle = self.idle.lock();
        if idle.len() < self.config.max_idle_connections {
            idle.push(conn);
        }
    }

    fn connect(&self, left: Option<Duration>) -> RedisResult<Connection> {
        let connect_timeout = match left {
            Some(left) => self.config.connect_timeout.min(left),
            None => self.config.connect_timeout,
        };
        let conn = self.client.get_connection_with_timeout(connect_timeout)?;
        set_timeouts(&conn, self.config.response_timeout)?;
        Ok(conn)
    }

    /// Closes every idle connection.
    pub(crate) fn close_idle(&self) {
        self.idle.lock().clear();
    }
}

/// Sets how long one read or write on `conn` may block.
fn set_timeouts(conn: &Connection, timeout: Duration) -> RedisResult<()> {
    conn.set_read_timeout(Some(timeout))?;
    conn.set_write_timeout(Some(timeout))
}

/// The error of an attempt that would start after its deadline: a timeout,
/// like any attempt cut short by one.
fn deadline_passed() -> redis::RedisError {
    io::Error::new(
        io::ErrorKind::TimedOut,
        "no time left before the deadline for this command",
    )
    .into()
}
