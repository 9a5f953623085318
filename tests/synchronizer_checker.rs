//! A seeded, randomized checker for the semaphore and the count-down latch:
//! threads of two clients behind a fault proxy (and one client without)
//! take and give back permits and count a latch down in random ways, while
//! the proxy loses requests and replies and holds requests back past the
//! response timeout (a stalled server). The oracle:
//!
//! - **permits**: never more permits in use at once than the semaphore was
//!   given (counted in the process as sections begin and end), and after
//!   the schedule Redis counts no more permits than that; fewer only when
//!   a release failed (without faults: exactly as many);
//! - **latch**: no waiter goes on before as many count-downs began as the
//!   latch was armed with, and (when no count-down failed) every waiter
//!   goes on;
//! - **expirable permits**: never more permits in use than given, a holder
//!   counting itself only until its lease ends (holders sometimes overrun
//!   it, as a stalled process would); once every lease has ended, Redis
//!   counts exactly the permits given.
//!
//! `REDHOLD_SYNC_SECS` sets the budget (default 8 s, schedules of about
//! 3 s); `REDHOLD_SYNC_SEED=<seed>` replays one schedule's random choices
//! (the threads' timing is the machine's). Every seed is printed.

mod bounded;
#[allow(dead_code)]
#[path = "support/fault_proxy.rs"]
mod fault_proxy;
mod support;

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use fault_proxy::{Action, FaultProxy, Matcher, Rule};
use parking_lot::Mutex;
use redhold::{Client, Interrupt};
use support::RedisServer;

/// How long the actors of one schedule run.
const SCHEDULE: Duration = Duration::from_secs(3);
/// The clients' response timeout: the proxy holds requests back longer.
const RESPONSE_TIMEOUT: Duration = Duration::from_millis(300);

/// SplitMix64: small, seedable, good enough to pick operations.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    fn millis(&mut self, max: u64) -> Duration {
        Duration::from_millis(self.below(max + 1))
    }
}

/// One schedule's world: a server, the proxy before it, the clients.
struct World {
    server: RedisServer,
    proxy: FaultProxy,
    /// Two clients through the proxy, one straight to the server.
    clients: Vec<Client>,
    faults: bool,
    violations: Mutex<Vec<String>>,
    ops: AtomicU64,
}

impl World {
    fn new(faults: bool) -> World {
        let server = RedisServer::start();
        let proxy = FaultProxy::start(server.port());
        let through = |url: String| {
            Client::builder()
                .url(url)
                .response_timeout(RESPONSE_TIMEOUT)
                .retry_attempts(2)
                .retry_delay(Duration::from_millis(20))
                .outage_tolerance(Some(Duration::from_secs(2)))
                .build()
                .expect("client")
        };
        let clients = vec![
            through(proxy.url()),
            through(proxy.url()),
            through(server.url()),
        ];
        World {
            server,
            proxy,
            clients,
            faults,
            violations: Mutex::new(Vec::new()),
            ops: AtomicU64::new(0),
        }
    }

    fn violation(&self, what: String) {
        self.violations.lock().push(what);
    }

    /// Arms one random fault, one time in `odds`, on the next script call
    /// that names `name`.
    fn maybe_fault(&self, rng: &mut Rng, name: &str, odds: u64) {
        if !self.faults || rng.below(odds) != 0 {
            return;
        }
        let action = match rng.below(4) {
            0 => Action::LoseReply,
            1 => Action::LoseRequest,
            2 => Action::DelayRequest(Duration::from_millis(350 + rng.below(400))),
            _ => Action::DelayReply(Duration::from_millis(350 + rng.below(200))),
        };
        let _armed = self.proxy.arming().arm(Rule {
            matcher: Matcher::script(name, &[]),
            action,
        });
    }
}

