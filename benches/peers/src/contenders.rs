//! What is measured: one uncontended acquire + release per `pair()`. The
//! raw bound and redhold here; the other crates in `others`.

use crate::raw_lua::{channel_of, ACQUIRE_LUA, LEASE_MS, RELEASE_LUA};

pub(crate) trait Contender {
    /// The JSON key prefix (`raw`, `redhold`, `rslock`, ...).
    fn key(&self) -> &'static str;
    /// One acquire of a free lock and its release; panics on failure.
    fn pair(&mut self);
    /// Shut down background threads, if any.
    fn finish(&mut self) {}
}

/// Every contender, each on a fixed name of its own under `prefix`.
pub(crate) fn all(url: &str, prefix: &str) -> Vec<Box<dyn Contender>> {
    let name = |k: &str| format!("{prefix}:{k}");
    vec![
        Box::new(Raw::new(url, name("raw"))),
        Box::new(Redhold::new(url, name("redhold"))),
        Box::new(crate::async_peers::RedholdAsync::new(
            url,
            name("redhold-async"),
        )),
        Box::new(crate::others::Rslock::new(url, name("rslock"))),
        Box::new(crate::others::Rlock::new(url, name("rlock"))),
        Box::new(crate::async_peers::RlockAsync::new(
            url,
            name("rlock-async"),
        )),
        Box::new(crate::others::RedisLock::new(url, name("redis-lock"))),
    ]
}

/// Keys in the URL's database (redhold's unlock latches among them).
pub(crate) fn dbsize(url: &str) -> i64 {
    let mut con = conn(url);
    redis::cmd("DBSIZE").query(&mut con).unwrap_or(-1)
}

fn conn(url: &str) -> redis::Connection {
    redis::Client::open(url)
        .and_then(|c| c.get_connection())
        .unwrap_or_else(|e| panic!("peers: cannot connect to Redis: {e}"))
}

/// The acquire and release EVALSHAs with the `redis` crate alone, on one
/// connection: the bound.
struct Raw {
    con: redis::Connection,
    key: String,
    chan: String,
    acquire: redis::Script,
    release: redis::Script,
}

impl Raw {
    fn new(url: &str, key: String) -> Raw {
        Raw {
            con: conn(url),
            chan: channel_of(&key),
            key,
            acquire: redis::Script::new(ACQUIRE_LUA),
            release: redis::Script::new(RELEASE_LUA),
        }
    }
}

impl Contender for Raw {
    fn key(&self) -> &'static str {
        "raw"
    }
    fn pair(&mut self) {
        let r: Option<i64> = self
            .acquire
            .key(&self.key)
            .arg(LEASE_MS)
            .arg("peers-raw:1")
            .invoke(&mut self.con)
            .expect("raw acquire EVALSHA");
        assert_eq!(r, None, "raw acquire of a free lock failed");
        let r: Option<i64> = self
            .release
            .key(&self.key)
            .key(&self.chan)
            .arg(0)
            .arg(LEASE_MS)
            .arg("peers-raw:1")
            .invoke(&mut self.con)
            .expect("raw release EVALSHA");
        assert_eq!(r, Some(1), "raw release did not delete");
    }
}

/// redhold: `lock()` (watchdog lease, 30 s by default) + drop of the guard.
struct Redhold {
    client: redhold::Client,
    lock: redhold::Lock,
}

impl Redhold {
    fn new(url: &str, name: String) -> Redhold {
        let client = redhold::Client::open(url).expect("redhold: Client::open");
        Redhold {
            lock: client.lock(name),
            client,
        }
    }
}

impl Contender for Redhold {
    fn key(&self) -> &'static str {
        "redhold"
    }
    fn pair(&mut self) {
        let g = self.lock.lock().expect("redhold lock()");
        drop(g);
    }
    fn finish(&mut self) {
        let _ = self.client.shutdown();
    }
}
