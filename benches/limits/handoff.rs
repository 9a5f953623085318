//! Handoff: how soon a waiter holds the lock after the holder releases it.
//!
//! Warm: the waiter is already parked in `lock()` (its channel subscribed),
//! so the handoff is release + unlock message + acquire, compared with the
//! raw release + PUBLISH delivery + acquire. Cold: a fresh name each time,
//! so the waiter's `lock()` has to SUBSCRIBE first; that is the case a
//! polling-free client pays for once per name.

use std::sync::{mpsc, Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use redhold::Client;

use crate::common::take_release_instant;
use crate::raw_lua::channel_of;
use crate::server::raw_conn;

/// How long the holder waits after waking the waiter, so that the waiter
/// fails its first attempt, subscribes and parks (warm and raw handoff):
/// the waiter's short idle time.
pub(crate) const WARM_PARK: Duration = Duration::from_millis(1);
/// The waiter's long idle time (`idle`): parked this long before the
/// release.
pub(crate) const LONG_PARK: Duration = Duration::from_millis(20);
/// Cold handoffs are slow to set up; at most this many samples.
const COLD_MAX_SAMPLES: usize = 3000;

/// Waiter already parked in `lock()` on `waiter`'s client (the holder's own
/// client, or a second one: that is what another process looks like); the
/// holder wakes it, waits `idle` (the waiter fails its first attempt,
/// subscribes and parks), stores `Instant::now()` in a shared slot just
/// before dropping its guard; the sample is the time from that instant until
/// the waiter's `lock()` returns.
/// Returns (handoff latencies, the holder's guard-drop durations).
pub(crate) fn warm(
    holder: &Client,
    waiter: &Client,
    name: &str,
    n: usize,
    idle: Duration,
) -> (Vec<Duration>, Vec<Duration>) {
    let released_at: Arc<Mutex<Option<Instant>>> = Arc::new(Mutex::new(None));
    let (go_tx, go_rx) = mpsc::channel::<bool>();
    let (done_tx, done_rx) = mpsc::channel::<Duration>();
    let waiter = {
        let lock = waiter.lock(name);
        let released_at = released_at.clone();
        thread::spawn(move || {
            while go_rx.recv().unwrap() {
                let g = lock.lock().expect("waiter lock()");
                let now = Instant::now();
                let t0 = take_release_instant(&released_at);
                drop(g);
                done_tx.send(now - t0).unwrap();
            }
        })
    };
    let lock = holder.lock(name);
    let mut out = Vec::with_capacity(n);
    let mut drops = Vec::with_capacity(n);
    for i in 0..n + n / 10 {
        let g = lock.lock().expect("holder lock()");
        go_tx.send(true).unwrap();
        thread::sleep(idle); // let the waiter fail, subscribe and park
        let t0 = Instant::now();
        *released_at.lock().unwrap() = Some(t0);
        drop(g);
        let dropped = t0.elapsed();
        let lat = done_rx.recv().unwrap();
        if i >= n / 10 {
            out.push(lat);
            drops.push(dropped);
        }
    }
    go_tx.send(false).unwrap();
    waiter.join().unwrap();
    (out, drops)
}

pub(crate) struct Cold {
    pub(crate) release_to_acquired: Vec<Duration>,
    pub(crate) call_to_acquired: Vec<Duration>,
    pub(crate) timeouts: usize,
}

/// A fresh lock name each iteration, so the waiter's channel is not yet
/// subscribed. The holder takes the lock, the waiter calls `lock()`, the
/// holder releases as soon as the waiter's SUBSCRIBE is visible on the server
/// (`PUBSUB NUMSUB`, polled; capped at 20 ms). Records release -> acquired
/// and the waiter's `lock()` call -> acquired (which includes the SUBSCRIBE).
/// Takes `samples` samples, at most `COLD_MAX_SAMPLES`.
pub(crate) fn cold(client: &Client, url: &str, prefix: &str, samples: usize) -> Cold {
    let n = samples.min(COLD_MAX_SAMPLES);
    eprintln!("lib: cold handoff x {n} (fresh name each)");
    let released_at: Arc<Mutex<Option<Instant>>> = Arc::new(Mutex::new(None));
    let (go_tx, go_rx) = mpsc::channel::<Option<String>>();
    let (done_tx, done_rx) = mpsc::channel::<(Duration, Duration)>();
    let waiter = {
        let client = client.clone();
        let released_at = released_at.clone();
        thread::spawn(move || {
            while let Some(name) = go_rx.recv().unwrap() {
                let lock = client.lock(name);
                let called = Instant::now();
                let g = lock.lock().expect("waiter lock()");
                let now = Instant::now();
                let t0 = take_release_instant(&released_at);
                drop(g);
                done_tx.send((now - t0, now - called)).unwrap();
            }
        })
    };
    let mut con = raw_conn(url);
    let mut out = Cold {
        release_to_acquired: Vec::with_capacity(n),
        call_to_acquired: Vec::with_capacity(n),
        timeouts: 0,
    };
    let warm = n / 10;
    for i in 0..n + warm {
        let name = format!("{prefix}:lib:cold:{i}");
        let chan = channel_of(&name);
        let lock = client.lock(name.clone());
        let g = lock.lock().expect("holder lock()");
        go_tx.send(Some(name)).unwrap();
        let deadline = Instant::now() + Duration::from_millis(20);
        loop {
            let (_, subs): (String, i64) = redis::cmd("PUBSUB")
                .arg("NUMSUB")
                .arg(&chan)
                .query::<(String, i64)>(&mut con)
                .expect("PUBSUB NUMSUB");
            if subs > 0 {
                break;
            }
            if Instant::now() > deadline {
                if i >= warm {
                    out.timeouts += 1;
                }
                break;
            }
        }
        *released_at.lock().unwrap() = Some(Instant::now());
        drop(g);
        let (rel, call) = done_rx.recv().unwrap();
        if i >= warm {
            out.release_to_acquired.push(rel);
            out.call_to_acquired.push(call);
        }
    }
    go_tx.send(None).unwrap();
    waiter.join().unwrap();
    out
}
