//! A cancellation storm: thousands of acquire futures of every kind
//! (plain, fair, fenced, spin, read, write; every `_async` form, an
//! owner's reentrant holds; and a semaphore's, an expirable semaphore's,
//! a latch's, a multi-lock's and a RedLock's), each under a
//! `tokio::time::timeout` of a few milliseconds, so that they are dropped
//! at random points, while a chaos
//! thread kills the client's connections (`CLIENT KILL TYPE normal`, now
//! and then its pub/sub one) and stalls the server (`DEBUG SLEEP`) past
//! the client's response timeout. Then futures dropped at chosen states:
//! with their request in flight, parked, and handed the lock (woken) but
//! not polled again.
//!
//! Afterwards the client has left nothing: no field of its in any lock
//! hash, no fair-queue entry, no read-hold key, every semaphore has all
//! its permits, and another client takes every name (the multi-locks' and
//! RedLocks' members too) with one attempt, seconds after the storm, where
//! any hold left behind would stand for its 30 s TTL (fair-queue entries
//! for the 300 s fair wait, expirable permits for their 60 s lease). The random choices follow a seed, printed (and taken
//! from `STORM_SEED` when set), so that a failure can be replayed.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Wake, Waker};
use std::thread;
use std::time::{Duration, Instant};

use redhold::{Client, Lock, LockKind, MultiLock, Owner, OwnerGuard, RedLock};
use tokio::time::timeout;

use crate::no_sockets::warm_up;
use crate::redis_side::traces;
use crate::support::{server_version, RedisServer};

/// Futures in the random storm, and how many run at once.
const FUTURES: u64 = 8_000;
const AT_ONCE: usize = 48;
/// Names of each kind (read and write share theirs).
const NAMES: usize = 4;
/// The permits of each semaphore.
const PERMITS: u32 = 2;
/// The members of each RedLock.
const RED_MEMBERS: usize = 3;
/// The client's response timeout: below the longer stalls, so that some
/// requests are cut off in flight and answered late.
const RESPONSE_TIMEOUT: Duration = Duration::from_millis(150);
/// How long the client may take to settle after the storm: seconds, far
/// below the locks' TTL (30 s), so that nothing passes by an expiry.
const SETTLE: Duration = Duration::from_secs(10);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Plain,
    Fair,
    Fenced,
    Spin,
    Read,
    Write,
}

const KINDS: [Kind; 6] = [
    Kind::Plain,
    Kind::Fair,
    Kind::Fenced,
    Kind::Spin,
    Kind::Read,
    Kind::Write,
];

/// What else the storm's futures acquire, beside the kinds of lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Other {
    Semaphore,
    Expirable,
    Latch,
    Multi,
    Red,
}

const OTHERS: [Other; 5] = [
    Other::Semaphore,
    Other::Expirable,
    Other::Latch,
    Other::Multi,
    Other::Red,
];

/// The member locks of multi-lock `n`: it shares one with each neighbour.
fn multi_members(n: usize) -> [String; 2] {
    [
        format!("storm:multi:{n}"),
        format!("storm:multi:{}", (n + 1) % NAMES),
    ]
}

/// The member locks of RedLock `n`.
fn red_members(n: usize) -> Vec<String> {
    (0..RED_MEMBERS)
        .map(|k| format!("storm:red:{n}:{k}"))
        .collect()
}

impl Kind {
    fn name(self, n: usize) -> String {
        match self {
            Kind::Read | Kind::Write => format!("storm:rw:{n}"),
            other => format!("storm:{other:?}:{n}").to_lowercase(),
        }
    }
}

