//! Distributed, reentrant locks held in Redis, for threaded and async programs.
//!
//! redhold keeps each lock in Redis in the same layout as Redisson's `RLock`
//! (Java), so Rust and Java services can share locks. A lock is a hash whose
//! field `<client-uuid>:<thread-id>` counts that thread's holds; every change
//! is one atomic Lua script.
//!
//! # What it works with
//!
//! - **Servers:** Redis 6.2, 7.x and 8, and Valkey 8: one server, a Redis
//!   Cluster, or a master found through Sentinel (the `cluster` and
//!   `sentinel` features, on by default), with or without TLS (the `tls`
//!   feature, opt-in: `features = ["tls"]`, for `rediss://`). The test
//!   suite runs against each of these versions
//!   ([docs/server-versions.md]).
//! - **Redisson:** the keys, channels and scripts of Redisson's `RLock`,
//!   `RFairLock`, `RReadWriteLock`, `RFencedLock`, `RSpinLock`,
//!   `RSemaphore`, `RPermitExpirableSemaphore` and `RCountDownLatch`. The
//!   compat suite runs the real Java client beside this crate: Redisson
//!   4.7.0 today; [docs/wire-format.md] has the versions checked and the
//!   differences found.
//! - **Rust:** 1.88 or later (the `rust-version` of the manifest). The API
//!   blocks, and every acquire has an async form for any executor (see
//!   *Use it from async code* below): a [`Client`] runs a few threads of
//!   its own, and the async calls run their Redis I/O there.
//!
//! [docs/server-versions.md]: https://github.com/redhold/redhold/blob/main/docs/server-versions.md
//! [docs/wire-format.md]: https://github.com/redhold/redhold/blob/main/docs/wire-format.md#checked-against-redisson
//!
//! # Cargo features
//!
//! | feature | default | what it brings |
//! |---|---|---|
//! | `cluster` | on | [`ClientBuilder::cluster`]: scripts routed to each key's slot owner, sharded pub/sub on Redis 7+ |
//! | `sentinel` | on | [`ClientBuilder::sentinel`]: the master found through the sentinels, followed across failovers |
//! | `tls` | off | `rediss://` for commands and pub/sub (rustls with the ring provider, which needs a C compiler to build); without it a `rediss://` URL is refused when the client is built |
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
//!
//! # A tour
//!
//! **The kinds.** Every kind is a [`Lock<K>`](Lock) taken from a [`Client`]
//! by name, with the same methods (`lock`, `try_lock`, `try_lock_for`,
//! their `_with_lease` forms, `lock_interruptibly`, `unlock`,
//! `force_unlock`, the queries):
//!
//! | kind | from | use it when |
//! |---|---|---|
//! | [`ReentrantLock`] | [`Client::lock`] | the default: one holder, re-entrant per thread |
//! | [`FairLock`] | [`Client::fair_lock`] | waiters must get the lock in arrival order |
//! | [`ReadLock`] / [`WriteLock`] | [`Client::read_write_lock`] | many readers or one writer |
//! | [`FencedLock`] | [`Client::fenced_lock`] | a storage layer must refuse a stale holder (tokens) |
//! | [`SpinLock`] | [`Client::spin_lock`] | no pub/sub (it retries with backoff) |
//! | [`MultiLock`] | [`MultiLock::new`] | several locks, all or none |
//! | [`RedLock`] | [`RedLock::new`] | one lock over independent servers (a majority) |
//!
//! [docs/lock-kinds.md](https://github.com/redhold/redhold/blob/main/docs/lock-kinds.md)
//! compares them at length.
//!
//! **Beyond locks.** Redisson's semaphore and count-down latch, in the same
//! layout: [`Client::semaphore`] gives a [`Semaphore`] (up to N callers at
//! once; [`Permit`] guards), [`Client::permit_expirable_semaphore`] a
//! [`PermitExpirableSemaphore`] (permits with an id and a lease;
//! [`ExpirablePermit`] guards), [`Client::count_down_latch`] a
//! [`CountDownLatch`] (wait until N events happened). Their waiters are
//! woken through pub/sub like lock waiters;
//! [docs/synchronizers.md](https://github.com/redhold/redhold/blob/main/docs/synchronizers.md)
//! says when to use which.
//!
//! **The guard.** Taking a lock returns a [`LockGuard`] (or a
//! [`MultiLockGuard`], a [`RedLockGuard`]); dropping it releases one hold,
//! also when the thread panics. A guard stays on its thread, because Redis
//! knows the holder as `<client-uuid>:<thread-id>`
//! ([`Lock::holder_id`]). [`LockGuard::unlock`] releases with a `Result`;
//! [`LockGuard::is_held`] says whether the watchdog still finds the lock.
//!
//! **Hand a lock to another thread.** A hold may belong to an [`Owner`]
//! instead of a thread (Redisson's `threadId` overloads): a job that takes
//! a lock on one worker and finishes on another, a pipeline whose stages
//! run on different threads. [`Lock::for_owner`] makes a handle that takes
//! and releases for the owner from whichever thread calls; its guard, an
//! [`OwnerGuard`], is `Send`, and dropping it anywhere releases one hold.
//! The owner re-enters its locks from any thread, and waits for every
//! other holder (threads included); [`MultiLock::for_owner`] and
//! [`RedLock::for_owner`] do the same for the multi-locks.
//!
//! ```no_run
//! # fn main() -> redhold::Result<()> {
//! let client = redhold::Client::open("redis://127.0.0.1:6379/")?;
//! let job = redhold::Owner::new();
//! let guard = client.lock("reports:daily").for_owner(job).lock()?;
//! let worker = std::thread::spawn(move || {
//!     // ... the rest of the job, still under the lock ...
//!     guard.unlock() // released here, on the worker
//! });
//! worker.join().expect("the worker")?;
//! # Ok(()) }
//! ```
//!
//! **Use it from async code.** [`Lock::lock_async`] and the other `_async`
//! forms (every lock kind, [`MultiLock`], [`RedLock`], [`Semaphore`],
//! [`PermitExpirableSemaphore`], [`CountDownLatch`]) return named futures,
//! `Send + 'static`, that any executor drives, with no runtime dependency:
//! their Redis I/O runs on the client's own threads
//! ([`ClientBuilder::async_threads`]), a waiting task is an entry in the
//! client's waiter registry woken by a release (no thread, no polling),
//! and dropping a future is cancel-safe at every point. The guard is an
//! [`OwnerGuard`]: held across `.await`s, moved between tasks; its drop
//! queues the release and never blocks.
//!
//! ```no_run
//! # async fn handle(client: redhold::Client) -> redhold::Result<()> {
//! let guard = client.lock("orders:42").lock_async().await?;
//! // ... awaits of your own, under the lock ...
//! guard.unlock_async().await?;
//! # Ok(()) }
//! ```
//!
//! **The client's threads.** A [`Client`] (clone it freely; one per
//! process) keeps a few command connections, one **subscriber** thread that
//! hears releases and wakes the threads parked on them, and one
//! **watchdog** thread that renews every lock held without a lease, in one
//! call per hundred locks, every third of the watchdog timeout. A process
//! that dies stops renewing, so its locks expire on their own. Through
//! Sentinel, one more thread per sentinel (five at most) listens for
//! `+switch-master`, so that the client leaves a replaced master at once.
//! [`Client::stats`] shows what they are doing; [`Client::shutdown`] stops
//! them and wakes every waiter with [`Error::Shutdown`].
//!
//! **When Redis is away.** [`Lock::lock`] does not fail at the first
//! refused or dropped connection: it retries with a backoff (100 ms
//! doubling to 1 s) through a restart or a failover, for up to the
//! client's [`ClientBuilder::outage_tolerance`] (60 s by default), and
//! then returns [`Error::Unreachable`], which says for how long Redis was
//! away; it never returns a guard it is not sure of. `try_lock_for` and
//! `lock_interruptibly` do the same within their own deadline. Calls that
//! do not wait (`try_lock`, `is_locked`, releases) fail fast, after the
//! client's retries ([`ClientBuilder::retry_attempts`]). A lock lost
//! meanwhile is reported ([`Error::LockLost`],
//! [`ClientBuilder::on_lock_lost`]), never kept silently.
//! [docs/reliability.md](https://github.com/redhold/redhold/blob/main/docs/reliability.md)
//! has the measured cases.
//!
//! **The tool.** The `redhold` binary (crate `redhold-cli`) lists, shows,
//! watches and force-unlocks the locks of redhold and Redisson clients:
//! `redhold list 'orders:*'`, `redhold show orders:42`.
//!
//! **Runnable examples.** `cargo run --example quickstart` walks through
//! contention, reentrancy, leases and the watchdog against a local Redis
//! (or a throwaway `redis-server` it starts); `examples/` has one per kind
//! and `cargo run --example stats` prints [`Client::stats`] as a table.

