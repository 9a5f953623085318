//! Mutual exclusion under contention, checked the same way for every lock
//! kind: threads do a read-modify-write on a plain Redis counter, which
//! loses updates unless they really exclude each other.

use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use super::RedisServer;

/// Adds one to `key` with a separate GET and SET (and a yield between them
/// to widen the window), so that two unguarded callers lose an update.
pub(crate) fn increment(con: &mut redis::Connection, key: &str) {
    let value: Option<u64> = redis::cmd("GET").arg(key).query(con).expect("GET");
    thread::yield_now();
    redis::cmd("SET")
        .arg(key)
        .arg(value.unwrap_or(0) + 1)
        .query::<()>(con)
        .expect("SET");
}

/// Runs one thread per lock, each doing `iterations` rounds of lock,
/// [`increment`] of `counter`, release; waits at most `limit` for all of
/// them and returns the counter's final value.
///
/// # Panics
///
/// If a thread fails or the threads do not finish within `limit`.
pub(crate) fn count_under_locks<K: redhold::LockKind>(
    server: &RedisServer,
    locks: Vec<redhold::Lock<K>>,
    counter: &str,
    iterations: usize,
    limit: Duration,
) -> u64 {
    let (done, finished) = mpsc::channel();
    let threads = locks.len();
    for (i, lock) in locks.into_iter().enumerate() {
        let mut con = server.connection();
        let counter = counter.to_owned();
        let done = done.clone();
        thread::Builder::new()
            .name(format!("counter-{i}"))
            .spawn(move || {
                for _ in 0..iterations {
                    let guard = lock.lock().expect("lock");
                    increment(&mut con, &counter);
                    guard.unlock().expect("release");
                }
                let _ = done.send(());
            })
            .expect("spawn a counter thread");
    }
    let deadline = Instant::now() + limit;
    for finished_so_far in 0..threads {
        let left = deadline.saturating_duration_since(Instant::now());
        if finished.recv_timeout(left).is_err() {
            panic!("only {finished_so_far} of {threads} counter threads finished within {limit:?}");
        }
    }
    server.cmd(&["GET", counter])
}
