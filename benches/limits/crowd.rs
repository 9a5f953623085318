//! A thousand callers on one name: how fast the lock goes round when every
//! one of them is already waiting.
//!
//! A holder takes the lock; `CROWD` acquires start on the same client
//! (async: `lock_async()` futures, each a task, on the executor at hand;
//! blocking: one thread each in `lock()`); once the client counts them
//! all parked (`Stats::parked_waiters`, at most `PARK_WAIT`), the holder
//! releases. Each caller notes the instant it got the lock and releases at
//! once (an async guard's drop queues the release; a blocking drop waits
//! for it). Sorted, those instants give one gap per hand-over (the first
//! from the holder's release): the samples. The run's total is from the
//! holder's release to the last acquisition.
//!
//! Under the plain `block_on` the thousand futures are joined on one
//! thread (`JoinAll`): a thousand tasks, one thread. Every future is
//! created (and so its call started) before the holder waits, and polled
//! once, so that each has a waker before the lock moves.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Barrier};
use std::task::{Context, Poll};
use std::thread;
use std::time::{Duration, Instant};

use redhold::Client;

use crate::executors::{Exec, JoinAll, Spawner, Task};

/// Callers per run.
pub(crate) const CROWD: usize = 1000;
/// How long the holder waits for them all to park.
const PARK_WAIT: Duration = Duration::from_secs(30);
/// A blocking caller's stack: `lock()` needs little.
const STACK: usize = 256 * 1024;

/// The runs of one executor (or of the blocking API).
#[derive(Default)]
pub(crate) struct Crowd {
    /// Acquisition to acquisition, every hand-over of every run.
    pub(crate) gaps: Vec<Duration>,
    /// Release of the holder to the last acquisition, per run.
    pub(crate) totals: Vec<Duration>,
    /// Runs in which not all callers were parked when the holder released.
    pub(crate) short_runs: usize,
}

impl Crowd {
    fn add(&mut self, released: Instant, mut got: Vec<Instant>, all_parked: bool) {
        got.sort();
        let mut prev = released;
        for at in &got {
            self.gaps.push(at.saturating_duration_since(prev));
            prev = *at;
        }
        self.totals.push(prev.saturating_duration_since(released));
        self.short_runs += usize::from(!all_parked);
    }
}

/// One run of `CROWD` async callers on `exec`.
pub(crate) fn run_async(exec: &Exec, client: &Client, name: &str, into: &mut Crowd) {
    let (client, name) = (client.clone(), name.to_owned());
    let (released, got, all_parked) = exec.run(move |sp| async move {
        let lock = client.lock(name);
        let holder = lock.lock_async().await.expect("holder lock_async()");
        let base = client.stats().parked_waiters;
        let tasks: Vec<Task<Instant>> = (0..CROWD)
            .map(|_| {
                let call = lock.lock_async();
                Box::pin(async move {
                    let g = call.await.expect("lock_async()");
                    let at = Instant::now();
                    drop(g);
                    at
                }) as Task<Instant>
            })
            .collect();
        match &sp {
            Spawner::Tokio(h) => {
                let handles: Vec<_> = tasks.into_iter().map(|t| h.spawn(t)).collect();
                let all_parked =
                    wait_parked(&client, base, || sp.sleep(Duration::from_millis(1))).await;
                let released = Instant::now();
                drop(holder);
                let mut got = Vec::with_capacity(CROWD);
                for h in handles {
                    got.push(h.await.expect("a task panicked"));
                }
                (released, got, all_parked)
            }
            Spawner::Threads => {
                let mut all = JoinAll::new(tasks);
                PollOnce(&mut all).await;
                let all_parked =
                    wait_parked(&client, base, || sp.sleep(Duration::from_millis(1))).await;
                let released = Instant::now();
                drop(holder);
                (released, all.await, all_parked)
            }
        }
    });
    into.add(released, got, all_parked);
}

/// One run of `CROWD` threads in the blocking `lock()`.
pub(crate) fn run_blocking(client: &Client, name: &str, into: &mut Crowd) {
    let lock = client.lock(name);
    let holder = lock.lock().expect("holder lock()");
    let base = client.stats().parked_waiters;
    let started = Arc::new(Barrier::new(CROWD + 1));
    let threads: Vec<_> = (0..CROWD)
        .map(|_| {
            let (lock, started) = (client.lock(name), Arc::clone(&started));
            thread::Builder::new()
                .stack_size(STACK)
                .spawn(move || {
                    started.wait();
                    let g = lock.lock().expect("lock()");
                    let at = Instant::now();
                    drop(g);
                    at
                })
                .expect("spawn a caller thread")
        })
        .collect();
    started.wait();
    let all_parked = crate::executors::block_on(wait_parked(client, base, || async {
        thread::sleep(Duration::from_millis(1))
    }));
    let released = Instant::now();
    drop(holder);
    let got = threads
        .into_iter()
        .map(|t| t.join().expect("a caller panicked"))
        .collect();
    into.add(released, got, all_parked);
}

/// Waits until `client` counts `CROWD` more parked waiters than `base`;
/// `false` when `PARK_WAIT` ran out first.
async fn wait_parked<F: Future<Output = ()>>(
    client: &Client,
    base: usize,
    mut pause: impl FnMut() -> F,
) -> bool {
    let deadline = Instant::now() + PARK_WAIT;
    while client.stats().parked_waiters < base + CROWD {
        if Instant::now() > deadline {
            return false;
        }
        pause().await;
    }
    true
}

/// Polls a future once, so that it has handed out its wakers.
struct PollOnce<'a, F>(&'a mut F);

impl<F: Future + Unpin> Future for PollOnce<'_, F> {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        // A future that ends in its first poll is not polled again: none
        // of these can end before the holder releases.
        let _ = Pin::new(&mut *self.0).poll(cx);
        Poll::Ready(())
    }
}
