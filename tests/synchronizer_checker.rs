//! A seeded, randomized checker for the semaphore and the count-down latch:
//! threads of two clients behind a fault proxy (and one client without)
//! take and give back permits and count a latch down in random ways, while
//! the proxy loses requests and replies and holds requests back past the
//! response timeout, and (in three schedules of four) a storm thread
//! partitions the proxy for longer than a request latch lives (3–5 s,
//! once right after a lost reply) and stalls the server (`DEBUG SLEEP`
//! 1–3 s: queued requests run after their callers gave up). The clients
//! have connect 200 ms, response 300 ms, 1 retry, 300 ms retry delay (a
//! latch lives 2.3 s) and ride out 8 s of outage. The oracle:
//!
//! - **permits**: never more permits in use at once than were set and
//!   added (counted in the process as sections begin and end); at
//!   quiescence (every actor stopped, every permit given back, the storm
//!   over and a settle period longer than a latch's life) Redis counts
//!   exactly the permits set and added. The one excuse: a give-back or an
//!   `add_permits` that returned an error to its caller may or may not
//!   have happened (both are counted and printed). An acquire that
//!   returned an error must have taken nothing; one that returned a
//!   permit must have taken only that.
//! - **liveness** (`synchronizer_checker/liveness.rs`): with no fault on,
//!   no waiter (of any client) still waits for permits that have been
//!   free for [`liveness::BOUND`].
//! - **latch**: no waiter goes on before as many count-downs began as the
//!   latch was armed with; half the latches are armed with one more than
//!   will ever count down, so they must never open; the final count is
//!   exact (a retried count-down must not count twice), give or take the
//!   count-downs that returned an error; when every count-down succeeded
//!   on a latch armed to open, every waiter goes on.
//! - **expirable permits**: never more permits in use than given, a holder
//!   counting itself only until its lease ends (holders sometimes overrun
//!   it, as a stalled process would); once every lease has ended, Redis
//!   counts exactly the permits given.
//!
//! `REDHOLD_SYNC_SECS` sets the budget (default 15 s: one schedule with a
//! storm takes about 15 s, its partitions and its settle period included);
//! `REDHOLD_SYNC_SEED=<seed>` replays one schedule's random choices and
//! mode (the threads' timing is the machine's). Every seed is printed.

mod bounded;
#[allow(dead_code)]
#[path = "support/fault_proxy.rs"]
mod fault_proxy;
#[path = "synchronizer_checker/liveness.rs"]
mod liveness;
#[path = "synchronizer_checker/storm.rs"]
mod storm;
mod support;

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use fault_proxy::{Action, FaultProxy, Matcher, Rule};
use liveness::Waiters;
use parking_lot::Mutex;
use redhold::{Client, Interrupt};
use storm::{Weather, LATCH_LIFE};
use support::{server_version, RedisServer};

/// How long the actors of one schedule start operations.
const SCHEDULE: Duration = Duration::from_secs(4);
/// The clients' response timeout: the proxy holds requests back longer.
const RESPONSE_TIMEOUT: Duration = Duration::from_millis(300);
/// After the actors stopped and the storm ended: longer than a latch
/// lives, so every resend and every late request has run by then.
const SETTLE: Duration = Duration::from_millis(LATCH_LIFE.as_millis() as u64 + 700);
/// The longest wait of a waiting acquire.
const LONG_WAIT_MS: u64 = 6000;

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
    weather: Weather,
    /// Set once the storm is over (at once without faults).
    storm_over: AtomicBool,
    violations: Mutex<Vec<String>>,
    ops: AtomicU64,
}

