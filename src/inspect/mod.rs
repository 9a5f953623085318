//! Looking at locks from the outside: who holds a lock, who waits for it,
//! which locks exist, and removing one whatever its kind. For operators and
//! tools (the `redhold` command-line tool is built on it), not for taking
//! locks.
//!
//! ```no_run
//! # fn main() -> redhold::Result<()> {
//! let client = redhold::Client::open("redis://127.0.0.1:6379/")?;
//! let info = client.inspect("orders:42")?;
//! if info.locked {
//!     for holder in &info.holders {
//!         println!("held by {}:{} ({} holds)", holder.client, holder.thread, holder.count);
//!     }
//! }
//! for lock in client.list_locks("orders:*")? {
//!     println!("{} is a {} lock", lock.name, lock.kind);
//! }
//! # Ok(()) }
//! ```
//!
//! The kind of a lock is read from its layout in Redis (see
//! `docs/wire-format.md`), which cannot tell every kind apart:
//!
//! | layout | kind |
//! |---|---|
//! | a hash with a `mode` field | [`Kind::ReadWrite`] |
//! | a fair queue or deadline set next to it (`redisson_lock_queue:{name}`, `redisson_lock_timeout:{name}`) | [`Kind::Fair`] |
//! | a token counter next to it (`redisson_lock_token:{name}`) | [`Kind::Fenced`] |
//! | anything else | [`Kind::Lock`] (plain and spin locks; also a fair lock nobody waits for) |

mod clients;
mod counters;
mod info;
mod pattern;
mod scan;
mod snapshot;

pub use counters::{CounterInfo, PermitOut};
pub use info::{Holder, Kind, LockInfo, Mode, Waiter};

use crate::client::Client;
use crate::error::{Error, Result};
use crate::names;

impl Client {
    /// Reads everything Redis holds about the lock called `name`: its kind,
    /// holders, TTL, fair queue, listeners and fencing token, read in one
    /// script so that they belong together. A name that holds no lock
    /// reports `locked: false`.
    ///
    /// # Errors
    ///
    /// [`Error::WrongKind`] when the name holds a value that is not a lock
    /// (a string, a list, a hash whose fields are not holder ids);
    /// [`Error::InvalidName`], [`Error::Shutdown`], [`Error::Redis`].
    pub fn inspect(&self, name: &str) -> Result<LockInfo> {
        names::validate(name)?;
        let server = self.engine().server();
        let mut info = snapshot::read(server, name)?;
        info.subscribers = snapshot::subscribers(server, &info)?;
        if !info.is_vacant() {
            clients::attach(&mut info, &clients::identities(server));
        }
        Ok(info)
    }

    /// Every lock whose name matches `pattern` (Redis glob syntax: `*`,
    /// `?`, `[a-z]`, `\` escapes; `"*"` for all) that is held or has fair
    /// waiters, sorted by name. Found with `SCAN` (never `KEYS`), on every
    /// master of a cluster. One field of each hash found is read first
    /// (pipelined, a page at a time): only a hash whose field is a holder id
    /// or `mode` is then read like [`inspect`](Self::inspect) does, so a
    /// keyspace of other hashes costs one cheap command per key. Helper keys (read-hold keys, unlock
    /// latches, queues, token counters) and hashes that are not locks are
    /// left out, and so are fenced locks nobody holds (their token counter
    /// lives forever).
    ///
    /// A lock taken or released while the scan runs may be missed or
    /// reported free of holders; the cost is a pass over the whole keyspace.
    ///
    /// # Errors
    ///
    /// [`Error::Connect`] when a cluster master cannot be reached;
    /// [`Error::Shutdown`], [`Error::Redis`].
    pub fn list_locks(&self, pattern: &str) -> Result<Vec<LockInfo>> {
        let server = self.engine().server();
        let mut locks = Vec::new();
        for name in scan::lock_names(server, pattern)? {
            names::validate(&name)?;
            let found = snapshot::read(server, &name).and_then(|mut info| {
                info.subscribers = snapshot::subscribers(server, &info)?;
                Ok(info)
            });
            match found {
                Ok(info) if !info.is_vacant() => locks.push(info),
                // Released meanwhile, or a hash that is not a lock.
                Ok(_) | Err(Error::WrongKind { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        // One CLIENT LIST for all of them.
        if !locks.is_empty() {
            let known = clients::identities(server);
            for info in &mut locks {
                clients::attach(info, &known);
            }
        }
        Ok(locks)
    }

    /// Deletes the lock called `name` whoever holds it, whatever its kind,
    /// and wakes its waiters in every process the way that kind does: `"0"`
    /// on the plain channel (plain, fenced, spin), `"0"` on the channel of
    /// the fair queue's head, `"1"` (wake all) on a read-write lock's
    /// channel. Holders find out when they renew or release
    /// ([`Error::LockLost`]).
    ///
    /// Returns the kind of the lock deleted, or `None` when no lock was
    /// held (the head of a fair queue is woken all the same).
    ///
    /// # Errors
    ///
    /// [`Error::WrongKind`] when the name holds a value that is not a lock
    /// (nothing is deleted); otherwise as [`inspect`](Self::inspect).
    pub fn force_unlock_any(&self, name: &str) -> Result<Option<Kind>> {
        let info = self.inspect(name)?;
        let deleted = match info.kind {
            Kind::Lock | Kind::Fenced => self.lock(name).force_unlock()?,
            Kind::Fair => self.fair_lock(name).force_unlock()?,
            Kind::ReadWrite => {
                // Each side deletes only a lock held in its own mode.
                let rw = self.read_write_lock(name);
                if rw.write().force_unlock()? {
                    true
                } else if rw.read().force_unlock()? {
                    // The read side announces "0" (one waiter per process);
                    // "1" makes every waiter look again, as after a write.
                    snapshot::wake_all(self.engine().server(), name)?;
                    true
                } else {
                    false
                }
            }
        };
        Ok(deleted.then_some(info.kind))
    }
}
