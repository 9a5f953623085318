//! The client's command connections: a small pool, and the retry rule that
//! every command goes through.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use redis::{ConnectionLike, RedisResult};

use super::backend::{Backend, Conn};
use super::late::LateRequests;
use crate::config::Config;
use crate::error::{is_transient, reply_was_read, Error, Result};

/// A pool of command connections to one deployment.
///
/// Each command checks a connection out, so threads never queue behind one
/// shared connection; idle connections are kept for reuse up to
/// `max_idle_connections`.
pub(crate) struct Pool {
    backend: Backend,
    idle: Mutex<Vec<Conn>>,
    config: Config,
    /// How many times the sentinels moved the master: a connection checked
    /// out before a move is not taken back (it goes to the old master).
    master_switches: AtomicU64,
    /// Connections an undo was written on behind a late request, each
    /// kept open until its time is up (see [`follow`](Self::follow)).
    trailing: Mutex<Vec<(Conn, Instant)>>,
}

/// The most connections kept open behind late requests at once; the
/// oldest goes first.
const MAX_TRAILING: usize = 64;

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool")
            .field("target", &self.config.target())
            .field("backend", &self.backend)
            .field("idle", &self.idle.lock().len())
            .finish()
    }
}

impl Pool {
    /// Parses the URLs and opens a first connection, which proves that the
    /// deployment answers and accepts our credentials.
    pub(crate) fn open(config: &Config) -> Result<Self> {
        let backend = Backend::new(config)?;
        let pool = Pool {
            backend,
            idle: Mutex::new(Vec::new()),
            config: config.clone(),
            master_switches: AtomicU64::new(0),
            trailing: Mutex::new(Vec::new()),
        };
        let connect_error = |source| Error::Connect {
            url: config.target(),
            source,
        };
        let mut first = pool.connect(None).map_err(connect_error)?;
        redis::cmd("PING")
            .query::<()>(first.as_dyn())
            .map_err(connect_error)?;
        pool.idle.lock().push(first);
        Ok(pool)
    }

    /// The settings the pool was opened with.
    pub(crate) fn config(&self) -> &Config {
        &self.config
    }

    /// How to reach the deployment, for the pub/sub connections.
    pub(crate) fn backend(&self) -> &Backend {
        &self.backend
    }

    /// Runs `op` on a pooled connection. A transient failure (refused,
    /// dropped, timed out) drops the connection and is retried up to
    /// `retry_attempts` times after `retry_delay`; any other error is returned
    /// at once. `op` must be safe to repeat (see the release latch).
    pub(crate) fn run<T>(
        &self,
        op: impl FnMut(&mut dyn ConnectionLike) -> RedisResult<T>,
    ) -> Result<T> {
        self.run_until(None, op)
    }

    /// Runs a write like [`run`](Self::run) and, when the client syncs
    /// replicas and `wrote` says the write changed something, waits on the
    /// same connection (`WAIT`) until enough replicas have it. Returns the
    /// value and, when it waited, how many replicas acknowledged.
    pub(crate) fn run_write<T>(
        &self,
        deadline: Option<Instant>,
        late: Option<&mut LateRequests>,
        mut op: impl FnMut(&mut dyn ConnectionLike) -> RedisResult<T>,
        wrote: impl Fn(&T) -> bool,
    ) -> Result<(T, Option<usize>)> {
        let Some((replicas, timeout)) = self.config.sync_replicas else {
            return self
                .run_attempts(deadline, late, op)
                .map(|value| (value, None));
        };
        self.run_attempts(deadline, late, |conn| {
            let value = op(conn)?;
            if !wrote(&value) {
                return Ok((value, None));
            }
            let acknowledged: i64 = redis::cmd("WAIT")
                .arg(replicas)
                // At most a century: checked by `build()`.
                .arg(crate::config::saturating_millis(timeout))
                .query(conn)?;
            Ok((value, Some(usize::try_from(acknowledged).unwrap_or(0))))
        })
    }

    /// How many replicas a write must reach, when the client syncs them.
    pub(crate) fn replicas_wanted(&self) -> Option<usize> {
        self.config.sync_replicas.map(|(replicas, _)| replicas)
    }

    /// Like [`run`](Self::run), but gives up at `deadline` when one is given:
    /// no attempt starts after it, and each attempt's connect and response
    /// timeouts are cut to the time left. The watchdog needs this: a renewal
    /// still waiting for a stalled server when the lease runs out must not
    /// keep it from reporting the lock lost.
    pub(crate) fn run_until<T>(
        &self,
        deadline: Option<Instant>,
        op: impl FnMut(&mut dyn ConnectionLike) -> RedisResult<T>,
    ) -> Result<T> {
        self.run_attempts(deadline, None, op)
    }

