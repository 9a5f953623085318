//! The read-write lock handle: one name, a shared read side and an
//! exclusive write side.

use crate::client::Client;
use crate::kind::{Read, Write};
use crate::lock::Lock;

/// A pair of locks on one name: shared read holds, or one exclusive write
/// hold. Made by [`Client::read_write_lock`](crate::Client::read_write_lock).
///
/// ```no_run
/// # fn main() -> redhold::Result<()> {
/// let client = redhold::Client::open("redis://127.0.0.1:6379/")?;
/// let rw = client.read_write_lock("config");
/// {
///     let _r1 = rw.read().lock()?;   // readers share the lock
/// }
/// let _w = rw.write().lock()?;        // the writer excludes everyone
/// let _r = rw.read().lock()?;         // ...but may read too (and keep
///                                     // reading after writing: a downgrade)
/// # Ok(()) }
/// ```
///
/// A thread that holds only read holds and asks for the write lock gets
/// [`Error::UpgradeNotSupported`](crate::Error::UpgradeNotSupported) at once: it could never be granted while
/// the thread itself reads.
#[derive(Clone, Debug)]
pub struct ReadWriteLock {
    read: Lock<Read>,
    write: Lock<Write>,
}

impl Client {
    /// A handle on the read-write lock called `name`.
    pub fn read_write_lock(&self, name: impl Into<String>) -> ReadWriteLock {
        ReadWriteLock::new(self, name.into())
    }
}

impl ReadWriteLock {
    fn new(client: &Client, name: String) -> Self {
        ReadWriteLock {
            read: Lock::new(client.clone(), name.clone()),
            write: Lock::new(client.clone(), name),
        }
    }

    /// The lock's name.
    pub fn name(&self) -> &str {
        self.read.name()
    }

    /// The shared (read) side.
    pub fn read(&self) -> Lock<Read> {
        self.read.clone()
    }

    /// The exclusive (write) side.
    pub fn write(&self) -> Lock<Write> {
        self.write.clone()
    }
}