impl World {
    fn new(faults: bool) -> World {
        let server = RedisServer::start_with_args(server_version().debug_command_args());
        let proxy = FaultProxy::start(server.port());
        let client = |url: String| {
            Client::builder()
                .url(url)
                .connect_timeout(Duration::from_millis(200))
                .response_timeout(RESPONSE_TIMEOUT)
                .retry_attempts(1)
                .retry_delay(Duration::from_millis(300))
                .outage_tolerance(Some(Duration::from_secs(8)))
                .build()
                .expect("client")
        };
        let clients = vec![
            client(proxy.url()),
            client(proxy.url()),
            client(server.url()),
        ];
        World {
            server,
            proxy,
            clients,
            faults,
            weather: Weather::new(),
            storm_over: AtomicBool::new(!faults),
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

    /// Waits for quiescence once the caller's actors stopped: the storm
    /// over, then [`SETTLE`].
    fn settle(&self) {
        while !self.storm_over.load(Ordering::SeqCst) {
            thread::sleep(Duration::from_millis(50));
        }
        thread::sleep(SETTLE);
    }
}

/// What a semaphore schedule counts besides the permits in use.
#[derive(Default)]
struct Ledger {
    /// Permits the occupancy may reach: set, plus every add begun.
    limit: AtomicI64,
    /// Added with an `Ok`.
    added: AtomicI64,
    /// Adds that returned an error: they may or may not have happened.
    unsure_added: AtomicI64,
    /// Give-backs that returned an error to their caller.
    unsure_given_back: AtomicI64,
}

/// One acquire of `want` permits in a random way; waiting ones register
/// with `waiters` for the liveness watch.
fn acquire_one(
    rng: &mut Rng,
    sem: &redhold::Semaphore,
    want: u32,
    waiters: &Waiters,
) -> redhold::Result<Option<redhold::Permit>> {
    let waiting = |wait: Duration, call: &dyn Fn() -> redhold::Result<Option<redhold::Permit>>| {
        let token = waiters.enter(u64::from(want), Instant::now() + wait);
        let got = call();
        waiters.leave(token);
        got
    };
    match rng.below(6) {
        0 => sem.try_acquire_many(want),
        1 => sem.try_acquire_many_for(want, rng.millis(300)),
        2 => {
            let after = rng.millis(200);
            interruptible(sem, want, after)
        }
        3 | 4 => {
            let wait = Duration::from_millis(2000 + rng.below(LONG_WAIT_MS - 2000));
            waiting(wait, &|| sem.try_acquire_many_for(want, wait))
        }
        // An `acquire` that waits as long as it takes, but is rescued
        // should the schedule leak every permit.
        _ => {
            let rescue = Duration::from_secs(12);
            waiting(rescue, &|| interruptible(sem, want, rescue))
        }
    }
}

/// `acquire_many_interruptibly`, interrupted `after`.
fn interruptible(
    sem: &redhold::Semaphore,
    want: u32,
    after: Duration,
) -> redhold::Result<Option<redhold::Permit>> {
    let stop = Interrupt::new();
    let trigger = stop.clone();
    let done = Arc::new(AtomicBool::new(false));
    let finished = Arc::clone(&done);
    let stopper = thread::spawn(move || {
        let until = Instant::now() + after;
        while Instant::now() < until && !finished.load(Ordering::SeqCst) {
            thread::sleep(Duration::from_millis(10));
        }
        trigger.trigger();
    });
    let got = sem.acquire_many_interruptibly(want, &stop).map(Some);
    done.store(true, Ordering::SeqCst);
    let _ = stopper.join();
    got
}

/// Permits: threads take 1..=N permits in random ways, check that no more
/// than were set and added are in use, and give them back in random ways;
/// one thread may add a permit; a watch checks the waiters' liveness.
fn semaphore_schedule(seed: u64, world: &Arc<World>) {
    let mut rng = Rng(seed);
    let name = format!("sem-{seed}");
    let permits = 1 + rng.below(3) as i64;
    world.clients[2]
        .semaphore(name.as_str())
        .set_permits(permits as u32)
        .unwrap();
    let in_use = Arc::new(AtomicI64::new(0));
    let ledger = Arc::new(Ledger::default());
    ledger.limit.store(permits, Ordering::SeqCst);
    let waiters = Arc::new(Waiters::default());
    let stop_watch = Arc::new(AtomicBool::new(false));
    let watch = {
        let (world, waiters, stop) = (
            Arc::clone(world),
            Arc::clone(&waiters),
            Arc::clone(&stop_watch),
        );
        let name = name.clone();
        thread::spawn(move || {
            liveness::watch(&world.server.url(), &name, &waiters, &world.weather, &stop)
        })
    };
    let until = Instant::now() + SCHEDULE;
    let mut actors: Vec<_> = (0..5u64)
        .map(|i| {
            let (world, in_use, ledger, waiters) = (
                Arc::clone(world),
                Arc::clone(&in_use),
                Arc::clone(&ledger),
                Arc::clone(&waiters),
            );
            let (name, mut rng) = (name.clone(), Rng(seed ^ (i + 1).wrapping_mul(0x51)));
            bounded::spawn("permit actor", move || {
                let client = &world.clients[(i % 3) as usize];
                let sem = client.semaphore(name.as_str());
                while Instant::now() < until {
                    world.maybe_fault(&mut rng, &name, 4);
                    let want = 1 + rng.below(permits as u64) as u32;
                    let taken = acquire_one(&mut rng, &sem, want, &waiters);
                    world.ops.fetch_add(1, Ordering::Relaxed);
                    let Ok(Some(permit)) = taken else { continue };
                    let now = in_use.fetch_add(i64::from(want), Ordering::SeqCst) + i64::from(want);
                    let limit = ledger.limit.load(Ordering::SeqCst);
                    if now > limit {
                        world.violation(format!(
                            "seed {seed}: {now} permits in use of {limit} ({name})"
                        ));
                    }
                    thread::sleep(rng.millis(30));
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
                        ledger
                            .unsure_given_back
                            .fetch_add(i64::from(want), Ordering::SeqCst);
                    }
                }
            })
        })
        .collect();
    if rng.below(2) == 0 {
        let (world, ledger, name) = (Arc::clone(world), Arc::clone(&ledger), name.clone());
        let (after, by) = (
            rng.millis(SCHEDULE.as_millis() as u64),
            rng.below(3) as usize,
        );
        actors.push(bounded::spawn("permit adder", move || {
            thread::sleep(after);
            ledger.limit.fetch_add(1, Ordering::SeqCst);
            world.ops.fetch_add(1, Ordering::Relaxed);
            match world.clients[by].semaphore(name.as_str()).add_permits(1) {
                Ok(()) => ledger.added.fetch_add(1, Ordering::SeqCst),
                Err(_) => ledger.unsure_added.fetch_add(1, Ordering::SeqCst),
            };
        }));
    }
    for actor in actors {
        actor.join_within(SCHEDULE + Duration::from_secs(40));
    }
    stop_watch.store(true, Ordering::SeqCst);
    if let Some(starved) = watch.join().expect("the liveness watch panicked") {
        world.violation(format!("seed {seed}: {starved} ({name})"));
    }
    world.settle();
    let left: i64 = world.server.cmd::<String>(&["GET", &name]).parse().unwrap();
    let expected = permits + ledger.added.load(Ordering::SeqCst);
    let unsure_added = ledger.unsure_added.load(Ordering::SeqCst);
    let unsure_back = ledger.unsure_given_back.load(Ordering::SeqCst);
    if unsure_added + unsure_back > 0 {
        eprintln!(
            "  {name}: excused {unsure_back} permit(s) whose give-back and {unsure_added} whose \
             add returned an error"
        );
    }
    if left > expected + unsure_added {
        world.violation(format!(
            "seed {seed}: {left} permits in Redis at quiescence, {expected} set and added \
             ({unsure_added} more maybe): permits minted ({name})"
        ));
    } else if left < expected - unsure_back {
        world.violation(format!(
            "seed {seed}: {left} permits in Redis at quiescence, {expected} set and added, \
             {unsure_back} given back with an error: permits leaked ({name})"
        ));
    }
}

/// Latch: counters count down once each at random times while waiters wait
/// in random ways; no waiter may go on before every count-down began. Half
/// the latches get one count more than will ever come: they never open.
fn latch_schedule(seed: u64, world: &Arc<World>) {
    let mut rng = Rng(seed.rotate_left(17));
    let name = format!("latch-{seed}");
    let counters = 2 + rng.below(4);
    let spare = rng.below(2);
    let count = counters + spare;
    assert!(world.clients[2]
        .count_down_latch(name.as_str())
        .try_set_count(count)
        .unwrap());
    let begun = Arc::new(AtomicU64::new(0));
    let failed = Arc::new(AtomicU64::new(0));
    let mut threads = Vec::new();
    for i in 0..counters {
        let (world, begun, failed) = (Arc::clone(world), Arc::clone(&begun), Arc::clone(&failed));
        let (name, mut rng) = (name.clone(), Rng(seed ^ (i + 7).wrapping_mul(0x9E37)));
        threads.push(bounded::spawn("count-down actor", move || {
            thread::sleep(rng.millis(SCHEDULE.as_millis() as u64));
            world.maybe_fault(&mut rng, &name, 2);
            let latch = world.clients[rng.below(3) as usize].count_down_latch(name.as_str());
            begun.fetch_add(1, Ordering::SeqCst);
            world.ops.fetch_add(1, Ordering::Relaxed);
            if latch.count_down().is_err() {
                failed.fetch_add(1, Ordering::SeqCst);
            }
        }));
    }
    // The waiters give up once every count-down and the storm are over
    // and the latch has had time to open.
    let give_up = Interrupt::new();
    let waiters: Vec<_> = (0..4u64)
        .map(|i| {
            let (world, begun, give_up) = (Arc::clone(world), Arc::clone(&begun), give_up.clone());
            let name = name.clone();
            bounded::spawn("latch waiter", move || {
                let latch = world.clients[(i % 3) as usize].count_down_latch(name.as_str());
                let passed = latch.wait_interruptibly(&give_up).is_ok();
                world.ops.fetch_add(1, Ordering::Relaxed);
                let begun = begun.load(Ordering::SeqCst);
                if passed && begun < count {
                    world.violation(format!(
                        "seed {seed}: a waiter went on after {begun} of {count} count-downs ({name})"
                    ));
                }
                passed
            })
        })
        .collect();
    for thread in threads {
        thread.join_within(SCHEDULE + Duration::from_secs(30));
    }
    world.settle();
    give_up.trigger();
    let passed = waiters
        .into_iter()
        .map(|w| w.join_within(Duration::from_secs(30)))
        .filter(|passed| *passed)
        .count();
    let failed = failed.load(Ordering::SeqCst);
    if failed == 0 && spare == 0 && passed != 4 {
        world.violation(format!(
            "seed {seed}: every count-down succeeded, yet only {passed} of 4 waiters went on ({name})"
        ));
    }
    let left: Option<u64> = world.server.cmd(&["GET", &name]);
    let left = left.unwrap_or(0);
    if left < spare || left > spare + failed {
        world.violation(format!(
            "seed {seed}: the latch counts {left} at quiescence; armed with {count}, \
             {counters} count-downs of which {failed} returned an error: \
             expected {spare}..={} ({name})",
            spare + failed
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
                    // Now and then a wait longer than a partition: one
                    // that rides it out and resends after it.
                    let wait = match rng.below(3) {
                        0 => Duration::from_millis(5000 + rng.below(2000)),
                        _ => rng.millis(400),
                    };
                    let asked = Instant::now();
                    let taken = sem.try_acquire_for(wait, lease);
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
    // Every lease has ended and every resend and late request ran.
    world.settle();
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

/// Schedule `n`'s seed: its low two bits are `n % 4`, and a seed whose
/// low bits are 3 runs without faults, so every mode runs in a long run
/// and the first schedule always has a storm.
fn stamp(seed: u64, n: u64) -> u64 {
    (seed & !3) | (n % 4)
}

#[test]
fn no_permit_out_of_nothing_and_no_latch_open_too_early() {
    let budget = std::env::var("REDHOLD_SYNC_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .map_or(Duration::from_secs(15), Duration::from_secs);
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
    // A schedule with a storm takes about 15 s: start one only if it may
    // end within the budget.
    while schedules == 0 || (fixed.is_none() && started.elapsed() + SCHEDULE * 2 < budget) {
        let seed = fixed.unwrap_or_else(|| stamp(master.next(), schedules));
        let faults = seed & 3 != 3;
        eprintln!("synchronizer checker: seed {seed} (faults: {faults}; REDHOLD_SYNC_SEED={seed} replays it)");
        let world = Arc::new(World::new(faults));
        let storm = faults.then(|| {
            let world = Arc::clone(&world);
            thread::spawn(move || {
                let names = [
                    format!("sem-{seed}"),
                    format!("sem-{seed}"),
                    format!("pes-{seed}"),
                    format!("latch-{seed}"),
                ];
                let done = storm::blow(
                    &mut Rng(seed.rotate_left(47)),
                    &world.proxy.arming(),
                    world.server.port(),
                    &world.weather,
                    &names,
                    SCHEDULE,
                );
                world.storm_over.store(true, Ordering::SeqCst);
                done
            })
        });
        let (a, b, c) = (Arc::clone(&world), Arc::clone(&world), Arc::clone(&world));
        let sem = thread::spawn(move || semaphore_schedule(seed, &a));
        let latch = thread::spawn(move || latch_schedule(seed, &b));
        let expirable = thread::spawn(move || expirable_schedule(seed, &c));
        sem.join().expect("the semaphore schedule panicked");
        latch.join().expect("the latch schedule panicked");
        expirable.join().expect("the expirable schedule panicked");
        if let Some(storm) = storm {
            let done = storm.join().expect("the storm panicked");
            eprintln!("  storm: {}", done.join("; "));
        }
        eprintln!("  faults fired: {}", world.proxy.summary());
        let found = world.violations.lock().len();
        eprintln!(
            "  {} operations, {found} violation(s), {:.1} s into the run",
            world.ops.load(Ordering::Relaxed),
            started.elapsed().as_secs_f64()
        );
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