#![forbid(unsafe_code)]
// docs.rs: "Available on crate feature `cluster` only" on each item that a
// feature brings (docs.rs builds with `--cfg docsrs`, see Cargo.toml).
#![cfg_attr(docsrs, feature(doc_cfg))]
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
mod holding;
mod identity;
pub mod inspect;
mod interrupt;
mod kind;
mod lock;
mod lost_callbacks;
mod multi_lock;
mod names;
mod owner;
mod pubsub;
mod read_write;
mod red_lock;
mod red_lock_async;
mod red_lock_guard;
mod redact;
mod renewals;
mod scripts;
mod server;
mod stats;
mod synchronizer;
mod tasks;
mod thread_id;
mod waiting;
mod watchdog;

pub use builder::ClientBuilder;
pub use client::{Client, ShutdownFuture};
pub use error::{Error, LossCause, Result};
pub use global::global;
pub use guard::{LockGuard, OwnerGuard};
pub use holding::{Holding, ThisThread};
pub use identity::ClientIdentity;
pub use interrupt::Interrupt;
pub use kind::{Fair, Fenced, LockKind, Read, Reentrant, Spin, Write};
pub use lock::{
    FairLock, FencedLock, Lock, LockFuture, ReadLock, ReentrantLock, SpinLock, TryLockFuture,
    UnlockFuture, WriteLock,
};
pub use lost_callbacks::LostHold;
pub use multi_lock::{
    MemberGuard, MultiLock, MultiLockFuture, MultiLockGuard, MultiMember, TryMultiLockFuture,
};
pub use owner::Owner;
pub use read_write::ReadWriteLock;
pub use red_lock::RedLock;
pub use red_lock_async::{RedLockFuture, TryRedLockFuture};
pub use red_lock_guard::RedLockGuard;
/// The `redis` crate this one is built on, at the version and with the
/// features it uses: [`Error::Redis`] and the other variants' `source` are
/// its [`RedisError`](redis::RedisError), whose kind and code
/// (`e.kind()`, `e.code()`) are read through it without adding `redis` to
/// your own manifest (and guessing its version).
pub use redis;
pub use stats::Stats;
pub use synchronizer::{
    CountDownLatch, ExpirablePermit, Permit, PermitExpirableSemaphore, Semaphore, WaitFuture,
};
