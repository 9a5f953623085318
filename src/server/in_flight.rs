//! A command sent on a pooled connection whose reply another thread reads.
//!
//! The subscriber thread uses it to start a parked waiter's acquire the
//! moment a release is announced, and wakes the waiter at the same time:
//! the waiter's wake-up then overlaps the acquire's round trip instead of
//! coming before it (see `pubsub/early.rs`).

use redis::{RedisResult, Value};

use super::backend::Conn;
use super::pool::Pool;

/// A request on its way: the connection it went out on, out of the pool
/// until its reply is read. Dropped unread, the connection is closed (its
/// reply would otherwise answer the next command sent on it).
pub(crate) struct InFlight {
    conn: redis::Connection,
}

impl std::fmt::Debug for InFlight {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("InFlight")
    }
}

impl InFlight {
    /// Sends `packed` (one command, as the redis crate packs it) on an idle
    /// connection of `pool`, for another thread to read the reply
    /// ([`finish`](Self::finish)). Never opens a connection (the caller is
    /// the subscriber thread, which must not wait on a connect) and never
    /// retries: `None` when no single-server connection is idle or the
    /// send failed.
    pub(super) fn send_on_idle(pool: &Pool, packed: &[u8]) -> Option<InFlight> {
        let mut conn = match pool.take_idle()? {
            Conn::Single(conn) => conn,
            #[allow(unreachable_patterns)]
            other => {
                pool.checkin(other);
                return None;
            }
        };
        match conn.send_packed_command(packed) {
            Ok(()) => Some(InFlight { conn }),
            Err(e) => {
                log::debug!("redhold: sending a request ahead failed ({e})");
                None
            }
        }
    }

    /// Reads the reply (within the response timeout). The connection goes
    /// back to `pool` unless reading failed; a server error reply is an
    /// `Err` that leaves the connection usable.
    pub(crate) fn finish(mut self, pool: &Pool) -> RedisResult<Value> {
        let reply = self.conn.recv_response()?;
        pool.checkin(Conn::Single(self.conn));
        reply.extract_error()
    }
}
