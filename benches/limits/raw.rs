//! The raw limits: what the `redis` crate alone (sync API) achieves on the
//! same server in the same run, with the same Lua as the library.
//!
//! These are the bounds the library's figures are compared with: an
//! acquire-shaped and a release-shaped EVALSHA, PUBLISH -> delivery to a
//! subscriber blocked in `get_message` on another thread, a hand-rolled
//! "ideal" handoff, and threads each on its own connection doing
//! acquire+release pairs.

use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use crate::contention::run_for_throughput;
use crate::raw_lua::{channel_of, ACQUIRE_LUA, LEASE_MS, RELEASE_LUA};
use crate::server::raw_conn;

/// One raw lock name and field, with the acquire and release scripts (also
/// used by `interleaved`).
pub(crate) struct RawLock {
    key: String,
    chan: String,
    field: String,
    acquire: redis::Script,
    release: redis::Script,
}

impl RawLock {
    pub(crate) fn new(key: String, field: String) -> RawLock {
        RawLock {
            chan: channel_of(&key),
            key,
            field,
            acquire: redis::Script::new(ACQUIRE_LUA),
            release: redis::Script::new(RELEASE_LUA),
        }
    }
    /// `None` = acquired, `Some(pttl)` = held by someone else.
    pub(crate) fn try_acquire(&self, con: &mut redis::Connection) -> Option<i64> {
        self.acquire
            .key(&self.key)
            .arg(LEASE_MS)
            .arg(&self.field)
            .invoke(con)
            .expect("raw acquire EVALSHA")
    }
    pub(crate) fn release(&self, con: &mut redis::Connection) -> Option<i64> {
        self.release
            .key(&self.key)
            .key(&self.chan)
            .arg(0)
            .arg(LEASE_MS)
            .arg(&self.field)
            .invoke(con)
            .expect("raw release EVALSHA")
    }
}

/// Returns (acquire EVALSHA, release EVALSHA, the pair), from the same
/// iterations.
pub(crate) fn acquire_release(
    url: &str,
    prefix: &str,
    n: usize,
) -> (Vec<Duration>, Vec<Duration>, Vec<Duration>) {
    let mut con = raw_conn(url);
    let l = RawLock::new(format!("{prefix}:raw:solo"), "raw-client:1".into());
    let (mut acq, mut rel, mut pair) = (
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    );
    for i in 0..n + n / 10 {
        let t0 = Instant::now();
        let r = l.try_acquire(&mut con);
        let t1 = Instant::now();
        assert_eq!(r, None, "raw acquire of a free lock failed");
        let r = l.release(&mut con);
        let t2 = Instant::now();
        assert_eq!(r, Some(1), "raw release did not delete");
        if i >= n / 10 {
            acq.push(t1 - t0);
            rel.push(t2 - t1);
            pair.push(t2 - t0);
        }
    }
    (acq, rel, pair)
}

/// PUBLISH -> delivery to a subscriber blocked in `get_message` on another
/// thread.
pub(crate) fn publish_delivery(url: &str, prefix: &str, n: usize) -> Vec<Duration> {
    let chan = format!("{prefix}:raw:pubsub");
    let (ready_tx, ready_rx) = mpsc::channel::<()>();
    let (got_tx, got_rx) = mpsc::channel::<Instant>();
    let sub = {
        let url = url.to_string();
        let chan = chan.clone();
        thread::spawn(move || {
            let mut con = raw_conn(&url);
            let mut ps = con.as_pubsub();
            ps.subscribe(&chan).expect("SUBSCRIBE");
            ready_tx.send(()).unwrap();
            loop {
                let msg = ps.get_message().expect("get_message");
                let now = Instant::now();
                if msg.get_payload_bytes() == b"stop" {
                    break;
                }
                got_tx.send(now).unwrap();
            }
        })
    };
    ready_rx.recv().unwrap();
    let mut con = raw_conn(url);
    let mut out = Vec::with_capacity(n);
    for i in 0..n + n / 10 {
        let t0 = Instant::now();
        let receivers: i64 = redis::cmd("PUBLISH")
            .arg(&chan)
            .arg("0")
            .query(&mut con)
            .expect("PUBLISH");
        debug_assert_eq!(receivers, 1);
        let t1 = got_rx.recv().unwrap();
        if i >= n / 10 {
            out.push(t1 - t0);
        }
    }
    let _: i64 = redis::cmd("PUBLISH")
        .arg(&chan)
        .arg("stop")
        .query(&mut con)
        .unwrap();
    sub.join().unwrap();
    out
}

