//! Exactness: 1,000 tasks of a multi-thread runtime each add one to a
//! counter in Redis (a GET and a SET of their own, from the task) under
//! one lock: the count is exact and no two were ever inside at once (a
//! flag set inside the critical section); the same with tasks and
//! threads (blocking `lock()`) of one client mixed; and with tasks that
//! take the lock as a member of a multi-lock, among tasks that take it
//! alone.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use redhold::{Client, MultiLock};

use crate::async_redis::Pool;
use crate::no_sockets::warm_up;
use crate::support::contention::increment;
use crate::support::RedisServer;

const TASKS: usize = 1_000;
/// How long a run may take: far more than it needs (a few seconds).
const LIMIT: Duration = Duration::from_secs(40);

#[test]
fn a_thousand_tasks_count_exactly_under_one_lock() {
    let _turn = crate::serial();
    let server = RedisServer::start();
    let client = server.client();
    warm_up(&client);
    let took = count(&server, &client, TASKS, 0);
    eprintln!("exactness: {TASKS} tasks counted to {TASKS} in {took:.2?}");
    client.shutdown().expect("shutdown");
}

#[test]
fn tasks_and_threads_of_one_client_count_exactly_under_one_lock() {
    let _turn = crate::serial();
    let server = RedisServer::start();
    let client = server.client();
    warm_up(&client);
    let took = count(&server, &client, TASKS / 2, 4);
    eprintln!(
        "exactness: {} tasks and 4 threads x {} counted to {TASKS} in {took:.2?}",
        TASKS / 2,
        TASKS / 8
    );
    client.shutdown().expect("shutdown");
}

#[test]
fn multi_lock_tasks_and_plain_tasks_sharing_a_member_count_exactly() {
    let _turn = crate::serial();
    let server = RedisServer::start();
    let client = server.client();
    warm_up(&client);
    const COUNTER: &str = "exact:multi:counter";
    let section = Arc::new(Section::default());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let started = Instant::now();
    runtime.block_on(async {
        let pool = Arc::new(Pool::new(server.port(), 8).await);
        let tasks: Vec<_> = (0..TASKS / 2)
            .map(|n| {
                let (section, pool) = (Arc::clone(&section), Arc::clone(&pool));
                // Every task takes "exact:shared"; one in two takes it
                // with one of two others, as a multi-lock.
                let plain = client.lock("exact:shared");
                let multi = MultiLock::new(vec![
                    client.lock(format!("exact:other:{}", n % 2)),
                    client.lock("exact:shared"),
                ]);
                tokio::spawn(async move {
                    let guard: Box<dyn Send> = if n % 2 == 0 {
                        Box::new(plain.lock_async().await.expect("a plain lock"))
                    } else {
                        Box::new(multi.lock_async().await.expect("a multi-lock"))
                    };
                    section.enter();
                    pool.increment(COUNTER).await;
                    section.leave();
                    drop(guard);
                })
            })
            .collect();
        let all = async {
            for task in tasks {
                task.await.expect("a counting task");
            }
        };
        tokio::time::timeout(LIMIT, all)
            .await
            .expect("the tasks finished in time");
    });
    let took = started.elapsed();
    let counted: u64 = server.cmd(&["GET", COUNTER]);
    eprintln!(
        "exactness: {} tasks, half of them through a multi-lock, counted to {counted} in {took:.2?}",
        TASKS / 2
    );
    assert_eq!(
        section.overlaps.load(Ordering::SeqCst),
        0,
        "two holders were inside at once"
    );
    assert_eq!(counted, (TASKS / 2) as u64, "updates were lost");
    client.shutdown().expect("shutdown");
}

#[test]
fn without_the_lock_the_check_sees_overlaps_and_lost_updates() {
    // The control: the check can fail. The same tasks, unlocked.
    let _turn = crate::serial();
    let server = RedisServer::start();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let section = Arc::new(Section::default());
    runtime.block_on(async {
        let pool = Arc::new(Pool::new(server.port(), 8).await);
        let tasks: Vec<_> = (0..200)
            .map(|_| {
                let (section, pool) = (Arc::clone(&section), Arc::clone(&pool));
                tokio::spawn(async move {
                    section.enter();
                    pool.increment("unlocked:counter").await;
                    section.leave();
                })
            })
            .collect();
        for task in tasks {
            task.await.expect("a task");
        }
    });
    let counted: u64 = server.cmd(&["GET", "unlocked:counter"]);
    let overlaps = section.overlaps.load(Ordering::SeqCst);
    eprintln!("exactness, unlocked: 200 tasks counted to {counted}, {overlaps} overlaps seen");
    assert!(
        overlaps > 0 && counted < 200,
        "the check saw nothing wrong: {counted}, {overlaps}"
    );
}

/// Whoever holds the lock is inside: a second one inside is an overlap.
#[derive(Default)]
struct Section {
    inside: AtomicBool,
    overlaps: AtomicUsize,
}

impl Section {
    fn enter(&self) {
        if self.inside.swap(true, Ordering::SeqCst) {
            self.overlaps.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn leave(&self) {
        self.inside.store(false, Ordering::SeqCst);
    }
}

/// `tasks` tasks and `threads` threads add up to `TASKS` ones under the
/// lock; returns how long it took.
fn count(server: &RedisServer, client: &Client, tasks: usize, threads: usize) -> Duration {
    const COUNTER: &str = "exact:counter";
    let section = Arc::new(Section::default());
    let lock = client.lock("exact:lock");
    let per_thread = (TASKS - tasks) / threads.max(1);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let started = Instant::now();
    let counting_threads: Vec<_> = (0..threads)
        .map(|n| {
            let (lock, section) = (lock.clone(), Arc::clone(&section));
            let mut con = server.connection();
            thread::Builder::new()
                .name(format!("counter-{n}"))
                .spawn(move || {
                    for _ in 0..per_thread {
                        let guard = lock.lock().expect("a thread's lock");
                        section.enter();
                        increment(&mut con, COUNTER);
                        section.leave();
                        guard.unlock().expect("a thread's unlock");
                    }
                })
                .expect("a counting thread")
        })
        .collect();
    let port = server.port();
    runtime.block_on(async {
        let pool = Arc::new(Pool::new(port, 8).await);
        let counting_tasks: Vec<_> = (0..tasks)
            .map(|n| {
                let (lock, section, pool) = (lock.clone(), Arc::clone(&section), Arc::clone(&pool));
                tokio::spawn(async move {
                    let guard = lock.lock_async().await.expect("a task's lock");
                    section.enter();
                    pool.increment(COUNTER).await;
                    section.leave();
                    if n % 2 == 0 {
                        drop(guard);
                    } else {
                        guard.unlock_async().await.expect("a task's unlock");
                    }
                })
            })
            .collect();
        let all = async {
            for task in counting_tasks {
                task.await.expect("a counting task");
            }
        };
        tokio::time::timeout(LIMIT, all)
            .await
            .expect("the tasks finished in time");
    });
    for thread in counting_threads {
        while !thread.is_finished() {
            assert!(
                started.elapsed() < LIMIT,
                "the threads did not finish in time"
            );
            thread::sleep(Duration::from_millis(10));
        }
        thread.join().expect("a counting thread");
    }
    let took = started.elapsed();
    let counted: u64 = server.cmd(&["GET", COUNTER]);
    assert_eq!(
        section.overlaps.load(Ordering::SeqCst),
        0,
        "two holders were inside at once"
    );
    assert_eq!(counted, TASKS as u64, "updates were lost");
    took
}