/// Permits: threads take 1..=N permits in random ways, check that no more
/// than N are in use, and give them back in random ways.
fn semaphore_schedule(seed: u64, world: &Arc<World>) {
    let mut rng = Rng(seed);
    let name = format!("sem-{seed}");
    let permits = 1 + rng.below(3) as i64;
    world.clients[2]
        .semaphore(name.as_str())
        .set_permits(permits as u32)
        .unwrap();
    let in_use = Arc::new(AtomicI64::new(0));
    let unreturned = Arc::new(AtomicI64::new(0));
    let until = Instant::now() + SCHEDULE;
    let actors: Vec<_> = (0..5u64)
        .map(|i| {
            let (world, in_use, unreturned) = (
                Arc::clone(world),
                Arc::clone(&in_use),
                Arc::clone(&unreturned),
            );
            let (name, mut rng) = (name.clone(), Rng(seed ^ (i + 1).wrapping_mul(0x51)));
            bounded::spawn("permit actor", move || {
                let client = &world.clients[(i % 3) as usize];
                let sem = client.semaphore(name.as_str());
                while Instant::now() < until {
                    world.maybe_fault(&mut rng, &name, 4);
                    let want = 1 + rng.below(permits as u64) as u32;
                    let taken = match rng.below(4) {
                        0 => sem.try_acquire_many(want),
                        1 => sem.try_acquire_many_for(want, rng.millis(300)),
                        2 => {
                            let stop = Interrupt::new();
                            let trigger = stop.clone();
                            let after = rng.millis(200);
                            let stopper = thread::spawn(move || {
                                thread::sleep(after);
                                trigger.trigger();
                            });
                            let got = sem.acquire_many_interruptibly(want, &stop).map(Some);
                            let _ = stopper.join();
                            got
                        }
                        _ => sem.try_acquire_many_for(want, Duration::from_secs(2)),
                    };
                    world.ops.fetch_add(1, Ordering::Relaxed);
                    let Ok(Some(permit)) = taken else { continue };
                    let now = in_use.fetch_add(i64::from(want), Ordering::SeqCst) + i64::from(want);
                    if now > permits {
                        world.violation(format!(
                            "seed {seed}: {now} permits in use of {permits} ({name})"
                        ));
                    }
                    thread::sleep(rng.millis(3));
                    in_use.fetch_sub(i64::from(want), Ordering::SeqCst);
                    let back = match rng.below(3) {
                        // A drop's failure is not seen: only without faults.
                        0 if !world.faults => {
                            drop(permit);
                            Ok(())
                        }
                        1 => {
                            permit.forget();
                            world.clients[rng.below(3) as usize]
                                .semaphore(name.as_str())
                                .release(want)
                        }
                        _ => permit.release(),
                    };
                    if back.is_err() {
                        unreturned.fetch_add(i64::from(want), Ordering::SeqCst);
                    }
                }
            })
        })
        .collect();
    for actor in actors {
        actor.join_within(SCHEDULE + Duration::from_secs(30));
    }
    // Requests held back by the proxy land within a second.
    thread::sleep(Duration::from_millis(1200));
    let left: i64 = world.server.cmd::<String>(&["GET", &name]).parse().unwrap();
    let unreturned = unreturned.load(Ordering::SeqCst);
    if left > permits {
        world.violation(format!(
            "seed {seed}: {left} permits in Redis after the schedule, {permits} given ({name})"
        ));
    } else if left + unreturned < permits {
        world.violation(format!(
            "seed {seed}: {left} permits in Redis after the schedule, {permits} given, \
             {unreturned} not given back ({name}): permits leaked"
        ));
    }
}

