//! Parked tasks cost no thread: 10,000 tasks of a tokio runtime wait for
//! 1,000 locks that another client holds. While they wait, the process
//! runs no more threads than before they came (the clients' fixed threads,
//! the waiting client's I/O pool and timer, the runtime's workers), burns
//! under 1 % of a core, and the waiting client keeps no more connections
//! than its pool and its pub/sub connection need; once the names are
//! released, every task gets its lock. The numbers are printed
//! (`--nocapture`).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use crate::no_sockets::warm_up;
use crate::process::{process_cpu, thread_census, threads, threads_cpu};
use crate::redis_side::{connections, own_user};
use crate::support::RedisServer;

const TASKS: usize = 10_000;
const NAMES: usize = 1_000;
/// The waiting client's I/O pool (the default).
const IO_THREADS: usize = 4;
/// How long the CPU is watched while every task waits.
const WINDOW: Duration = Duration::from_secs(3);
/// The share of one core the waiting may use.
const CPU_SHARE: f64 = 0.01;
/// How long parking them all, and then serving them all, may take: far
/// more than either takes (seconds), less than the locks' TTL (30 s), so
/// that no task gets a lock by an expiry.
const BOUND: Duration = Duration::from_secs(25);

#[test]
fn ten_thousand_parked_tasks_cost_no_thread_no_cpu_and_no_connection() {
    let _turn = crate::serial();
    let server = RedisServer::start();
    let holder = server.client();
    // Its own ACL user, so that its connections can be told apart.
    let client = server
        .builder()
        .url(own_user(&server, "waiting"))
        .async_threads(IO_THREADS)
        .build()
        .expect("the waiting client");
    warm_up(&client);
    drop(holder.lock("warm-up").lock().expect("the holder's warm-up"));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .expect("a tokio runtime");
    // Every thread started and named (a thread names itself once it runs).
    thread::sleep(Duration::from_millis(50));
    let before = threads().len();
    let census_before = thread_census();

    let names: Vec<String> = (0..NAMES).map(|n| format!("parked:{n}")).collect();
    let held: Vec<_> = names
        .iter()
        .map(|name| {
            holder
                .lock(name.as_str())
                .lock()
                .expect("the holder's lock")
        })
        .collect();

    let done = Arc::new(AtomicUsize::new(0));
    let spawned = Instant::now();
    let tasks: Vec<_> = (0..TASKS)
        .map(|n| {
            let lock = client.lock(names[n % NAMES].as_str());
            let done = Arc::clone(&done);
            runtime.spawn(async move {
                let guard = lock.lock_async().await.expect("a parked task's lock");
                done.fetch_add(1, Ordering::Relaxed);
                drop(guard);
            })
        })
        .collect();
    wait_for(BOUND, "every task to park", || {
        client.stats().parked_waiters == TASKS
    });
    let parked_in = spawned.elapsed();
    assert_eq!(done.load(Ordering::Relaxed), 0, "a task took a held lock");

    // Settled: every task waits. Look at threads, CPU and connections.
    thread::sleep(Duration::from_millis(200));
    let during = threads().len();
    let census_during = thread_census();
    let stats = client.stats();
    let (cpu, cpu_precise) = (process_cpu(), threads_cpu());
    let watched = Instant::now();
    thread::sleep(WINDOW);
    let window = watched.elapsed();
    let (cpu, cpu_precise) = (process_cpu() - cpu, threads_cpu() - cpu_precise);
    let cons = connections(&server, "waiting");
    let still_parked = client.stats().parked_waiters;

    let released = Instant::now();
    drop(held);
    let released_in = released.elapsed();
    wait_for(BOUND, "every task to get its lock", || {
        done.load(Ordering::Relaxed) == TASKS
    });
    let served_in = released.elapsed();
    runtime.block_on(async {
        for task in tasks {
            task.await.expect("a parked task");
        }
    });

    let share = cpu_precise.as_secs_f64() / window.as_secs_f64();
    let report = format!(
        "parked tasks: {TASKS} tasks on {NAMES} names parked in {parked_in:.2?}; \
         threads {before} before, {during} while they waited ({census_during}); \
         CPU over {window:.2?}: {cpu_precise:.2?} ({:.2} % of a core; {cpu:?} by /proc/self/stat); \
         the waiting client's connections: {} command, {} pub/sub ({} async threads); \
         the 1,000 releases took {released_in:.2?}, every task had its lock {served_in:.2?} after the first",
        share * 100.0,
        cons.commands,
        cons.pubsub,
        stats.async_threads
    );
    eprintln!("{report}");
    assert_eq!(
        still_parked, TASKS,
        "tasks stopped waiting meanwhile\n{report}"
    );
    assert!(
        during <= before,
        "threads came with the tasks: before {census_before}\n{report}"
    );
    let io_threads = threads()
        .iter()
        .filter(|t| t.name.starts_with("redhold-io-"))
        .count();
    assert_eq!(
        io_threads, IO_THREADS,
        "the I/O pool is not the size it was given\n{report}"
    );
    assert!(share < CPU_SHARE, "waiting burns CPU\n{report}");
    let ticks = Duration::from_millis(20);
    assert!(
        cpu <= window.mul_f64(CPU_SHARE) + ticks,
        "waiting burns CPU by /proc/self/stat\n{report}"
    );
    // One command connection per I/O thread, and one more for a call of
    // the client's other threads (the watchdog's, a release's).
    assert!(
        cons.commands <= IO_THREADS + 1 && cons.pubsub <= 1,
        "connections grew with the tasks\n{report}"
    );
    client.shutdown().expect("shutdown");
    holder.shutdown().expect("the holder's shutdown");
}

/// Waits until `done` holds, at most `limit`.
fn wait_for(limit: Duration, what: &str, mut done: impl FnMut() -> bool) {
    let started = Instant::now();
    while !done() {
        assert!(started.elapsed() < limit, "waited {limit:?} for {what}");
        thread::sleep(Duration::from_millis(10));
    }
}
