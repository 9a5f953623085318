//! The other Rust Redis lock crates, each used the way its docs show for a
//! single resource: acquire a free lock with a 30 s TTL, release it.

use crate::contenders::Contender;
use crate::TTL;

/// rslock 0.10 (Redlock, async only): `LockManager::acquire` + `LockGuard::
/// release`, each pair one `block_on` of a current-thread tokio runtime.
pub(crate) struct Rslock {
    rt: tokio::runtime::Runtime,
    manager: rslock::LockManager,
    name: String,
}

impl Rslock {
    pub(crate) fn new(url: &str, name: String) -> Rslock {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("tokio runtime");
        let manager = rt.block_on(async { rslock::LockManager::new(vec![url.to_string()]) });
        Rslock { rt, manager, name }
    }
}

impl Contender for Rslock {
    fn key(&self) -> &'static str {
        "rslock"
    }
    fn pair(&mut self) {
        let (manager, name) = (&self.manager, self.name.as_str());
        self.rt.block_on(async {
            let guard = manager.acquire(name, TTL).await.expect("rslock acquire");
            guard.release().await;
        });
    }
}

/// rlock 0.2, sync API: `acquire_mutex_with_options` (TTL 30 s, renewal at
/// its default: automatic, a renewal thread per guard) + `release()` (drop
/// only queues the release to a background thread; the explicit call is
/// what its docs advise when completion matters).
pub(crate) struct Rlock {
    rlock: rlock::sync_lock::RLock,
    options: rlock::AcquireOptions,
    name: String,
}

impl Rlock {
    pub(crate) fn new(url: &str, name: String) -> Rlock {
        let options = rlock::AcquireOptions::builder()
            .ttl(TTL)
            .build()
            .expect("rlock options");
        Rlock {
            rlock: rlock::sync_lock::RLock::new(url).expect("rlock: RLock::new"),
            options,
            name,
        }
    }
}

impl Contender for Rlock {
    fn key(&self) -> &'static str {
        "rlock"
    }
    fn pair(&mut self) {
        let mut guard = self
            .rlock
            .acquire_mutex_with_options(&self.name, self.options.clone())
            .expect("rlock acquire");
        guard.release().expect("rlock release");
    }
    fn finish(&mut self) {
        self.rlock.shutdown();
    }
}

/// The logical database redis-lock runs in (same server, see `RedisLock`).
const REDIS_LOCK_DB: i64 = 9;

/// redis-lock 0.5, sync API (`MultiResourceLock`, the only sync lock it
/// has): `try_lock` of one resource (a free lock: one attempt, no retry
/// sleep) + drop of the guard, which releases. Its Lua functions are loaded
/// once with `setup` (FUNCTION LOAD, Redis 7). Its release SCANs the whole
/// database for `lock:*` keys, so it costs more the more keys the database
/// holds; it runs in a database of its own (`REDIS_LOCK_DB`, on the same
/// server) so that the others' keys (redhold's unlock latches, which live
/// 30 s) do not slow it down: its best case.
pub(crate) struct RedisLock {
    lock: redis_lock::sync::MultiResourceLock,
    resources: Vec<String>,
}

impl RedisLock {
    pub(crate) fn new(url: &str, name: String) -> RedisLock {
        let mut info = redis027::IntoConnectionInfo::into_connection_info(url)
            .expect("redis 0.27: a valid URL");
        info.redis.db = REDIS_LOCK_DB;
        let client = redis027::Client::open(info).expect("redis 0.27: Client::open");
        redis_lock::sync::setup(&client)
            .unwrap_or_else(|e| panic!("redis-lock: setup (FUNCTION LOAD) failed: {e}"));
        RedisLock {
            lock: redis_lock::sync::MultiResourceLock::new(&client).expect("redis-lock: new"),
            resources: vec![name],
        }
    }
}

impl Contender for RedisLock {
    fn key(&self) -> &'static str {
        "redis_lock"
    }
    fn pair(&mut self) {
        let guard = self
            .lock
            .try_lock(&self.resources, TTL)
            .expect("redis-lock try_lock")
            .expect("redis-lock: a free lock was not acquired");
        drop(guard);
    }
}
