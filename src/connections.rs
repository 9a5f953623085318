//! The client's command connections: a small pool, and the retry rule that
//! every command goes through.

use std::thread;

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
            reason: e.to_string(),
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
        let mut first = pool.connect().map_err(|source| Error::Connect {
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
    pub(crate) fn run<T>(
        &self,
        mut op: impl FnMut(&mut Connection) -> RedisResult<T>,
    ) -> Result<T> {
        let mut retries_left = self.config.retry_attempts;
        loop {
            match self.run_once(&mut op) {
                Ok(value) => return Ok(value),
                Err(e) if is_transient(&e) && retries_left > 0 => {
                    retries_left -= 1;
                    log::debug!("redis command failed ({e}); retrying");
                    thread::sleep(self.config.retry_delay);
                }
                Err(e) => return Err(Error::Redis(e)),
            }
        }
    }

    fn run_once<T>(
        &self,
        op: &mut impl FnMut(&mut Connection) -> RedisResult<T>,
    ) -> RedisResult<T> {
        let mut conn = self.checkout()?;
        let result = op(&mut conn);
        match &result {
            Err(e) if is_transient(e) => {
                // The server probably restarted or the network broke: the
                // other idle connections are likely dead too.
                self.idle.lock().clear();
            }
            _ => self.checkin(conn),
        }
        result
    }

    fn checkout(&self) -> RedisResult<Connection> {
        if let Some(conn) = self.idle.lock().pop() {
            return Ok(conn);
        }
        self.connect()
    }

    fn checkin(&self, conn: Connection) {
        let mut idle = self.idle.lock();
        if idle.len() < self.config.max_idle_connections {
            idle.push(conn);
        }
    }

    fn connect(&self) -> RedisResult<Connection> {
        let conn = self
            .client
            .get_connection_with_timeout(self.config.connect_timeout)?;
        conn.set_read_timeout(Some(self.config.response_timeout))?;
        conn.set_write_timeout(Some(self.config.response_timeout))?;
        Ok(conn)
    }

    /// Closes every idle connection.
    pub(crate) fn close_idle(&self) {
        self.idle.lock().clear();
    }
}
