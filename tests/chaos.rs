//! Chaos check for mutual exclusion (promise 1): three processes of four
//! threads each take the same lock over and over while connections are
//! killed and the server stalls. Inside the critical section each thread
//! checks through a marker key that nobody else is inside and increments a
//! counter with a plain GET and SET, so an overlap shows up twice: as a
//! marker that is already set, and as a lost increment.
//!
//! The worker processes are this test executable run again (the test
//! `chaos_worker`, which does nothing in a normal run).

#[path = "support/child.rs"]
mod child;
mod support;

use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use redhold::Error;
use redis::{Connection, RedisResult};

use child::ChildTest;
use support::RedisServer;

const URL_ENV: &str = "REDHOLD_CHAOS_URL";
const WORKER_ENV: &str = "REDHOLD_CHAOS_WORKER";

const PROCESSES: usize = 3;
const THREADS: usize = 4;
/// How long the workers loop, and faults are injected.
const RUN_FOR: Duration = Duration::from_secs(10);

const LOCK: &str = "chaos";
const MARKER: &str = "chaos:inside";
const COUNTER: &str = "chaos:count";

/// What one worker thread saw.
#[derive(Debug, Default, Clone, Copy)]
struct Tally {
    /// Critical sections whose increment is done.
    completed: u64,
    /// Times the marker showed somebody else inside.
    overlaps: u64,
    /// Locks reported lost: by `Err(LockLost)` or by the callback.
    lost: u64,
    /// Lock calls that failed (timeouts during a fault).
    errors: u64,
    /// Holds left behind by an acquire that was retried after its reply
    /// was lost (see docs/reliability.md), released by hand.
    doubled: u64,
}

impl Tally {
    fn add(&mut self, other: Tally) {
        self.completed += other.completed;
        self.overlaps += other.overlaps;
        self.lost += other.lost;
        self.errors += other.errors;
        self.doubled += other.doubled;
    }

    fn line(&self) -> String {
        format!(
            "RESULT completed={} overlaps={} lost={} errors={} doubled={}",
            self.completed, self.overlaps, self.lost, self.errors, self.doubled
        )
    }

    fn parse(line: &str) -> Tally {
        let field = |name: &str| -> u64 {
            line.split_whitespace()
                .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("no {name} in {line:?}"))
        };
        Tally {
            completed: field("completed"),
            overlaps: field("overlaps"),
            lost: field("lost"),
            errors: field("errors"),
            doubled: field("doubled"),
        }
    }
}

/// A plain connection for the critical section's own commands, which
/// reconnects and repeats a command when a fault cuts it off. Every command
/// sent through it is safe to repeat while we hold the lock.
struct Raw {
    client: redis::Client,
    conn: Option<Connection>,
}

impl Raw {
    fn new(url: &str) -> Raw {
        Raw {
            client: redis::Client::open(url).expect("raw client"),
            conn: None,
        }
    }

    fn run<T>(&mut self, what: &str, op: impl Fn(&mut Connection) -> RedisResult<T>) -> T {
        let give_up = Instant::now() + Duration::from_secs(15);
        loop {
            let result = self.connection().and_then(&op);
            match result {
                Ok(value) => return value,
                Err(e) if Instant::now() < give_up && is_fault(&e) => {
                    self.conn = None;
                    thread::sleep(Duration::from_millis(20));
                }
                Err(e) => panic!("{what}: {e}"),
            }
        }
    }

    fn connection(&mut self) -> RedisResult<&mut Connection> {
        if self.conn.is_none() {
            let conn = self
                .client
                .get_connection_with_timeout(Duration::from_secs(1))?;
            conn.set_read_timeout(Some(Duration::from_secs(1)))?;
            conn.set_write_timeout(Some(Duration::from_secs(1)))?;
            self.conn = Some(conn);
        }
        Ok(self.conn.as_mut().expect("just connected"))
    }
}

fn is_fault(e: &redis::RedisError) -> bool {
    e.is_io_error() || e.is_timeout() || e.is_connection_dropped() || e.is_connection_refusal()
}

/// One worker thread: lock, check the marker, increment, release; until
/// `stop_at`.
fn work(lock: redhold::Lock, url: &str, me: &str, stop_at: Instant) -> Tally {
    let mut tally = Tally::default();
    let mut raw = Raw::new(url);
    loop {
        let left = stop_at.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        let guard = match lock.try_lock_for(left) {
            Ok(Some(guard)) => guard,
            Ok(None) => break,
            Err(e) => {
                eprintln!("chaos {me}: lock: {e}");
                tally.errors += 1;
                thread::sleep(Duration::from_millis(20));
                continue;
            }
        };

        // Inside. SET NX may have run although its reply was lost: then the
        // marker already holds our own id.
        let set: Option<String> = raw.run("SET marker", |c| {
            redis::cmd("SET").arg(MARKER).arg(me).arg("NX").query(c)
        });
        let mine = set.is_some()
            || raw
                .run("GET marker", |c| {
                    redis::cmd("GET").arg(MARKER).query::<Option<String>>(c)
                })
                .as_deref()
                == Some(me);
        if !mine {
            tally.overlaps += 1;
        }
        let count: Option<u64> = raw.run("GET count", |c| redis::cmd("GET").arg(COUNTER).query(c));
        let next = count.unwrap_or(0) + 1;
        raw.run("SET count", |c| {
            redis::cmd("SET").arg(COUNTER).arg(next).query::<()>(c)
        });
        tally.completed += 1;
        if mine {
            raw.run("DEL marker", |c| {
                redis::cmd("DEL").arg(MARKER).query::<()>(c)
            });
        }

        match guard.unlock() {
            Ok(()) => {}
            Err(Error::LockLost { .. }) => tally.lost += 1,
            Err(e) => {
                eprintln!("chaos {me}: unlock: {e}");
                tally.errors += 1;
            }
        }
        // A retried acquire whose first reply was lost counts one hold twice;
        // give the extra hold back, or this thread keeps the lock for itself.
        if let Ok(holds) = lock.hold_count() {
            for _ in 0..holds {
                tally.doubled += 1;
                if let Err(e) = lock.unlock() {
                    eprintln!("chaos {me}: releasing a doubled hold: {e}");
                }
            }
        }
    }
    tally
}

