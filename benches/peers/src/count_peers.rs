//! The lock libraries as `count` drives them: a client of each, able to run
//! one critical section (acquire, run the caller's code, release).

use std::time::Duration;

/// The TTL / lease every library asks for in the count mode: long enough that
/// no holder renews its lock inside the idle row's window (renewals at a
/// third of it, 20 s, come after the window's 12 s).
pub(crate) const COUNT_TTL: Duration = Duration::from_secs(60);

/// A library under count.
pub(crate) trait Peer: Sync {
    /// The name printed in the JSON (`redhold`, `rslock`, ...).
    fn key(&self) -> &'static str;
    /// A new client of its own (own connections), as a separate process
    /// would have.
    fn client(&self) -> Box<dyn PeerClient>;
    /// Two handles on one client for two threads, where the library has a
    /// client shared by threads that changes what a hand-over costs.
    fn one_client_twice(&self) -> Option<(Box<dyn PeerClient>, Box<dyn PeerClient>)> {
        None
    }
}

/// One client of a library.
pub(crate) trait PeerClient: Send {
    /// Waits for the lock `name`, runs `inside` while holding it, releases it.
    fn section(&mut self, name: &str, inside: &mut dyn FnMut());
    /// Acquires `name` twice and releases it twice; `false` where the library
    /// has no re-entry.
    fn reentrant_pair(&mut self, _name: &str) -> bool {
        false
    }
}

/// redhold: `Lock::lock()` (watchdog lease), drop of the guard.
pub(crate) struct Redhold(pub(crate) String);

struct RedholdClient(redhold::Client);

impl Redhold {
    fn open(&self) -> RedholdClient {
        let client = redhold::Client::builder()
            .url(&self.0)
            .watchdog_timeout(COUNT_TTL)
            .build()
            .expect("redhold: build a client");
        RedholdClient(client)
    }
}

impl Peer for Redhold {
    fn key(&self) -> &'static str {
        "redhold"
    }
    fn client(&self) -> Box<dyn PeerClient> {
        Box::new(self.open())
    }
    fn one_client_twice(&self) -> Option<(Box<dyn PeerClient>, Box<dyn PeerClient>)> {
        let one = self.open();
        let twin = RedholdClient(one.0.clone());
        Some((Box::new(one), Box::new(twin)))
    }
}

impl PeerClient for RedholdClient {
    fn section(&mut self, name: &str, inside: &mut dyn FnMut()) {
        let guard = self.0.lock(name).lock().expect("redhold lock()");
        inside();
        drop(guard);
    }
    fn reentrant_pair(&mut self, name: &str) -> bool {
        let lock = self.0.lock(name);
        let outer = lock.lock().expect("redhold lock()");
        let inner = lock.lock().expect("redhold re-entry");
        drop(inner);
        drop(outer);
        true
    }
}

impl Drop for RedholdClient {
    fn drop(&mut self) {
        // A clone shares the client: shut down once the last handle goes.
        let _ = self.0.shutdown();
    }
}

/// rslock 0.10: `LockManager::acquire` (loops until acquired) and
/// `LockGuard::release`, on a current-thread tokio runtime per client.
pub(crate) struct Rslock(pub(crate) String);

struct RslockClient {
    rt: tokio::runtime::Runtime,
    manager: rslock::LockManager,
}

impl Peer for Rslock {
    fn key(&self) -> &'static str {
        "rslock"
    }
    fn client(&self) -> Box<dyn PeerClient> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("tokio runtime");
        let manager = rt.block_on(async { rslock::LockManager::new(vec![self.0.clone()]) });
        Box::new(RslockClient { rt, manager })
    }
}

impl PeerClient for RslockClient {
    fn section(&mut self, name: &str, inside: &mut dyn FnMut()) {
        let guard = self
            .rt
            .block_on(self.manager.acquire(name, COUNT_TTL))
            .expect("rslock acquire");
        inside();
        self.rt.block_on(guard.release());
    }
}

/// rlock 0.2, sync API: `acquire_mutex_with_options` (retries every 100 ms,
/// its default, until acquired; renewal at its default) + `release()`.
pub(crate) struct Rlock(pub(crate) String);

struct RlockClient {
    rlock: rlock::sync_lock::RLock,
    options: rlock::AcquireOptions,
}

impl Peer for Rlock {
    fn key(&self) -> &'static str {
        "rlock"
    }
    fn client(&self) -> Box<dyn PeerClient> {
        let options = rlock::AcquireOptions::builder()
            .ttl(COUNT_TTL)
            .build()
            .expect("rlock options");
        Box::new(RlockClient {
            rlock: rlock::sync_lock::RLock::new(self.0.as_str()).expect("rlock: RLock::new"),
            options,
        })
    }
}

impl PeerClient for RlockClient {
    fn section(&mut self, name: &str, inside: &mut dyn FnMut()) {
        let mut guard = self
            .rlock
            .acquire_mutex_with_options(name, self.options.clone())
            .expect("rlock acquire");
        inside();
        guard.release().expect("rlock release");
    }
}

impl Drop for RlockClient {
    fn drop(&mut self) {
        self.rlock.shutdown();
    }
}

/// redis-lock 0.5, sync API: `MultiResourceLock::lock` of one resource with
/// its documented defaults for waiting (an attempt every second, up to a
/// minute), guard dropped to release. One connection per instance: it has
/// no client shared by threads.
pub(crate) struct RedisLock(pub(crate) String);

struct RedisLockClient(redis_lock::sync::MultiResourceLock);

impl Peer for RedisLock {
    fn key(&self) -> &'static str {
        "redis_lock"
    }
    fn client(&self) -> Box<dyn PeerClient> {
        let client = redis027::Client::open(self.0.as_str()).expect("redis 0.27: Client::open");
        redis_lock::sync::setup(&client)
            .unwrap_or_else(|e| panic!("redis-lock: setup (FUNCTION LOAD) failed: {e}"));
        let lock = redis_lock::sync::MultiResourceLock::new(&client).expect("redis-lock: new");
        Box::new(RedisLockClient(lock))
    }
}

impl PeerClient for RedisLockClient {
    fn section(&mut self, name: &str, inside: &mut dyn FnMut()) {
        let resources = [name.to_owned()];
        let guard = self
            .0
            .lock(
                &resources,
                COUNT_TTL,
                redis_lock::DEFAULT_TIMEOUT,
                redis_lock::DEFAULT_SLEEP,
            )
            .expect("redis-lock lock")
            .expect("redis-lock: not acquired within its default minute");
        inside();
        drop(guard);
    }
}