/// Latch: counters count down once each at random times while waiters wait
/// in random ways; no waiter may go on before every count-down began.
fn latch_schedule(seed: u64, world: &Arc<World>) {
    let mut rng = Rng(seed.rotate_left(17));
    let name = format!("latch-{seed}");
    let count = 2 + rng.below(4);
    assert!(world.clients[2]
        .count_down_latch(name.as_str())
        .try_set_count(count)
        .unwrap());
    let begun = Arc::new(AtomicU64::new(0));
    let failed = Arc::new(AtomicU64::new(0));
    let mut threads = Vec::new();
    for i in 0..count {
        let (world, begun, failed) = (Arc::clone(world), Arc::clone(&begun), Arc::clone(&failed));
        let (name, mut rng) = (name.clone(), Rng(seed ^ (i + 7).wrapping_mul(0x9E37)));
        threads.push(bounded::spawn("count-down actor", move || {
            thread::sleep(rng.millis(SCHEDULE.as_millis() as u64 / 2));
            world.maybe_fault(&mut rng, &name, 2);
            let latch = world.clients[rng.below(3) as usize].count_down_latch(name.as_str());
            begun.fetch_add(1, Ordering::SeqCst);
            world.ops.fetch_add(1, Ordering::Relaxed);
            if latch.count_down().is_err() {
                failed.fetch_add(1, Ordering::SeqCst);
            }
        }));
    }
    let waiters: Vec<_> = (0..4u64)
        .map(|i| {
            let (world, begun) = (Arc::clone(world), Arc::clone(&begun));
            let (name, mut rng) = (name.clone(), Rng(seed ^ (i + 3).wrapping_mul(0x7F4A)));
            bounded::spawn("latch waiter", move || {
                let latch = world.clients[(i % 3) as usize].count_down_latch(name.as_str());
                let passed = match rng.below(2) {
                    0 => latch.wait_for(SCHEDULE + Duration::from_secs(3)),
                    _ => {
                        let stop = Interrupt::new();
                        let trigger = stop.clone();
                        let stopper = thread::spawn(move || {
                            thread::sleep(SCHEDULE + Duration::from_secs(3));
                            trigger.trigger();
                        });
                        let passed = latch.wait_interruptibly(&stop).map(|()| true);
                        stop.trigger();
                        let _ = stopper.join();
                        passed
                    }
                };
                world.ops.fetch_add(1, Ordering::Relaxed);
                let begun = begun.load(Ordering::SeqCst);
                if matches!(passed, Ok(true)) && begun < count {
                    world.violation(format!(
                        "seed {seed}: a waiter went on after {begun} of {count} count-downs ({name})"
                    ));
                }
                matches!(passed, Ok(true))
            })
        })
        .collect();
    for thread in threads {
        thread.join_within(SCHEDULE + Duration::from_secs(30));
    }
    let passed = waiters
        .into_iter()
        .map(|w| w.join_within(SCHEDULE + Duration::from_secs(30)))
        .filter(|passed| *passed)
        .count();
    if failed.load(Ordering::SeqCst) == 0 && passed != 4 {
        world.violation(format!(
            "seed {seed}: every count-down succeeded, yet only {passed} of 4 waiters went on ({name})"
        ));
    }
}