/// The best a client could do with this protocol (the "ideal client"): the
/// waiter has its own connection subscribed to the lock's channel and is
/// blocked in `get_message` on it; the holder runs the release script (which
/// deletes and publishes); the waiter wakes and runs the acquire script.
/// The holder wakes the waiter, waits `idle` (the waiter fails its first
/// attempt and sits parked on its subscription), then releases. Measured
/// from just before the release to the waiter's acquire reply.
/// Returns (handoff latencies, the holder's release call durations).
pub(crate) fn handoff_direct(
    url: &str,
    prefix: &str,
    n: usize,
    idle: Duration,
) -> (Vec<Duration>, Vec<Duration>) {
    let key = format!("{prefix}:raw:handoff:{}us", idle.as_micros());
    let (go_tx, go_rx) = mpsc::channel::<bool>();
    let (done_tx, done_rx) = mpsc::channel::<Instant>();
    let (ready_tx, ready_rx) = mpsc::channel::<()>();
    let waiter = {
        let url = url.to_string();
        let key = key.clone();
        thread::spawn(move || {
            let l = RawLock::new(key, "raw-client:2".into());
            let mut cmd = raw_conn(&url);
            let mut subcon = raw_conn(&url);
            let mut ps = subcon.as_pubsub();
            ps.subscribe(&l.chan).expect("SUBSCRIBE");
            ready_tx.send(()).unwrap();
            while go_rx.recv().unwrap() {
                // Contend: first attempt fails, then wait for the unlock message.
                while l.try_acquire(&mut cmd).is_some() {
                    let _ = ps.get_message().expect("get_message");
                }
                let acquired = Instant::now();
                assert_eq!(l.release(&mut cmd), Some(1));
                // Swallow the notification of our own release.
                let _ = ps.get_message().expect("get_message");
                done_tx.send(acquired).unwrap();
            }
        })
    };
    ready_rx.recv().unwrap();
    let l = RawLock::new(key, "raw-client:1".into());
    let mut con = raw_conn(url);
    let mut out = Vec::with_capacity(n);
    let mut release_calls = Vec::with_capacity(n);
    for i in 0..n + n / 10 {
        assert_eq!(l.try_acquire(&mut con), None);
        go_tx.send(true).unwrap();
        thread::sleep(idle);
        let t0 = Instant::now();
        assert_eq!(l.release(&mut con), Some(1));
        let released = t0.elapsed();
        let acquired = done_rx.recv().unwrap();
        if i >= n / 10 {
            out.push(acquired.saturating_duration_since(t0));
            release_calls.push(released);
        }
    }
    go_tx.send(false).unwrap();
    waiter.join().unwrap();
    (out, release_calls)
}

/// `threads` threads, each on its own connection and its own key, doing
/// acquire+release pairs; returns pairs per second.
pub(crate) fn threads(url: &str, prefix: &str, threads: usize) -> f64 {
    run_for_throughput(threads, |i, stop, count| {
        let mut con = raw_conn(url);
        let l = RawLock::new(format!("{prefix}:raw:mt:{i}"), format!("raw-client:{i}"));
        while !stop.load(Ordering::Relaxed) {
            assert_eq!(l.try_acquire(&mut con), None);
            assert_eq!(l.release(&mut con), Some(1));
            count.fetch_add(1, Ordering::Relaxed);
        }
    })
}