/// Runs `$body` with `$lock` bound to `$client`'s lock of kind `$kind`
/// called `$name` (each kind is a type of its own).
macro_rules! with_lock {
    ($client:expr, $kind:expr, $name:expr, |$lock:ident| $body:expr) => {
        match $kind {
            Kind::Plain => {
                let $lock = $client.lock($name);
                $body
            }
            Kind::Fair => {
                let $lock = $client.fair_lock($name);
                $body
            }
            Kind::Fenced => {
                let $lock = $client.fenced_lock($name);
                $body
            }
            Kind::Spin => {
                let $lock = $client.spin_lock($name);
                $body
            }
            Kind::Read => {
                let $lock = $client.read_write_lock($name).read();
                $body
            }
            Kind::Write => {
                let $lock = $client.read_write_lock($name).write();
                $body
            }
        }
    };
}

/// How the storm's futures ended.
#[derive(Debug, Default)]
struct Tally {
    acquired: AtomicU64,
    reentered: AtomicU64,
    busy: AtomicU64,
    dropped: AtomicU64,
    errors: AtomicU64,
}

#[test]
fn a_storm_of_dropped_futures_leaves_nothing_behind() {
    let _turn = crate::serial();
    let seed = std::env::var("STORM_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| fastrand::u64(..));
    eprintln!("cancellation storm: STORM_SEED={seed}");
    let server = RedisServer::start_with_args(server_version().debug_command_args());
    // An I/O thread for each future of the in-flight state: all their
    // first requests are on the wire at once.
    let client = server
        .builder()
        .response_timeout(RESPONSE_TIMEOUT)
        .async_threads(KINDS.len() * NAMES)
        .build()
        .expect("the storm's client");
    warm_up(&client);
    for n in 0..NAMES {
        let name = format!("storm:sem:{n}");
        assert!(client
            .semaphore(name.as_str())
            .try_set_permits(PERMITS)
            .expect("a semaphore"));
        let name = format!("storm:xsem:{n}");
        let expirable = client.permit_expirable_semaphore(name.as_str());
        assert!(expirable
            .try_set_permits(PERMITS)
            .expect("an expirable semaphore"));
        let name = format!("storm:latch:{n}");
        assert!(client
            .count_down_latch(name.as_str())
            .try_set_count(1)
            .expect("a latch"));
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .expect("a tokio runtime");

    // The random storm, with chaos.
    let tally = Arc::new(Tally::default());
    let stormed = Instant::now();
    let chaos_stop = AtomicBool::new(false);
    let chaos_acts = thread::scope(|scope| {
        let chaos = scope.spawn(|| chaos(&server, &chaos_stop, seed));
        runtime.block_on(storm(&client, &tally, seed));
        chaos_stop.store(true, Ordering::Relaxed);
        chaos.join().expect("the chaos thread")
    });
    let storm_took = stormed.elapsed();

    // Chosen states.
    let other = server.client();
    traces_are_seen(&server, &client, &other);
    let in_flight = dropped_in_flight(&server, &client);
    let parked = dropped_parked(&client, &other);
    let handed = dropped_handed_not_polled(&client);

    // Nothing left.
    let settling = Instant::now();
    let mut left = left_behind(&server, &client);
    while !left.is_empty() && settling.elapsed() < SETTLE {
        thread::sleep(Duration::from_millis(20));
        left = left_behind(&server, &client);
    }
    let settled_in = settling.elapsed();
    let stats = client.stats();
    let report = format!(
        "cancellation storm: {FUTURES} futures in {storm_took:.2?} ({} taken, {} re-entered, {} busy, \
         {} dropped by their timeout, {} errors); chaos: {chaos_acts}; chosen states dropped: \
         {in_flight} in flight, {parked} parked, {handed} handed over and not polled; \
         settled in {settled_in:.2?}; stats after: {stats:?}",
        tally.acquired.load(Ordering::Relaxed),
        tally.reentered.load(Ordering::Relaxed),
        tally.busy.load(Ordering::Relaxed),
        tally.dropped.load(Ordering::Relaxed),
        tally.errors.load(Ordering::Relaxed),
    );
    eprintln!("{report}");
    assert!(
        left.is_empty(),
        "the client left traces (STORM_SEED={seed}):\n{}\n{report}",
        left.join("\n")
    );
    assert!(
        tally.dropped.load(Ordering::Relaxed) > 0 && tally.acquired.load(Ordering::Relaxed) > 0,
        "{report}"
    );

    // Another client takes every name, each with one attempt.
    let checker = server.client();
    let mut slowest = Duration::ZERO;
    for kind in KINDS {
        for n in 0..NAMES {
            let name = kind.name(n);
            let tried = Instant::now();
            let taken = with_lock!(checker, kind, name.as_str(), |lock| lock
                .try_lock()
                .map(|guard| guard.is_some()));
            slowest = slowest.max(tried.elapsed());
            assert!(
                matches!(taken, Ok(true)),
                "another client could not take {kind:?} {name}: {taken:?} (STORM_SEED={seed})"
            );
        }
    }
    for n in 0..NAMES {
        let members = multi_members(n).into_iter().chain(red_members(n));
        for name in members {
            let tried = Instant::now();
            let taken = checker
                .lock(name.as_str())
                .try_lock()
                .map(|guard| guard.is_some());
            slowest = slowest.max(tried.elapsed());
            assert!(
                matches!(taken, Ok(true)),
                "another client could not take {name}: {taken:?} (STORM_SEED={seed})"
            );
        }
        let name = format!("storm:sem:{n}");
        let available = checker.semaphore(name.as_str()).available_permits();
        assert!(
            matches!(available, Ok(a) if a == u64::from(PERMITS)),
            "{name}: {available:?} permits of {PERMITS} (STORM_SEED={seed})"
        );
        let name = format!("storm:xsem:{n}");
        let available = checker
            .permit_expirable_semaphore(name.as_str())
            .available_permits();
        assert!(
            matches!(available, Ok(a) if a == u64::from(PERMITS)),
            "{name}: {available:?} permits of {PERMITS} (STORM_SEED={seed})"
        );
        let name = format!("storm:latch:{n}");
        let count = checker.count_down_latch(name.as_str()).count();
        assert!(
            matches!(count, Ok(1)),
            "{name}: its count is {count:?} (STORM_SEED={seed})"
        );
    }
    eprintln!(
        "cancellation storm: another client took every name at once (the slowest try {slowest:.2?}); \
         every semaphore has its {PERMITS} permits"
    );
    for client in [client, other, checker] {
        client.shutdown().expect("shutdown");
    }
}

/// What `client` left: its [`traces`], and the permits missing from each
/// semaphore (a permit's give-back runs on the client's threads).
fn left_behind(server: &RedisServer, client: &Client) -> Vec<String> {
    let mut left = traces(server, client);
    for n in 0..NAMES {
        let name = format!("storm:sem:{n}");
        let plain = client.semaphore(name.as_str()).available_permits();
        let name = format!("storm:xsem:{n}");
        let expirable = client
            .permit_expirable_semaphore(name.as_str())
            .available_permits();
        for (kind, available) in [("semaphore", plain), ("expirable semaphore", expirable)] {
            if !matches!(available, Ok(a) if a == u64::from(PERMITS)) {
                left.push(format!("{kind} {n}: {available:?} permits of {PERMITS}"));
            }
        }
    }
    left
}

/// The control: [`traces`] finds a hold's field, a read-hold key and a
/// fair waiter's queue entry and deadline, while there are some.
fn traces_are_seen(server: &RedisServer, client: &Client, other: &Client) {
    let plain = client.lock("storm:control").lock().expect("a hold");
    let read = client
        .read_write_lock("storm:control:rw")
        .read()
        .lock()
        .expect("a read hold");
    let fair = other
        .fair_lock("storm:control:fair")
        .lock()
        .expect("the other's fair hold");
    let waiting = {
        let waiter = client.fair_lock("storm:control:fair");
        thread::spawn(move || {
            waiter
                .try_lock_for(Duration::from_secs(5))
                .map(|held| held.is_some())
        })
    };
    let expected = [
        ("a hold's field", "hash storm:control: "),
        ("a read hold's field", "hash storm:control:rw:"),
        ("a read-hold key", "key {storm:control:rw}:"),
        (
            "a fair queue entry",
            "list redisson_lock_queue:{storm:control:fair}:",
        ),
        (
            "a fair waiter's deadline",
            "zset redisson_lock_timeout:{storm:control:fair}:",
        ),
    ];
    // The fair waiter joins the queue when its thread gets there; a SCAN
    // of several pages (the storm's unlock latches are many) may also see
    // one of its two keys and not yet the other: look until all are seen.
    let started = Instant::now();
    let missed = loop {
        let seen = traces(server, client);
        let missed: Vec<_> = expected
            .iter()
            .filter(|(_, prefix)| !seen.iter().any(|t| t.starts_with(prefix)))
            .map(|(what, _)| *what)
            .collect();
        if missed.is_empty() || started.elapsed() > SETTLE {
            break (missed, seen);
        }
        thread::sleep(Duration::from_millis(5));
    };
    assert!(
        missed.0.is_empty(),
        "traces missed {:?}: {:?}",
        missed.0,
        missed.1
    );
    drop(fair);
    let waited = waiting.join().expect("the fair waiter");
    assert!(matches!(waited, Ok(true)), "the fair waiter: {waited:?}");
    drop((plain, read));
    assert!(
        traces(server, client).is_empty(),
        "the control's holds stayed"
    );
}

/// Kills connections and stalls the server at random moments until told
/// to stop; says what it did.
fn chaos(server: &RedisServer, stop: &AtomicBool, seed: u64) -> String {
    let mut rng = fastrand::Rng::with_seed(seed ^ 0xC4A0);
    let (mut kills, mut pubsub_kills, mut sleeps) = (0, 0, 0);
    for act in 0.. {
        thread::sleep(Duration::from_millis(rng.u64(30..150)));
        if stop.load(Ordering::Relaxed) {
            break;
        }
        match act % 5 {
            0 | 2 => {
                let _ = server.try_cmd::<i64>(&["CLIENT", "KILL", "TYPE", "normal"]);
                kills += 1;
            }
            4 => {
                let _ = server.try_cmd::<i64>(&["CLIENT", "KILL", "TYPE", "pubsub"]);
                pubsub_kills += 1;
            }
            _ => {
                let secs = format!("{:.3}", rng.u64(20..300) as f64 / 1000.0);
                let _ = server.try_cmd::<()>(&["DEBUG", "SLEEP", &secs]);
                sleeps += 1;
            }
        }
    }
    format!("{kills} CLIENT KILL TYPE normal, {pubsub_kills} TYPE pubsub, {sleeps} DEBUG SLEEP")
}

/// The random storm: `FUTURES` tasks, `AT_ONCE` at a time.
async fn storm(client: &Client, tally: &Arc<Tally>, seed: u64) {
    let at_once = Arc::new(tokio::sync::Semaphore::new(AT_ONCE));
    let mut tasks = Vec::new();
    for n in 0..FUTURES {
        let permit = Arc::clone(&at_once)
            .acquire_owned()
            .await
            .expect("the semaphore");
        let mut rng = fastrand::Rng::with_seed(seed.wrapping_add(n));
        let tally = Arc::clone(tally);
        // Two in three futures are a kind of lock's.
        let pick = rng.usize(..KINDS.len() * 3 / 2);
        let task: Pin<Box<dyn Future<Output = ()> + Send>> = match KINDS.get(pick) {
            Some(&kind) => {
                let name = kind.name(rng.usize(..NAMES));
                with_lock!(client, kind, name.as_str(), |lock| Box::pin(one(
                    lock, rng, tally
                )))
            }
            None => Box::pin(other(
                client.clone(),
                OTHERS[rng.usize(..OTHERS.len())],
                rng,
                tally,
            )),
        };
        tasks.push(tokio::spawn(async move {
            task.await;
            drop(permit);
        }));
    }
    for task in tasks {
        task.await.expect("a storm task");
    }
}

/// One future of the storm, dropped by its timeout or run to its end; a
/// hold it got is kept a moment, then released one way or another.
async fn one<K: LockKind>(lock: Lock<K>, mut rng: fastrand::Rng, tally: Arc<Tally>) {
    let cut = Duration::from_micros(rng.u64(0..60_000));
    let wait = Duration::from_micros(rng.u64(0..30_000));
    let lease = Duration::from_secs(60);
    let outcome = match rng.u8(0..6) {
        0 => timeout(cut, async { lock.lock_async().await.map(Some) }).await,
        1 => timeout(cut, lock.try_lock_async()).await,
        2 => timeout(cut, lock.try_lock_for_async(wait)).await,
        3 => {
            timeout(cut, async {
                lock.lock_with_lease_async(lease).await.map(Some)
            })
            .await
        }
        4 => timeout(cut, lock.try_lock_for_with_lease_async(wait, lease)).await,
        _ => {
            // An owner's two holds, the second under its own timeout.
            let owner = lock.for_owner(Owner::new());
            match timeout(cut, owner.lock_async()).await {
                Ok(Ok(first)) => {
                    tally.acquired.fetch_add(1, Ordering::Relaxed);
                    let again = Duration::from_micros(rng.u64(0..5_000));
                    let second = timeout(again, owner.try_lock_async()).await;
                    if let Ok(Ok(Some(second))) = second {
                        tally.reentered.fetch_add(1, Ordering::Relaxed);
                        if rng.bool() {
                            release(second, &mut rng).await;
                            release(first, &mut rng).await;
                        } else {
                            release(first, &mut rng).await;
                            release(second, &mut rng).await;
                        }
                    } else {
                        release(first, &mut rng).await;
                    }
                    return;
                }
                Ok(Err(_)) => Ok(Err(redhold::Error::Shutdown)),
                Err(elapsed) => Err(elapsed),
            }
        }
    };
    let counter = match outcome {
        Err(_) => &tally.dropped,
        Ok(Err(_)) => &tally.errors,
        Ok(Ok(None)) => &tally.busy,
        Ok(Ok(Some(guard))) => {
            tally.acquired.fetch_add(1, Ordering::Relaxed);
            release(guard, &mut rng).await;
            return;
        }
    };
    counter.fetch_add(1, Ordering::Relaxed);
}

/// One future of the storm that is not a plain kind of lock's: a
/// semaphore's, an expirable semaphore's, a latch's, a multi-lock's or a
/// RedLock's, dropped by its timeout or run to its end; what it got is
/// kept a moment and dropped (a permit's drop gives it back on the
/// client's threads).
async fn other(client: Client, what: Other, mut rng: fastrand::Rng, tally: Arc<Tally>) {
    let cut = Duration::from_micros(rng.u64(0..60_000));
    let wait = Duration::from_micros(rng.u64(0..30_000));
    let lease = Duration::from_secs(60);
    let n = rng.usize(..NAMES);
    let op = rng.u8(0..4);
    type Got = redhold::Result<Option<Box<dyn Send>>>;
    let got: Result<Got, _> = match what {
        Other::Semaphore => {
            let semaphore = client.semaphore(format!("storm:sem:{n}"));
            timeout(cut, async {
                Ok(match op {
                    0 => Some(semaphore.acquire_async().await?),
                    1 => semaphore.try_acquire_async().await?,
                    2 => semaphore.try_acquire_for_async(wait).await?,
                    _ => semaphore.try_acquire_many_for_async(PERMITS, wait).await?,
                }
                .map(|permit| Box::new(permit) as Box<dyn Send>))
            })
            .await
        }
        Other::Expirable => {
            let semaphore = client.permit_expirable_semaphore(format!("storm:xsem:{n}"));
            timeout(cut, async {
                Ok(match op {
                    0 => Some(semaphore.acquire_async(lease).await?),
                    1 => semaphore.try_acquire_async(lease).await?,
                    _ => semaphore.try_acquire_for_async(wait, lease).await?,
                }
                .map(|permit| Box::new(permit) as Box<dyn Send>))
            })
            .await
        }
        Other::Latch => {
            // Never opened: every wait ends by its timeout or its cut.
            let latch = client.count_down_latch(format!("storm:latch:{n}"));
            timeout(cut, async {
                let opened = match op {
                    0 | 1 => latch.wait_async().await?,
                    _ => latch.wait_for_async(wait).await?,
                };
                Ok(opened.then(|| Box::new(()) as Box<dyn Send>))
            })
            .await
        }
        Other::Multi => {
            let multi = MultiLock::new(
                multi_members(n)
                    .iter()
                    .map(|m| client.lock(m.as_str()))
                    .collect(),
            );
            timeout(cut, async {
                Ok(match op {
                    0 => Some(multi.lock_async().await?),
                    1 => multi.try_lock_async().await?,
                    2 => multi.try_lock_for_async(wait).await?,
                    _ => Some(multi.lock_with_lease_async(lease).await?),
                }
                .map(|guard| Box::new(guard) as Box<dyn Send>))
            })
            .await
        }
        Other::Red => {
            let red = RedLock::new(
                red_members(n)
                    .iter()
                    .map(|m| client.lock(m.as_str()))
                    .collect(),
            );
            timeout(cut, async {
                Ok(match op {
                    0 => Some(red.lock_async().await?),
                    1 => red.try_lock_async().await?,
                    2 => red.try_lock_for_async(wait).await?,
                    _ => red.try_lock_for_with_lease_async(wait, lease).await?,
                }
                .map(|guard| Box::new(guard) as Box<dyn Send>))
            })
            .await
        }
    };
    let counter = match got {
        Err(_) => &tally.dropped,
        Ok(Err(_)) => &tally.errors,
        Ok(Ok(None)) => &tally.busy,
        Ok(Ok(Some(held))) => {
            tokio::time::sleep(Duration::from_micros(rng.u64(0..3_000))).await;
            drop(held);
            &tally.acquired
        }
    };
    counter.fetch_add(1, Ordering::Relaxed);
}

/// Holds a moment, then: a drop, an `unlock_async` awaited, or one
/// dropped before its end (which does not stop the release).
async fn release<K: LockKind>(guard: OwnerGuard<K>, rng: &mut fastrand::Rng) {
    tokio::time::sleep(Duration::from_micros(rng.u64(0..3_000))).await;
    match rng.u8(0..3) {
        0 => drop(guard),
        1 => {
            let _ = guard.unlock_async().await;
        }
        _ => {
            let cut = Duration::from_micros(rng.u64(0..2_000));
            let _ = timeout(cut, guard.unlock_async()).await;
        }
    }
}

/// A waker that only remembers it was woken: for a future's outcome is
/// ready (a redhold future wakes only then).
#[derive(Default)]
struct Flag(AtomicBool);

impl Wake for Flag {
    fn wake(self: Arc<Self>) {
        self.0.store(true, Ordering::SeqCst);
    }
}

type Acquire = Pin<Box<dyn Future<Output = redhold::Result<Option<()>>> + Send>>;

/// A future of kind `kind` for `name` of `client`, polled once with a
/// fresh [`Flag`]; its output is reduced to whether it got the lock (the
/// guard dropped at once).
fn started(client: &Client, kind: Kind, name: &str) -> (Acquire, Arc<Flag>) {
    let mut future: Acquire = with_lock!(client, kind, name, |lock| {
        let acquire = lock.lock_async();
        Box::pin(async move {
            acquire.await.map(|guard| {
                drop(guard);
                Some(())
            })
        })
    });
    let flag = Arc::new(Flag::default());
    let waker = Waker::from(Arc::clone(&flag));
    let polled = future.as_mut().poll(&mut Context::from_waker(&waker));
    assert!(polled.is_pending(), "{kind:?} {name} was free");
    (future, flag)
}

/// Futures of every kind whose first request is in flight (the server
/// stalled), dropped before the answer; returns how many.
fn dropped_in_flight(server: &RedisServer, client: &Client) -> usize {
    thread::scope(|scope| {
        let stall = scope.spawn(|| server.cmd::<()>(&["DEBUG", "SLEEP", "0.5"]));
        thread::sleep(Duration::from_millis(50));
        let futures: Vec<_> = KINDS
            .iter()
            .flat_map(|&kind| (0..NAMES).map(move |n| (kind, n)))
            .map(|(kind, n)| {
                let name = kind.name(n);
                with_lock!(client, kind, name.as_str(), |lock| {
                    let acquire = lock.try_lock_for_async(Duration::from_secs(5));
                    Box::pin(async move { acquire.await.map(|guard| guard.map(drop)) }) as Acquire
                })
            })
            .collect();
        let count = futures.len();
        // Their first steps run meanwhile and wait for the stalled server.
        thread::sleep(Duration::from_millis(50));
        drop(futures);
        stall.join().expect("the stall");
        count
    })
}

/// Futures of every kind parked behind another client's holds, dropped
/// while parked; returns how many.
fn dropped_parked(client: &Client, other: &Client) -> usize {
    let held: Vec<_> = (0..NAMES)
        .flat_map(|n| {
            [
                Kind::Plain,
                Kind::Fair,
                Kind::Fenced,
                Kind::Spin,
                Kind::Write,
            ]
            .map(|kind| {
                let name = kind.name(n);
                with_lock!(other, kind, name.as_str(), |lock| Box::new(
                    lock.lock().expect("the other client's hold")
                )
                    as Box<dyn std::any::Any>)
            })
        })
        .collect();
    let futures: Vec<_> = KINDS
        .iter()
        .flat_map(|&kind| (0..NAMES).map(move |n| (kind, n)))
        .map(|(kind, n)| started(client, kind, &kind.name(n)))
        .collect();
    // Every kind but the spin lock parks in its channel's line (a spin
    // lock sleeps between attempts, uncounted).
    let parking = (KINDS.len() - 1) * NAMES;
    let waited = Instant::now();
    while client.stats().parked_waiters < parking {
        assert!(
            waited.elapsed() < SETTLE,
            "never parked: {:?}",
            client.stats()
        );
        thread::sleep(Duration::from_millis(5));
    }
    let count = futures.len();
    drop(futures);
    drop(held);
    count
}

/// Futures of every kind waiting behind this client's own holds, handed
/// the lock by their release (directly, for the kinds that hand over) or
/// woken and done, and dropped without another poll; returns how many.
fn dropped_handed_not_polled(client: &Client) -> usize {
    let held: Vec<_> = (0..NAMES)
        .flat_map(|n| {
            [
                Kind::Plain,
                Kind::Fair,
                Kind::Fenced,
                Kind::Spin,
                Kind::Write,
            ]
            .map(|kind| {
                let name = kind.name(n);
                with_lock!(client, kind, name.as_str(), |lock| Box::new(
                    lock.lock().expect("this client's hold")
                )
                    as Box<dyn std::any::Any>)
            })
        })
        .collect();
    // One waiter per name: the read waiter of each read-write name.
    let futures: Vec<_> = [
        Kind::Plain,
        Kind::Fair,
        Kind::Fenced,
        Kind::Spin,
        Kind::Read,
    ]
    .iter()
    .flat_map(|&kind| (0..NAMES).map(move |n| (kind, n)))
    .map(|(kind, n)| started(client, kind, &kind.name(n)))
    .collect();
    let parking = 4 * NAMES;
    let waited = Instant::now();
    while client.stats().parked_waiters < parking {
        assert!(
            waited.elapsed() < SETTLE,
            "never parked: {:?}",
            client.stats()
        );
        thread::sleep(Duration::from_millis(5));
    }
    drop(held);
    let handed = Instant::now();
    while !futures
        .iter()
        .all(|(_, flag)| flag.0.load(Ordering::SeqCst))
    {
        assert!(
            handed.elapsed() < SETTLE,
            "a waiter was never handed its lock"
        );
        thread::sleep(Duration::from_millis(5));
    }
    let count = futures.len();
    drop(futures);
    count
}
