//! The async locks side by side (issue 42): redhold's async face, rslock
//! 0.10 and rlock 0.2's async API, each on tokio.
//!
//! - Uncontended pair contenders for `main`'s rounds: `redhold_async`
//!   (`lock_async().await` + `unlock_async().await`) and `rlock_async`
//!   (`acquire_mutex_with_options` + `release()`), each pair one
//!   `block_on` of a current-thread runtime, as `others::Rslock` does.
//! - [`Locker`]: how `handoff` takes and releases each library's lock from
//!   a task.

use std::future::Future;

use crate::contenders::Contender;
use crate::TTL;

/// A current-thread tokio runtime with its timer and I/O.
pub(crate) fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime")
}

/// One client of an async lock library, used from tasks.
pub(crate) trait Locker: Send + Sync + 'static {
    type Guard: Send + 'static;
    /// Waits for the lock `name` however the library waits (redhold: woken
    /// by the release; the others: polling at their default interval).
    fn acquire(&self, name: &str) -> impl Future<Output = Self::Guard> + Send;
    /// Releases as the library's docs advise.
    fn release(&self, guard: Self::Guard) -> impl Future<Output = ()> + Send;
}

/// redhold, async face: a `Client` of its own.
pub(crate) struct RedholdLocker(pub(crate) redhold::Client);

impl RedholdLocker {
    pub(crate) fn open(url: &str) -> RedholdLocker {
        RedholdLocker(redhold::Client::open(url).expect("redhold: Client::open"))
    }
}

impl Locker for RedholdLocker {
    type Guard = redhold::OwnerGuard;
    async fn acquire(&self, name: &str) -> redhold::OwnerGuard {
        self.0
            .lock(name)
            .lock_async()
            .await
            .expect("redhold lock_async()")
    }
    /// Dropping an async guard queues the release and returns at once.
    async fn release(&self, guard: redhold::OwnerGuard) {
        drop(guard);
    }
}

impl Drop for RedholdLocker {
    fn drop(&mut self) {
        let _ = self.0.shutdown();
    }
}

/// rslock 0.10: `acquire` (retries every 0–200 ms, at random, until it
/// gets the lock) + `release().await`.
pub(crate) struct RslockLocker(rslock::LockManager);

impl RslockLocker {
    pub(crate) fn open(url: &str) -> RslockLocker {
        RslockLocker(rslock::LockManager::new(vec![url.to_string()]))
    }
}

impl Locker for RslockLocker {
    type Guard = rslock::LockGuard;
    async fn acquire(&self, name: &str) -> rslock::LockGuard {
        self.0.acquire(name, TTL).await.expect("rslock acquire")
    }
    async fn release(&self, guard: rslock::LockGuard) {
        guard.release().await;
    }
}

/// rlock 0.2, async API: `acquire_mutex_with_options` (TTL 30 s, its
/// default 100 ms retry interval, no timeout) + `release().await`.
pub(crate) struct RlockLocker {
    rlock: rlock::async_lock::RLock,
    options: rlock::AcquireOptions,
}

impl RlockLocker {
    /// Needs a runtime (it spawns its release task).
    pub(crate) async fn open(url: &str) -> RlockLocker {
        RlockLocker {
            rlock: rlock::async_lock::RLock::new(url)
                .await
                .expect("rlock: RLock::new"),
            options: rlock::AcquireOptions::builder()
                .ttl(TTL)
                .build()
                .expect("rlock options"),
        }
    }

    /// Stops its background tasks.
    pub(crate) async fn shutdown(self) {
        self.rlock.shutdown().await;
    }
}

impl Locker for RlockLocker {
    type Guard = rlock::async_lock::RLockGuard;
    async fn acquire(&self, name: &str) -> rlock::async_lock::RLockGuard {
        self.rlock
            .acquire_mutex_with_options(name, self.options.clone())
            .await
            .expect("rlock acquire")
    }
    async fn release(&self, mut guard: rlock::async_lock::RLockGuard) {
        guard.release().await.expect("rlock release");
    }
}

/// `lock_async().await` + `unlock_async().await` of a free lock, one
/// `block_on` per pair (as `others::Rslock`).
pub(crate) struct RedholdAsync {
    rt: tokio::runtime::Runtime,
    client: redhold::Client,
    lock: redhold::Lock,
}

impl RedholdAsync {
    pub(crate) fn new(url: &str, name: String) -> RedholdAsync {
        let client = redhold::Client::open(url).expect("redhold: Client::open");
        RedholdAsync {
            rt: runtime(),
            lock: client.lock(name),
            client,
        }
    }
}

impl Contender for RedholdAsync {
    fn key(&self) -> &'static str {
        "redhold_async"
    }
    fn pair(&mut self) {
        let lock = &self.lock;
        self.rt.block_on(async {
            let g = lock.lock_async().await.expect("redhold lock_async()");
            g.unlock_async().await.expect("redhold unlock_async()");
        });
    }
    fn finish(&mut self) {
        let _ = self.client.shutdown();
    }
}

/// rlock's async API, one `block_on` per pair.
pub(crate) struct RlockAsync {
    rt: tokio::runtime::Runtime,
    locker: Option<RlockLocker>,
    name: String,
}

impl RlockAsync {
    pub(crate) fn new(url: &str, name: String) -> RlockAsync {
        let rt = runtime();
        let locker = rt.block_on(RlockLocker::open(url));
        RlockAsync {
            rt,
            locker: Some(locker),
            name,
        }
    }
}

impl Contender for RlockAsync {
    fn key(&self) -> &'static str {
        "rlock_async"
    }
    fn pair(&mut self) {
        let (locker, name) = (self.locker.as_ref().expect("open"), self.name.as_str());
        self.rt.block_on(async {
            let g = locker.acquire(name).await;
            locker.release(g).await;
        });
    }
    fn finish(&mut self) {
        if let Some(l) = self.locker.take() {
            self.rt.block_on(l.shutdown());
        }
    }
}
