//! The executor is never blocked: on a tokio current-thread runtime (one
//! OS thread for every task), a task that ticks every millisecond stays on
//! time while 100 tasks of the same runtime wait for, take and release
//! four contended locks: with the server answering, stalled (`DEBUG SLEEP
//! 2` from a side connection) and down (stopped, then started again).
//!
//! And no Redis I/O runs on that thread: it cannot touch a socket
//! (`no_sockets.rs`), so a Redis call in a poll, a waker or a guard's drop
//! would fail there and the tasks would take no lock; after the run, a
//! blocking call of the same client on that thread fails (the control:
//! the filter bites a real Redis call).
//!
//! The bound on lateness. The issue asks for no tick later than 5 ms. On
//! a shared two-core machine the OS alone delays a runnable thread by tens
//! of milliseconds now and then, so the test asserts what separates a
//! blocked executor from a free one whatever the noise: the worst tick is
//! far below one stall (2 s), and most ticks are on time (within 5 ms) in
//! every phase, the stall and the outage included, where a poll that
//! waited on Redis would make nearly every tick late. The numbers are
//! printed (`--nocapture`) for the record.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use redhold::Client;

use crate::no_sockets::{forbid_sockets, warm_up};
use crate::support::{server_version, RedisServer};

/// Tasks that contend, and the names they contend for.
const TASKS: usize = 100;
const NAMES: usize = 4;
/// The ticker's period, and what counts as on time.
const TICK: Duration = Duration::from_millis(1);
const ON_TIME: Duration = Duration::from_millis(5);
/// The stall: `DEBUG SLEEP 2`.
const STALL: Duration = Duration::from_secs(2);
/// The worst tick allowed: a quarter of the stall. A poll that waited for
/// the stalled server would be late by most of the stall.
const WORST: Duration = Duration::from_millis(500);
/// The share of ticks that must be on time in every phase.
const ON_TIME_SHARE: f64 = 0.9;

/// What the runtime's tasks share with the test.
#[derive(Default)]
struct Run {
    stop: AtomicBool,
    acquired: AtomicU64,
    errors: AtomicU64,
    /// Each tick: when it was due, and how late it came.
    ticks: Mutex<Vec<(Instant, Duration)>>,
}

#[test]
fn a_ticking_task_stays_on_time_and_the_executors_thread_sends_nothing() {
    let _turn = crate::serial();
    let mut server = RedisServer::start_with_args(server_version().debug_command_args());
    let client = server.client();
    warm_up(&client);
    let run = Arc::new(Run::default());
    let executor = thread::Builder::new()
        .name("executor".into())
        .spawn({
            let client = client.clone();
            let run = Arc::clone(&run);
            move || on_one_thread(client, run)
        })
        .expect("the executor's thread");

    let mut phases = Vec::new();
    let started = Instant::now();
    while run.acquired.load(Ordering::Relaxed) == 0 {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "no task took a lock"
        );
        thread::sleep(Duration::from_millis(5));
    }
    let mut phase = |name: &'static str, act: &mut dyn FnMut()| {
        let counts = || {
            (
                run.acquired.load(Ordering::Relaxed),
                run.errors.load(Ordering::Relaxed),
            )
        };
        let (from, (acquired, errors)) = (Instant::now(), counts());
        act();
        let (acquired_then, errors_then) = counts();
        phases.push(Phase {
            name,
            from,
            to: Instant::now(),
            acquired: acquired_then - acquired,
            errors: errors_then - errors,
        });
    };
    phase("contended", &mut || {
        thread::sleep(Duration::from_millis(1500))
    });
    phase("stalled", &mut || {
        server.cmd::<()>(&["DEBUG", "SLEEP", &STALL.as_secs_f64().to_string()]);
    });
    phase("after the stall", &mut || {
        thread::sleep(Duration::from_millis(500))
    });
    phase("down", &mut || {
        server.stop();
        thread::sleep(Duration::from_secs(1));
        server.start_again();
    });
    phase("after the restart", &mut || {
        thread::sleep(Duration::from_millis(2500))
    });
    run.stop.store(true, Ordering::Relaxed);
    let stopping = Instant::now();
    while !executor.is_finished() {
        assert!(
            stopping.elapsed() < Duration::from_secs(15),
            "the tasks did not end"
        );
        thread::sleep(Duration::from_millis(10));
    }
    let control = executor.join().expect("the executor's thread");

    let ticks = run.ticks.lock().unwrap();
    let mut report = vec![format!(
        "executor never blocked: {} acquisitions, {} errors (the outage's), {} ticks",
        run.acquired.load(Ordering::Relaxed),
        run.errors.load(Ordering::Relaxed),
        ticks.len()
    )];
    let mut failures = Vec::new();
    for phase in &phases {
        let late: Vec<Duration> = ticks
            .iter()
            .filter(|(due, _)| *due >= phase.from && *due < phase.to)
            .map(|(_, late)| *late)
            .collect();
        let stats = Lateness::of(late);
        report.push(format!(
            "  {:<18} {:>6.0} ms, {:>5} acquisitions, {:>2} errors, {stats}",
            phase.name,
            (phase.to - phase.from).as_secs_f64() * 1e3,
            phase.acquired,
            phase.errors
        ));
        if stats.count == 0 || stats.worst >= WORST || stats.on_time_share() < ON_TIME_SHARE {
            failures.push(format!("{}: {stats}", phase.name));
        }
    }
    report.push(format!(
        "  the control, a blocking try_lock on the executor's thread after the run: {control}"
    ));
    let report = report.join("\n");
    eprintln!("{report}");
    assert!(
        control.starts_with("Err"),
        "the control: a blocking call went through the filter\n{report}"
    );
    assert!(failures.is_empty(), "late ticks (worst must be < {WORST:?}, {:.0} % within {ON_TIME:?}): {failures:?}\n{report}", ON_TIME_SHARE * 100.0);
    for phase in &phases {
        if ["contended", "after the restart"].contains(&phase.name) {
            assert!(
                phase.acquired > 0,
                "no lock was taken while {}\n{report}",
                phase.name
            );
        }
    }
    // With the server up, no call fails: a Redis call on the executor's
    // thread would (the filter refuses it).
    assert_eq!(
        phases[0].errors, 0,
        "calls failed with the server up\n{report}"
    );
    client.shutdown().expect("shutdown");
}

