//! Criterion benches for redhold (`cargo bench --bench lock`; HTML reports
//! under `target/criterion/`).
//!
//! - `uncontended/lock+release`: `lock()` then drop the guard, one thread.
//! - `reentrant/acquire`: `lock()` while this thread already holds it (only
//!   the inner acquire is timed; the inner release is not).
//! - `try_lock/held_elsewhere`: `try_lock()` on a lock another thread holds.
//! - `handoff/warm`: the waiter is parked in `lock()`; time from the holder's
//!   drop to the waiter's `lock()` returning.
//! - `threads/16x16`: 16 threads on 16 names, one client; throughput in
//!   lock+release pairs.
//!
//! Uses `REDIS_URL` if set, else starts a private `redis-server`.

mod common;

use std::hint::black_box;
use std::sync::{mpsc, Arc, Barrier, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use common::{output_dir, run_prefix, take_release_instant, BenchServer};
use criterion::{Criterion, Throughput};
use redhold::Client;

fn main() {
    let server = BenchServer::from_env_or_spawn();
    let client = Client::open(server.url.as_str()).expect("redhold: Client::open");
    let prefix = run_prefix("lock");
    let mut c = Criterion::default()
        .output_directory(&output_dir("criterion"))
        .configure_from_args();

    uncontended(&mut c, &client, &prefix);
    reentrant(&mut c, &client, &prefix);
    try_lock_held(&mut c, &client, &prefix);
    warm_handoff(&mut c, &client, &prefix);
    threads_16x16(&mut c, &client, &prefix);

    c.final_summary();
    let _ = client.shutdown();
    drop(server);
}

fn uncontended(c: &mut Criterion, client: &Client, prefix: &str) {
    let lock = client.lock(format!("{prefix}:uncontended"));
    let mut g = c.benchmark_group("uncontended");
    g.bench_function("lock+release", |b| {
        b.iter(|| {
            let guard = lock.lock().expect("lock()");
            drop(black_box(guard));
        })
    });
    g.finish();
}

fn reentrant(c: &mut Criterion, client: &Client, prefix: &str) {
    let lock = client.lock(format!("{prefix}:reentrant"));
    let outer = lock.lock().expect("lock()");
    let mut g = c.benchmark_group("reentrant");
    g.bench_function("acquire", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let t0 = Instant::now();
                let inner = lock.lock().expect("reentrant lock()");
                total += t0.elapsed();
                drop(inner);
            }
            total
        })
    });
    g.finish();
    drop(outer);
}

fn try_lock_held(c: &mut Criterion, client: &Client, prefix: &str) {
    let name = format!("{prefix}:try_lock");
    let (held_tx, held_rx) = mpsc::channel::<()>();
    let (stop_tx, stop_rx) = mpsc::channel::<()>();
    let holder = {
        let lock = client.lock(name.clone());
        thread::spawn(move || {
            let guard = lock.lock().expect("holder lock()");
            held_tx.send(()).unwrap();
            let _ = stop_rx.recv();
            drop(guard);
        })
    };
    held_rx.recv().unwrap();
    let lock = client.lock(name);
    let mut g = c.benchmark_group("try_lock");
    g.bench_function("held_elsewhere", |b| {
        b.iter(|| {
            let r = lock.try_lock().expect("try_lock()");
            assert!(
                r.is_none(),
                "try_lock succeeded on a lock held by another thread"
            );
        })
    });
    g.finish();
    stop_tx.send(()).unwrap();
    holder.join().unwrap();
}

fn warm_handoff(c: &mut Criterion, client: &Client, prefix: &str) {
    let name = format!("{prefix}:handoff");
    let released_at: Arc<Mutex<Option<Instant>>> = Arc::new(Mutex::new(None));
    let (go_tx, go_rx) = mpsc::channel::<bool>();
    let (done_tx, done_rx) = mpsc::channel::<Duration>();
    let waiter = {
        let lock = client.lock(name.clone());
        let released_at = released_at.clone();
        thread::spawn(move || {
            while go_rx.recv().unwrap() {
                let guard = lock.lock().expect("waiter lock()");
                let now = Instant::now();
                let t0 = take_release_instant(&released_at);
                drop(guard);
                done_tx.send(now - t0).unwrap();
            }
        })
    };
    let lock = client.lock(name);
    let mut g = c.benchmark_group("handoff");
    // Each iteration also sleeps 1 ms (untimed) so the waiter is parked.
    g.sample_size(20);
    g.warm_up_time(Duration::from_millis(500));
    g.measurement_time(Duration::from_secs(2));
    g.bench_function("warm", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let guard = lock.lock().expect("holder lock()");
                go_tx.send(true).unwrap();
                thread::sleep(Duration::from_millis(1));
                *released_at.lock().unwrap() = Some(Instant::now());
                drop(guard);
                total += done_rx.recv().unwrap();
            }
            total
        })
    });
    g.finish();
    go_tx.send(false).unwrap();
    waiter.join().unwrap();
}

fn threads_16x16(c: &mut Criterion, client: &Client, prefix: &str) {
    const THREADS: usize = 16;
    let locks: Vec<_> = (0..THREADS)
        .map(|i| client.lock(format!("{prefix}:mt:{i}")))
        .collect();
    let mut g = c.benchmark_group("threads");
    g.throughput(Throughput::Elements(THREADS as u64));
    g.sample_size(20);
    g.measurement_time(Duration::from_secs(5));
    // One iteration = each of the 16 threads does one lock+release pair.
    g.bench_function("16x16", |b| {
        b.iter_custom(|iters| {
            let start = Barrier::new(THREADS + 1);
            thread::scope(|s| {
                for lock in &locks {
                    let start = &start;
                    s.spawn(move || {
                        start.wait();
                        for _ in 0..iters {
                            drop(lock.lock().expect("lock()"));
                        }
                    });
                }
                start.wait();
                // The scope joins all threads before returning, so this
                // instant's elapsed() covers every thread's pairs.
                Instant::now()
            })
            .elapsed()
        })
    });
    g.finish();
}