    /// [`run_until`](Self::run_until) that, when given `late`, keeps there
    /// the connection of every attempt whose reply did not come in time,
    /// still open: a stalled server may run that request later, and an
    /// undo written on the same connection runs right after it (see
    /// `late.rs`). Only plain connections are kept.
    fn run_attempts<T>(
        &self,
        deadline: Option<Instant>,
        mut late: Option<&mut LateRequests>,
        mut op: impl FnMut(&mut dyn ConnectionLike) -> RedisResult<T>,
    ) -> Result<T> {
        let mut retries_left = self.config.retry_attempts;
        loop {
            match self.run_once(deadline, late.as_deref_mut(), &mut op) {
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

    /// One attempt of `op`, no retry, by `deadline`: its connection kept in
    /// `late` when the reply did not come in time (see `late.rs`).
    pub(crate) fn run_once_keeping<T>(
        &self,
        deadline: Instant,
        late: &mut LateRequests,
        mut op: impl FnMut(&mut dyn ConnectionLike) -> RedisResult<T>,
    ) -> RedisResult<T> {
        self.run_once(Some(deadline), Some(late), &mut op)
    }

    fn run_once<T>(
        &self,
        deadline: Option<Instant>,
        late: Option<&mut LateRequests>,
        op: &mut impl FnMut(&mut dyn ConnectionLike) -> RedisResult<T>,
    ) -> RedisResult<T> {
        let left = match deadline {
            None => None,
            Some(deadline) => match deadline.checked_duration_since(Instant::now()) {
                Some(left) if !left.is_zero() => Some(left),
                _ => return Err(deadline_passed()),
            },
        };
        let switches = self.master_switches.load(Ordering::SeqCst);
        let mut conn = self.checkout(left)?;
        let response_timeout = match left {
            Some(left) => {
                let cut = self.config.response_timeout.min(left);
                conn.set_timeouts(cut)?;
                cut
            }
            None => self.config.response_timeout,
        };
        let result = op(conn.as_dyn()).map_err(|e| {
            if e.is_timeout() {
                no_reply(conn.peer(), response_timeout)
            } else {
                e
            }
        });
        match (&result, late) {
            (Err(e), late) if is_transient(e) => {
                // The server probably restarted or the network broke: the
                // other idle connections are likely dead too.
                self.idle.lock().clear();
                match late {
                    // Kept for an undo behind the request.
                    Some(late) if e.is_timeout() && conn.may_follow() => late.keep(conn),
                    // Cut before its reply: it may have run, and only a
                    // later answer counts what it took.
                    Some(late) => late.cut(),
                    None => {}
                }
            }
            // A reply not read whole (garbled, say) leaves the stream out
            // of step: the connection is closed, never reused.
            (Err(e), late) if !reply_was_read(e) => {
                if let Some(late) = late {
                    late.cut();
                }
            }
            // A connection whose timeouts were cut gets the full ones back
            // before anyone else uses it.
            (_, late) => {
                if let Some(late) = late {
                    late.answered();
                }
                if left.is_none() || conn.set_timeouts(self.config.response_timeout).is_ok() {
                    self.checkin(conn, switches);
                }
            }
        }
        result
    }

    /// An idle connection, or a new one opened within the connect timeout
    /// (cut to `left` when given).
    fn checkout(&self, left: Option<Duration>) -> RedisResult<Conn> {
        if let Some(conn) = self.idle.lock().pop() {
            return Ok(conn);
        }
        self.connect(left)
    }

    /// Takes `conn` back unless the sentinels moved the master since it was
    /// checked out (`switches` then): one opened before leads to the old
    /// master. Compared under the idle list's lock, which
    /// [`master_switched`](Self::master_switched) holds while it counts the
    /// move, so a move cannot slip between the check and the push.
    fn checkin(&self, conn: Conn, switches: u64) {
        let mut idle = self.idle.lock();
        if self.master_switches.load(Ordering::SeqCst) != switches {
            return;
        }
        if idle.len() < self.config.max_idle_connections {
            idle.push(conn);
        }
    }

    fn connect(&self, left: Option<Duration>) -> RedisResult<Conn> {
        let connect_timeout = match left {
            Some(left) => self.config.connect_timeout.min(left),
            None => self.config.connect_timeout,
        };
        let deadline = left.and_then(|left| Instant::now().checked_add(left));
        self.backend
            .connect(connect_timeout, self.config.response_timeout, deadline)
    }

    /// Writes the undo `command` (packed) on `conn` right behind its late
    /// request and keeps the connection open until `keep_until`, so that
    /// neither half of it is lost to a reset while a stalled server has
    /// yet to read them. Connections kept earlier whose time is up close.
    pub(crate) fn follow(&self, mut conn: Conn, command: &[u8], keep_until: Instant) -> Result<()> {
        conn.follow(command, true).map_err(Error::Redis)?;
        let mut trailing = self.trailing.lock();
        let now = Instant::now();
        trailing.retain(|(_, until)| *until > now);
        if trailing.len() >= MAX_TRAILING {
            trailing.remove(0);
        }
        trailing.push((conn, keep_until));
        Ok(())
    }

    /// Closes every idle connection.
    pub(crate) fn close_idle(&self) {
        self.idle.lock().clear();
    }

    /// The sentinels moved the master: every connection opened before goes
    /// (the idle ones now, the busy ones when their command is over), and
    /// the next ones are looked up again.
    #[cfg(feature = "sentinel")]
    pub(crate) fn master_switched(&self) {
        let mut idle = self.idle.lock();
        self.master_switches.fetch_add(1, Ordering::SeqCst);
        idle.clear();
    }
}

/// The error of a command whose reply did not come within the response
/// timeout: the redis crate's own says only "Resource temporarily
/// unavailable".
fn no_reply(peer: &str, timeout: Duration) -> redis::RedisError {
    io::Error::new(
        io::ErrorKind::TimedOut,
        format!(
            "no reply from {peer} within {} ms (response timeout)",
            timeout.as_millis()
        ),
    )
    .into()
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
