//! What Redis says of a lock now: whether anyone holds it, how many times
//! this handle's holder does, how long it lives.

use std::time::Duration;

use super::Lock;
use crate::engine;
use crate::error::Result;
use crate::holding::Holding;
use crate::kind::LockKind;

impl<K: LockKind> Lock<K> {
    /// Whether the calling thread holds the lock.
    ///
    /// # Errors
    ///
    /// As [`is_locked`](Self::is_locked).
    pub fn is_held_by_current_thread(&self) -> Result<bool> {
        Ok(self.hold_count()? > 0)
    }
}

impl<K: LockKind, H: Holding> Lock<K, H> {
    /// Whether any thread of any client holds the lock (for a read or write
    /// lock: holds it in that mode).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidName`](crate::Error::InvalidName), [`Error::Shutdown`](crate::Error::Shutdown), [`Error::Redis`](crate::Error::Redis).
    pub fn is_locked(&self) -> Result<bool> {
        self.validate()?;
        let server = self.client.engine().server();
        server.check_open()?;
        self.keys
            .kind
            .is_locked(engine::target(server, self.lock_ref()))
    }

    /// How many times this handle's holder (the calling thread, or the
    /// owner) holds the lock (0 when it does not). A release of a dropped
    /// guard still unconfirmed (a stalled server) is settled first, within
    /// one response timeout, so the count never includes a hold already
    /// given up.
    ///
    /// # Errors
    ///
    /// As [`is_locked`](Self::is_locked); also [`Error::Redis`](crate::Error::Redis)
    /// when such a pending release still gets no answer.
    pub fn hold_count(&self) -> Result<u32> {
        self.validate()?;
        let field = self
            .client
            .engine()
            .field(self.holder.holder(), &self.keys.kind);
        // Fails in a forked child before it touches anything.
        self.client
            .engine()
            .settle_pending(&self.keys.name, &field)?;
        let count: Option<u32> = self.client.engine().server().run(|conn| {
            redis::cmd("HGET")
                .arg(&*self.keys.name)
                .arg(&*field)
                .query(conn)
        })?;
        Ok(count.unwrap_or(0))
    }

    /// How long the lock will live in Redis unless renewed or released;
    /// `None` when it is not locked. A key without expiry (which redhold
    /// never makes) reports `Duration::MAX`.
    ///
    /// # Errors
    ///
    /// As [`is_locked`](Self::is_locked).
    pub fn remaining_lease(&self) -> Result<Option<Duration>> {
        self.validate()?;
        let ttl: i64 = self
            .client
            .engine()
            .server()
            .run(|conn| redis::cmd("PTTL").arg(&*self.keys.name).query(conn))?;
        Ok(match ttl {
            -2 => None,
            -1 => Some(Duration::MAX),
            ms => Some(Duration::from_millis(ms.max(0) as u64)),
        })
    }

    // ---- for the engine, the guard and the other handles ----
}
