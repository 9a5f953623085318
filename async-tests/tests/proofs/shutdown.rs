//! Shutting down from async code: `Client::shutdown_async` on a
//! current-thread runtime while 60 tasks of that runtime wait (for locks
//! another client holds, for an exhausted semaphore, for a closed latch).
//! Every task ends with `Error::Shutdown`, the shutdown's future reports
//! `Ok`, a task that ticks every millisecond stays on time meanwhile (the
//! shutdown runs on a thread of its own), and the client leaves nothing
//! behind.
//!
//! The runtime's thread is not filtered here (`no_sockets.rs`): the
//! shutdown's thread is started from it, and would inherit the filter.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use redhold::Error;

use crate::no_sockets::warm_up;
use crate::redis_side::traces;
use crate::support::RedisServer;

/// Waiting tasks of each sort.
const EACH: usize = 20;
/// How long the tasks may take to end after the shutdown, and the worst
/// tick allowed meanwhile (as in `never_blocked.rs`).
const BOUND: Duration = Duration::from_secs(10);
const WORST: Duration = Duration::from_millis(500);

#[test]
fn shutdown_async_ends_every_waiting_task_without_blocking_the_executor() {
    let _turn = crate::serial();
    let server = RedisServer::start();
    let holder = server.client();
    let client = server.client();
    warm_up(&client);
    let held: Vec<_> = (0..EACH)
        .map(|n| {
            holder
                .lock(format!("shut:{n}"))
                .lock()
                .expect("the holder's lock")
        })
        .collect();
    let semaphore = holder.semaphore("shut:semaphore");
    assert!(semaphore.try_set_permits(1).expect("try_set_permits"));
    let permit = semaphore.acquire().expect("the holder's permit");
    assert!(holder
        .count_down_latch("shut:latch")
        .try_set_count(1)
        .expect("try_set_count"));

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a tokio runtime");
    let ticks = Arc::new(Mutex::new(Vec::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let (shutdown_took, ended_in, outcomes) = runtime.block_on(async {
        let ticker = tokio::spawn(tick(Arc::clone(&ticks), Arc::clone(&stop)));
        let mut tasks = Vec::new();
        for n in 0..EACH {
            let lock = client.lock(format!("shut:{n}"));
            tasks.push(tokio::spawn(
                async move { lock.lock_async().await.map(drop) },
            ));
            let semaphore = client.semaphore("shut:semaphore");
            tasks.push(tokio::spawn(async move {
                semaphore.acquire_async().await.map(drop)
            }));
            let latch = client.count_down_latch("shut:latch");
            tasks.push(tokio::spawn(
                async move { latch.wait_async().await.map(drop) },
            ));
        }
        let waited = Instant::now();
        while client.stats().parked_waiters < 3 * EACH {
            assert!(
                waited.elapsed() < BOUND,
                "never parked: {:?}",
                client.stats()
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let started = Instant::now();
        client.shutdown_async().await.expect("shutdown_async");
        let shutdown_took = started.elapsed();
        let mut outcomes = Vec::new();
        for task in tasks {
            let outcome = tokio::time::timeout(BOUND, task).await;
            outcomes.push(outcome.expect("a task ended").expect("a task"));
        }
        let ended_in = started.elapsed();
        stop.store(true, Ordering::Relaxed);
        ticker.await.expect("the ticker");
        (shutdown_took, ended_in, outcomes)
    });
    drop(runtime);

    let ticks = ticks.lock().unwrap();
    let worst = ticks
        .iter()
        .map(|(_, late)| *late)
        .max()
        .unwrap_or_default();
    let late = ticks
        .iter()
        .filter(|(_, late)| *late > Duration::from_millis(5))
        .count();
    let shut_down = outcomes
        .iter()
        .filter(|o| matches!(o, Err(Error::Shutdown)))
        .count();
    let report = format!(
        "shutdown_async: {} waiting tasks, shutdown_async returned in {shutdown_took:.2?}, \
         every task had ended {ended_in:.2?} after it began ({shut_down} with Error::Shutdown); \
         {} ticks, worst {worst:.2?} late, {late} later than 5 ms",
        outcomes.len(),
        ticks.len()
    );
    eprintln!("{report}");
    let others: Vec<_> = outcomes
        .iter()
        .filter(|o| !matches!(o, Err(Error::Shutdown)))
        .collect();
    assert!(
        others.is_empty(),
        "tasks that did not end with Shutdown: {others:?}\n{report}"
    );
    assert!(worst < WORST, "the executor was blocked\n{report}");
    assert!(client.is_shut_down());
    let left = traces(&server, &client);
    assert!(
        left.is_empty(),
        "the client left traces: {left:?}\n{report}"
    );
    // The holder's holds are untouched.
    assert!(server.exists("shut:0"));
    drop((held, permit));
    holder.shutdown().expect("the holder's shutdown");
}

/// Asks for a tick every millisecond and records how late each came,
/// until told to stop.
async fn tick(ticks: Arc<Mutex<Vec<(Instant, Duration)>>>, stop: Arc<AtomicBool>) {
    let mut seen = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        let due = Instant::now() + Duration::from_millis(1);
        tokio::time::sleep_until(due.into()).await;
        seen.push((due, Instant::now().saturating_duration_since(due)));
    }
    ticks.lock().unwrap().extend(seen);
}