/// Expirable permits: threads take one permit with a short lease, use it
/// (sometimes past its lease) and give it back, forget it or let it end.
fn expirable_schedule(seed: u64, world: &Arc<World>) {
    let mut rng = Rng(seed.rotate_left(31));
    let name = format!("pes-{seed}");
    let permits = 1 + rng.below(3) as usize;
    assert!(world.clients[2]
        .permit_expirable_semaphore(name.as_str())
        .try_set_permits(permits as u32)
        .unwrap());
    // The lease ends of the permits in use, as their holders count them.
    let in_use: Arc<Mutex<Vec<Instant>>> = Arc::default();
    let until = Instant::now() + SCHEDULE;
    let actors: Vec<_> = (0..4u64)
        .map(|i| {
            let (world, in_use) = (Arc::clone(world), Arc::clone(&in_use));
            let (name, mut rng) = (name.clone(), Rng(seed ^ (i + 11).wrapping_mul(0x3C6E)));
            bounded::spawn("expirable actor", move || {
                let sem = world.clients[(i % 3) as usize].permit_expirable_semaphore(name.as_str());
                while Instant::now() < until {
                    world.maybe_fault(&mut rng, &name, 2);
                    let lease = Duration::from_millis(100 + rng.below(400));
                    let asked = Instant::now();
                    let taken = sem.try_acquire_for(rng.millis(400), lease);
                    world.ops.fetch_add(1, Ordering::Relaxed);
                    let Ok(Some(permit)) = taken else { continue };
                    // Redis ends the lease no earlier than this: its end is
                    // a later reading of the clock plus the lease, but in
                    // whole ms (cut down), hence the margin.
                    let ends = asked + lease - Duration::from_millis(2);
                    {
                        let mut in_use = in_use.lock();
                        let now = Instant::now();
                        in_use.retain(|end| *end > now);
                        // A reply that came after the lease ended (a held-up
                        // reply, a busy machine) leaves nothing to use.
                        if ends > now {
                            in_use.push(ends);
                        }
                        if in_use.len() > permits {
                            world.violation(format!(
                                "seed {seed}: {} expirable permits in use of {permits} ({name})",
                                in_use.len()
                            ));
                        }
                    }
                    let hold = rng.millis(lease.as_millis() as u64 * 3 / 2);
                    thread::sleep(hold);
                    in_use.lock().retain(|end| *end != ends);
                    match rng.below(3) {
                        0 => permit.forget(),
                        1 => {
                            let id = permit.id();
                            permit.forget();
                            let _ = world.clients[rng.below(3) as usize]
                                .permit_expirable_semaphore(name.as_str())
                                .release(&id);
                        }
                        _ => {
                            let _ = permit.release();
                        }
                    }
                }
            })
        })
        .collect();
    for actor in actors {
        actor.join_within(SCHEDULE + Duration::from_secs(30));
    }
    // Every lease has ended and every held-back request landed.
    thread::sleep(Duration::from_millis(1500));
    let left = world.clients[2]
        .permit_expirable_semaphore(name.as_str())
        .available_permits()
        .unwrap();
    if left != permits as u64 {
        world.violation(format!(
            "seed {seed}: {left} expirable permits available once every lease ended, \
             {permits} given ({name})"
        ));
    }
}

#[test]
fn no_permit_out_of_nothing_and_no_latch_open_too_early() {
    let budget = std::env::var("REDHOLD_SYNC_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .map_or(Duration::from_secs(8), Duration::from_secs);
    let fixed: Option<u64> = std::env::var("REDHOLD_SYNC_SEED")
        .ok()
        .and_then(|s| s.parse().ok());
    let mut master = Rng(fixed.unwrap_or_else(|| {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
    }));
    let started = Instant::now();
    let mut schedules = 0;
    let mut ops = 0;
    let mut violations = Vec::new();
    while schedules == 0 || (fixed.is_none() && started.elapsed() < budget) {
        let seed = fixed.unwrap_or_else(|| master.next());
        let faults = !seed.is_multiple_of(4);
        eprintln!("synchronizer checker: seed {seed} (faults: {faults}; REDHOLD_SYNC_SEED={seed} replays it)");
        let world = Arc::new(World::new(faults));
        let (a, b, c) = (Arc::clone(&world), Arc::clone(&world), Arc::clone(&world));
        let sem = thread::spawn(move || semaphore_schedule(seed, &a));
        let latch = thread::spawn(move || latch_schedule(seed, &b));
        let expirable = thread::spawn(move || expirable_schedule(seed, &c));
        sem.join().expect("the semaphore schedule panicked");
        latch.join().expect("the latch schedule panicked");
        expirable.join().expect("the expirable schedule panicked");
        eprintln!("  faults fired: {}", world.proxy.summary());
        ops += world.ops.load(Ordering::Relaxed);
        violations.extend(world.violations.lock().drain(..));
        schedules += 1;
        for client in &world.clients {
            let _ = client.shutdown();
        }
    }
    eprintln!(
        "synchronizer checker: {schedules} schedule(s), {ops} operations, {} violation(s) in {:.1} s",
        violations.len(),
        started.elapsed().as_secs_f64()
    );
    assert!(
        violations.is_empty(),
        "violations:\n{}",
        violations.join("\n")
    );
}