/// A worker process: four threads on one client. Does nothing unless run by
/// the parent test.
#[test]
fn chaos_worker() {
    let (Ok(url), Ok(worker)) = (std::env::var(URL_ENV), std::env::var(WORKER_ENV)) else {
        return;
    };
    let lost = Arc::new(AtomicUsize::new(0));
    let client = {
        let lost = Arc::clone(&lost);
        redhold::Client::builder()
            .url(url.as_str())
            .watchdog_timeout(Duration::from_secs(3))
            .connect_timeout(Duration::from_secs(1))
            .response_timeout(Duration::from_secs(1))
            .retry_attempts(5)
            .retry_delay(Duration::from_millis(50))
            .on_lock_lost(move |_| {
                lost.fetch_add(1, Ordering::SeqCst);
            })
            .build()
            .expect("worker: client")
    };
    let stop_at = Instant::now() + RUN_FOR;
    let threads: Vec<_> = (0..THREADS)
        .map(|t| {
            let lock = client.lock(LOCK);
            let url = url.clone();
            let me = format!("{worker}.{t}");
            thread::spawn(move || work(lock, &url, &me, stop_at))
        })
        .collect();
    let mut total = Tally::default();
    for thread in threads {
        total.add(thread.join().expect("worker thread panicked"));
    }
    total.lost += lost.load(Ordering::SeqCst) as u64;
    println!("{}", total.line());
    std::io::stdout().flush().expect("worker: stdout");
    client.shutdown().expect("worker: shutdown");
}

/// Picks faults from a fixed sequence, so that runs are comparable.
struct Faults(u64);

impl Faults {
    fn next(&mut self) -> u64 {
        // xorshift64
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

#[test]
fn mutual_exclusion_holds_while_connections_die_and_the_server_stalls() {
    let server = RedisServer::start_with_args(support::server_version().debug_command_args());
    let url = server.url();
    let workers: Vec<ChildTest> = (0..PROCESSES)
        .map(|p| {
            let p = p.to_string();
            ChildTest::spawn(
                "chaos_worker",
                &[(URL_ENV, url.as_str()), (WORKER_ENV, p.as_str())],
            )
        })
        .collect();

    let started = Instant::now();
    let mut faults = Faults(0x9e37_79b9_7f4a_7c15);
    let mut injected = [0u32; 3];
    while started.elapsed() < RUN_FOR - Duration::from_secs(1) {
        thread::sleep(Duration::from_millis(300 + faults.next() % 400));
        let kind = (faults.next() % 3) as usize;
        let result = match kind {
            // Every command connection (not this one): replies in flight are lost.
            0 => server
                .try_cmd::<i64>(&["CLIENT", "KILL", "TYPE", "normal"])
                .map(drop),
            // Every subscriber: wake-ups in flight are lost.
            1 => server
                .try_cmd::<i64>(&["CLIENT", "KILL", "TYPE", "pubsub"])
                .map(drop),
            // A short stall.
            _ => server.try_cmd::<()>(&["DEBUG", "SLEEP", "0.2"]),
        };
        result.unwrap_or_else(|e| panic!("injecting fault {kind}: {e}"));
        injected[kind] += 1;
    }

    let mut total = Tally::default();
    for worker in &workers {
        let line = worker
            .wait_for_line("RESULT", RUN_FOR + Duration::from_secs(40))
            .expect("a worker process did not report");
        total.add(Tally::parse(&line));
    }
    for mut worker in workers {
        assert!(worker.wait_within(Duration::from_secs(10)).success());
    }
    let count: u64 = server.cmd(&["GET", COUNTER]);
    eprintln!("chaos: faults injected {injected:?}, {total:?}, counter {count}");

    assert!(
        injected.iter().all(|&n| n >= 2),
        "too few faults: {injected:?}"
    );
    assert!(
        total.completed >= 100,
        "too little progress under faults: {total:?}"
    );
    // Every fault here is far shorter than the 3 s watchdog timeout, so no
    // lock may be lost; and while none is lost, nobody may be inside with
    // another.
    assert_eq!(total.lost, 0, "locks were lost to short faults: {total:?}");
    assert_eq!(total.overlaps, 0, "two holders inside at once: {total:?}");
    assert_eq!(
        count, total.completed,
        "increments were lost, so critical sections overlapped: {total:?}"
    );
    // A release that failed during a fault leaves the lock to its watchdog
    // timeout (3 s), which has stopped being renewed.
    let gone_by = Instant::now() + Duration::from_secs(5);
    while server.cmd::<bool>(&["EXISTS", LOCK]) {
        assert!(
            Instant::now() < gone_by,
            "the lock outlived its workers by more than its watchdog timeout"
        );
        thread::sleep(Duration::from_millis(50));
    }
}
