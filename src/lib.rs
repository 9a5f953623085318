//! Distributed, reentrant locks held in Redis, for threaded programs.
//!
//! redhold keeps each lock in Redis in the same layout as Redisson's `RLock`
//! (Java), so Rust and Java services can share locks. A lock is a hash whose
//! field `<client-uuid>:<thread-id>` counts that thread's holds; every change
//! is one atomic Lua script.
//!
//! # Tutorial
//!
//! Build one [`Client`] per process and take locks by name:
//!
//! ```no_run
//! use std::time::Duration;
//! # fn main() -> redhold::Result<()> {
//! let client = redhold::Client::open("redis://127.0.0.1:6379/")?;
//! let lock = client.lock("orders:42");
//!
//! // Waits until no other thread or process holds it. While the guard
//! // lives, the client's watchdog keeps renewing the lock in Redis; if
//! // the process dies, the lock expires after 30 s on its own.
//! let guard = lock.lock()?;
//! // ... critical section ...
//! drop(guard); // released, and one waiter anywhere is woken
//!
//! // Give up after half a second, and hold for at most ten:
//! if let Some(_guard) = lock.try_lock_for_with_lease(
//!     Duration::from_millis(500),
//!     Duration::from_secs(10),
//! )? {
//!     // ...
//! }
//! # Ok(()) }
//! ```
//!
//! The same thread may lock again (reentrancy); each guard releases one
//! hold. Guards cannot move to another thread. A waiting thread sleeps until
//! the holder's release message arrives over pub/sub, and never longer than
//! the lock's remaining TTL, so a lost message costs time, not safety.
//!
//! When the watchdog finds that a held lock expired or was deleted,
//! [`LockGuard::is_held`] turns false and the release returns
//! [`Error::LockLost`].

#![forbid(unsafe_code)]
// No silent `as` narrowing in the library: one once sent a huge duration
// to Redis as "0". Tests and benches may cast freely.
#![deny(clippy::cast_possible_truncation)]

mod builder;
mod client;
mod config;
mod engine;
mod error;
mod global;
mod guard;
mod hold;
pub mod inspect;
mod interrupt;
mod kind;
mod lock;
mod lost_callbacks;
mod multi_lock;
mod names;
mod pubsub;
mod read_write;
mod red_lock;
mod red_lock_guard;
mod redact;
mod renewals;
mod scripts;
mod server;
mod stats;
mod thread_id;
mod waiting;
mod watchdog;

pub use builder::ClientBuilder;
pub use client::Client;
pub use error::{Error, Result};
pub use global::global;
pub use guard::LockGuard;
pub use interrupt::Interrupt;
pub use kind::{Fair, Fenced, LockKind, Read, Reentrant, Spin, Write};
pub use lock::{FairLock, FencedLock, Lock, ReadLock, ReentrantLock, SpinLock, WriteLock};
pub use multi_lock::{MultiLock, MultiLockGuard};
pub use read_write::ReadWriteLock;
pub use red_lock::RedLock;
pub use red_lock_guard::RedLockGuard;
pub use stats::Stats;
