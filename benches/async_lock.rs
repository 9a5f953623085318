//! Criterion benches of the async face (`cargo bench --bench async_lock`;
//! HTML reports under `target/criterion/`), to track regressions between
//! commits. The targets against the blocking API and the peers are
//! checked by `limits` (`benches/limits/async_face.rs`), which alternates
//! the figures round by round.
//!
//! - `async_uncontended/<executor>`: `lock_async().await` +
//!   `unlock_async().await` of a free lock; `blocking` is `lock()` + drop in
//!   the same group.
//! - `async_handoff/<executor>`: a task parked in `lock_async()` gets the
//!   lock from a task of the same client (the holder idles 1 ms first,
//!   untimed); `blocking` is two threads in `lock()`, as `lock.rs`'
//!   `handoff/warm`.
//!
//! `<executor>`: `tokio_mt` (tokio multi-thread), `tokio_ct` (tokio
//! current-thread), `block_on` (a thread-parking `block_on`, no runtime).
//! Uses `REDIS_URL` if set, else starts a private `redis-server`.

mod common;
#[path = "limits/executors.rs"]
#[allow(dead_code)]
mod executors;

use std::sync::{mpsc, Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use common::{output_dir, run_prefix, take_release_instant, BenchServer};
use criterion::Criterion;
use executors::Exec;
use redhold::Client;
use tokio::sync::mpsc::unbounded_channel;

const IDLE: Duration = Duration::from_millis(1);

fn main() {
    let server = BenchServer::from_env_or_spawn();
    let client = Client::open(server.url.as_str()).expect("redhold: Client::open");
    let prefix = run_prefix("async_lock");
    let mut c = Criterion::default()
        .output_directory(&output_dir("criterion"))
        .configure_from_args();
    let execs = Exec::all();

    let mut g = c.benchmark_group("async_uncontended");
    let lock = client.lock(format!("{prefix}:uncontended:blocking"));
    g.bench_function("blocking", |b| {
        b.iter(|| drop(lock.lock().expect("lock()")))
    });
    for exec in &execs {
        let lock = client.lock(format!("{prefix}:uncontended:{}", exec.key()));
        g.bench_function(exec.key(), |b| {
            b.iter_custom(|iters| {
                let lock = lock.clone();
                exec.run(move |_| async move {
                    let t0 = Instant::now();
                    for _ in 0..iters {
                        let g = lock.lock_async().await.expect("lock_async()");
                        g.unlock_async().await.expect("unlock_async()");
                    }
                    t0.elapsed()
                })
            })
        });
    }
    g.finish();

    let mut g = c.benchmark_group("async_handoff");
    g.sample_size(20);
    let name = format!("{prefix}:handoff:blocking");
    g.bench_function("blocking", |b| {
        b.iter_custom(|iters| blocking_handoffs(&client, &name, iters))
    });
    for exec in &execs {
        let name = format!("{prefix}:handoff:{}", exec.key());
        g.bench_function(exec.key(), |b| {
            b.iter_custom(|iters| async_handoffs(exec, &client, &name, iters))
        });
    }
    g.finish();

    c.final_summary();
    let _ = client.shutdown();
    drop(server);
}

/// The sum of `iters` warm hand-overs between two tasks of `client`.
fn async_handoffs(exec: &Exec, client: &Client, name: &str, iters: u64) -> Duration {
    let (client, name) = (client.clone(), name.to_owned());
    exec.run(move |sp| async move {
        let released_at: Arc<Mutex<Option<Instant>>> = Arc::default();
        let (go_tx, mut go_rx) = unbounded_channel::<bool>();
        let (done_tx, mut done_rx) = unbounded_channel::<Duration>();
        let waiting = {
            let (lock, released_at) = (client.lock(name.as_str()), Arc::clone(&released_at));
            sp.spawn(async move {
                while go_rx.recv().await == Some(true) {
                    let g = lock.lock_async().await.expect("lock_async()");
                    let lat = take_release_instant(&released_at).elapsed();
                    g.unlock_async().await.expect("unlock_async()");
                    done_tx.send(lat).expect("holder gone");
                }
            })
        };
        let lock = client.lock(name.as_str());
        let mut total = Duration::ZERO;
        for _ in 0..iters {
            let g = lock.lock_async().await.expect("lock_async()");
            go_tx.send(true).expect("waiter gone");
            sp.sleep(IDLE).await;
            *released_at.lock().unwrap() = Some(Instant::now());
            drop(g);
            total += done_rx.recv().await.expect("waiter gone");
        }
        go_tx.send(false).expect("waiter gone");
        waiting.await.expect("waiter panicked");
        total
    })
}

/// The sum of `iters` warm hand-overs between two threads of `client`.
fn blocking_handoffs(client: &Client, name: &str, iters: u64) -> Duration {
    let released_at: Arc<Mutex<Option<Instant>>> = Arc::default();
    let (go_tx, go_rx) = mpsc::channel::<bool>();
    let (done_tx, done_rx) = mpsc::channel::<Duration>();
    let waiting = {
        let (lock, released_at) = (client.lock(name), Arc::clone(&released_at));
        thread::spawn(move || {
            while go_rx.recv() == Ok(true) {
                let g = lock.lock().expect("lock()");
                let lat = take_release_instant(&released_at).elapsed();
                drop(g);
                done_tx.send(lat).expect("holder gone");
            }
        })
    };
    let lock = client.lock(name);
    let mut total = Duration::ZERO;
    for _ in 0..iters {
        let g = lock.lock().expect("lock()");
        go_tx.send(true).expect("waiter gone");
        thread::sleep(IDLE);
        *released_at.lock().unwrap() = Some(Instant::now());
        drop(g);
        total += done_rx.recv().expect("waiter gone");
    }
    go_tx.send(false).expect("waiter gone");
    waiting.join().expect("waiter panicked");
    total
}
