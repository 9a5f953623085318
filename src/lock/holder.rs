//! Who holds a lock, asked by holder id: this thread's id, and whether any
//! given holder holds the lock now.

use super::Lock;
use crate::error::Result;
use crate::holding::Holding;
use crate::kind::LockKind;

impl<K: LockKind, H: Holding> Lock<K, H> {
    /// This handle's holder's id: the field the calling thread (or the
    /// owner) holds this lock under in the lock's hash,
    /// `<client-uuid>:<thread-id>` or `<client-uuid>:<owner-id>` (a write
    /// lock's ends in `:write`), as Redisson's `getLockName(threadId)`
    /// makes it. Operators see it in `redhold show`; pass it to
    /// [`is_held_by`](Self::is_held_by) from any thread or process. No I/O.
    pub fn holder_id(&self) -> String {
        self.client
            .engine()
            .field(self.holder.holder(), &self.keys.kind)
            .to_string()
    }

    /// Whether the holder with id `holder` (a [`holder_id`](Self::holder_id)
    /// of any thread of any client, Redisson's included) holds the lock now.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for an empty
    /// `holder`; otherwise as [`is_locked`](Self::is_locked).
    pub fn is_held_by(&self, holder: &str) -> Result<bool> {
        self.validate()?;
        if holder.is_empty() {
            return Err(crate::Error::InvalidArgument {
                what: "holder id",
                reason: "it is empty; a holder id looks like `<client-uuid>:<thread-id>`".into(),
            });
        }
        // This handle's holder's own id: a release of a dropped guard still
        // pending must not count (see `hold_count`).
        let engine = self.client.engine();
        // Before anything is touched: a forked child fails here.
        engine.server().check_process()?;
        let field = engine.field(self.holder.holder(), &self.keys.kind);
        if *field == *holder {
            engine.settle_pending(&self.keys.name, &field)?;
        }
        engine.server().run(|conn| {
            redis::cmd("HEXISTS")
                .arg(&*self.keys.name)
                .arg(holder)
                .query(conn)
        })
    }
}