/// The executor's thread, without sockets: a current-thread runtime (a
/// timer, no I/O driver) runs the ticker and the contending tasks; then
/// the control, whose outcome it returns.
fn on_one_thread(client: Client, run: Arc<Run>) -> String {
    forbid_sockets();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a tokio runtime");
    runtime.block_on(async {
        let ticker = tokio::spawn(ticker(Arc::clone(&run)));
        let tasks: Vec<_> = (0..TASKS)
            .map(|n| tokio::spawn(contend(client.clone(), n, Arc::clone(&run))))
            .collect();
        for task in tasks {
            task.await.expect("a contending task");
        }
        ticker.await.expect("the ticker");
    });
    drop(runtime);
    format!(
        "{:?}",
        client
            .lock("never:control")
            .try_lock()
            .map(|taken| taken.is_some())
    )
}

/// Asks for a tick every millisecond and records how late each came.
async fn ticker(run: Arc<Run>) {
    let mut ticks = Vec::with_capacity(20_000);
    while !run.stop.load(Ordering::Relaxed) {
        let due = Instant::now() + TICK;
        tokio::time::sleep_until(due.into()).await;
        ticks.push((due, Instant::now().saturating_duration_since(due)));
    }
    run.ticks.lock().unwrap().extend(ticks);
}

/// One of the contending tasks: takes one of the names, holds it a
/// millisecond across an await, releases it (a drop, `unlock_async`, or a
/// bounded wait's guard), until told to stop.
async fn contend(client: Client, n: usize, run: Arc<Run>) {
    let lock = client.lock(format!("never:{}", n % NAMES));
    let mut round = n;
    while !run.stop.load(Ordering::Relaxed) {
        round += 1;
        let taken = match round % 3 {
            0 => lock.try_lock_for_async(Duration::from_millis(100)).await,
            _ => lock.lock_async().await.map(Some),
        };
        match taken {
            Ok(Some(guard)) => {
                run.acquired.fetch_add(1, Ordering::Relaxed);
                tokio::time::sleep(TICK).await;
                if round.is_multiple_of(2) {
                    // Refused while the server is down: counted, not fatal.
                    if guard.unlock_async().await.is_err() {
                        run.errors.fetch_add(1, Ordering::Relaxed);
                    }
                } else {
                    drop(guard);
                }
            }
            Ok(None) => {}
            Err(_) => {
                run.errors.fetch_add(1, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }
}

/// One phase of the run, and what the tasks did meanwhile.
struct Phase {
    name: &'static str,
    from: Instant,
    to: Instant,
    acquired: u64,
    errors: u64,
}

/// How late a phase's ticks came.
struct Lateness {
    count: usize,
    worst: Duration,
    p99: Duration,
    late: usize,
}

impl Lateness {
    fn of(mut late: Vec<Duration>) -> Lateness {
        late.sort();
        let at = |q: f64| {
            late.get(((late.len() as f64 * q) as usize).min(late.len().saturating_sub(1)))
                .copied()
                .unwrap_or_default()
        };
        Lateness {
            count: late.len(),
            worst: late.last().copied().unwrap_or_default(),
            p99: at(0.99),
            late: late.iter().filter(|l| **l > ON_TIME).count(),
        }
    }

    fn on_time_share(&self) -> f64 {
        1.0 - self.late as f64 / self.count.max(1) as f64
    }
}

impl std::fmt::Display for Lateness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} ticks, worst {:.1} ms late, p99 {:.1} ms, {} later than {:?}",
            self.count,
            self.worst.as_secs_f64() * 1e3,
            self.p99.as_secs_f64() * 1e3,
            self.late,
            ON_TIME
        )
    }
}
