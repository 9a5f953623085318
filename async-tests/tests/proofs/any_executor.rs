//! Any executor: one small scenario (take, contend across two clients,
//! release, an owner's reentrancy across tasks on different threads, a
//! guard held across `.await` and moved into another task that drops it;
//! then a semaphore's permit, a latch's wait, a multi-lock and a RedLock
//! contended the same way) passes on tokio's two runtimes, on smol and on
//! a plain `block_on`.
//!
//! Each executor runs on a thread that cannot touch a socket
//! (`no_sockets.rs`), with every thread it starts: every poll, waker and
//! guard drop of the scenario runs there, so any Redis I/O in one of them
//! would fail the scenario. Its blocking checks run on a side thread.

use std::future::Future;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use redhold::{Client, MultiLock, Owner, RedLock};

use crate::executors::{eventually, nap, run, spawn, Executor};
use crate::no_sockets::{assert_filtered, on_a_filtered_thread, warm_up};
use crate::side::Side;
use crate::support::RedisServer;
use crate::watch::Watch;

/// How long any step may take before the scenario has failed: far more
/// than a step needs (milliseconds), far less than a lock's TTL (30 s),
/// so that nothing passes by an expiry.
const STEP: Duration = Duration::from_secs(10);

#[test]
fn on_tokio_multi_thread() {
    proof("tokio-multi-thread", |scenario| {
        run::tokio_multi_thread(scenario)
    });
}

#[test]
fn on_tokio_current_thread() {
    proof("tokio-current-thread", |scenario| {
        run::tokio_current_thread(scenario)
    });
}

#[test]
fn on_smol() {
    proof("smol", run::smol);
}

#[test]
fn on_a_plain_block_on() {
    proof("block-on", run::plain);
}

/// What the scenario works with.
#[derive(Clone)]
struct World {
    a: Client,
    b: Client,
    server: Arc<RedisServer>,
    side: Arc<Side>,
    watch: Arc<Watch>,
}

impl World {
    /// Whether `name` exists, asked from the side thread.
    fn exists(&self, name: &str) -> bool {
        let (server, name) = (Arc::clone(&self.server), name.to_owned());
        self.side.run(move || server.exists(&name))
    }
}

type Scenario =
    Box<dyn FnOnce(Arc<dyn Executor>) -> std::pin::Pin<Box<dyn Future<Output = ()>>> + Send>;

/// Runs the scenario on `executor`, on a thread without sockets.
fn proof(name: &str, executor: impl FnOnce(Scenario) + Send) {
    let _turn = crate::serial();
    let server = Arc::new(RedisServer::start());
    let world = World {
        a: server.client(),
        b: server.client(),
        server: Arc::clone(&server),
        side: Arc::new(Side::start()),
        watch: Watch::new(),
    };
    warm_up(&world.a);
    warm_up(&world.b);
    let scenario: Scenario = {
        let world = world.clone();
        Box::new(move |executor| Box::pin(scenario(executor, world)))
    };
    on_a_filtered_thread(name, move || executor(scenario));
    eprintln!("any executor, {name}: {}", world.watch.report());
    world.a.shutdown().expect("a's shutdown");
    world.b.shutdown().expect("b's shutdown");
}

async fn scenario(executor: Arc<dyn Executor>, world: World) {
    assert_filtered();
    let World { a, b, watch, .. } = world.clone();
    let name = format!("any:{}", executor.name());

    // Take.
    let lock = a.lock(name.as_str());
    let guard = watch
        .watch(|| lock.lock_async())
        .await
        .expect("an uncontended lock_async");
    assert!(world.exists(&name));
    let again = watch
        .watch(|| lock.try_lock_async())
        .await
        .expect("try_lock_async");
    assert!(
        again.is_none(),
        "a thread's handle takes a new owner each call: not reentrant"
    );

    // Contend across two clients: b's task waits until a's guard drops.
    let waiter = spawn(&*executor, {
        let lock = b.lock(name.as_str());
        let watch = Arc::clone(&watch);
        async move {
            assert_filtered();
            let asked = Instant::now();
            let guard = watch
                .watch(|| lock.lock_async())
                .await
                .expect("b's lock_async");
            (asked.elapsed(), guard)
        }
    });
    assert!(
        eventually(STEP, || b.stats().parked_waiters == 1).await,
        "b's task never parked: {:?}",
        b.stats()
    );
    // Held across an await, then released: the drop returns at once.
    nap(Duration::from_millis(30)).await;
    let dropped = Instant::now();
    watch.drop_guard(guard);
    let drop_took = dropped.elapsed();
    let (waited, guard) = waiter.await;
    assert!(
        waited >= Duration::from_millis(30),
        "b took a held lock: {waited:?}"
    );
    assert!(waited < STEP, "b waited {waited:?}");
    assert!(
        drop_took < Duration::from_millis(500),
        "a guard's drop blocked {drop_took:?}"
    );
    watch
        .watch(|| guard.unlock_async())
        .await
        .expect("unlock_async");
    assert!(
        !world.exists(&name),
        "unlock_async returned before the release"
    );

    owner_reentrancy(&executor, &world).await;
    guard_moved_to_another_task(&executor, &world).await;
    semaphore_and_latch(&executor, &world).await;
    multi_and_red_locks(&executor, &world).await;
}

/// One owner takes a lock in one task and re-enters it in another, on
/// another thread where the executor has several: the two holds are the
/// owner's, another client waits for both.
async fn owner_reentrancy(executor: &Arc<dyn Executor>, world: &World) {
    let watch = &world.watch;
    let name = format!("any:{}:owner", executor.name());
    let lock = world.a.lock(name.as_str()).for_owner(Owner::new());
    let (held, first_holds) = tokio::sync::oneshot::channel();
    let (reentered, second_done) = std::sync::mpsc::channel::<()>();
    let parallel = executor.parallel();
    let first = spawn(&**executor, {
        let lock = lock.clone();
        let watch = Arc::clone(watch);
        async move {
            let guard = watch
                .watch(|| lock.lock_async())
                .await
                .expect("the owner's first hold");
            let _ = held.send(thread::current().id());
            if parallel {
                // Keep this thread busy, so that the second task runs on
                // another one.
                second_done
                    .recv_timeout(STEP)
                    .expect("the second task never re-entered");
            }
            guard
        }
    });
    let first_thread = first_holds.await.expect("the first task");
    let second = spawn(&**executor, {
        let lock = lock.clone();
        let watch = Arc::clone(watch);
        async move {
            assert_filtered();
            let guard = watch
                .watch(|| lock.try_lock_async())
                .await
                .expect("the owner's second hold")
                .expect("an owner re-enters its lock from another task");
            let _ = reentered.send(());
            (thread::current().id(), guard)
        }
    });
    let (second_thread, second_guard) = second.await;
    let first_guard = first.await;
    if parallel {
        assert_ne!(
            first_thread, second_thread,
            "the two tasks ran on one thread"
        );
    }
    let holds = {
        let lock = lock.clone();
        world
            .side
            .run(move || lock.hold_count().expect("hold_count"))
    };
    assert_eq!(holds, 2, "the owner's holds");
    let other = world.b.lock(name.as_str());
    let busy = watch
        .watch(|| other.try_lock_async())
        .await
        .expect("b's try");
    assert!(busy.is_none(), "b took a lock the owner holds");

    // Each hold released in a task of its own; b waits for both.
    let dropped = spawn(&**executor, {
        let watch = Arc::clone(watch);
        async move { watch.drop_guard(first_guard) }
    });
    let unlocked = spawn(&**executor, {
        let watch = Arc::clone(watch);
        async move {
            watch
                .watch(|| second_guard.unlock_async())
                .await
                .expect("the second hold's unlock_async")
        }
    });
    let taken = watch
        .watch(|| other.try_lock_for_async(STEP))
        .await
        .expect("b's wait")
        .expect("b gets the lock once both holds are released");
    dropped.await;
    unlocked.await;
    watch.drop_guard(taken);
    assert!(
        eventually(STEP, || !world.exists(&name)).await,
        "b's queued release never ran"
    );
}

/// A guard held across awaits, moved into another task which drops it:
/// the release runs, another client gets the lock.
async fn guard_moved_to_another_task(executor: &Arc<dyn Executor>, world: &World) {
    let watch = &world.watch;
    let name = format!("any:{}:moved", executor.name());
    let lock = world.a.lock(name.as_str());
    let guard = watch.watch(|| lock.lock_async()).await.expect("a's lock");
    nap(Duration::from_millis(5)).await;
    // Still held after the await.
    assert!(guard.is_held());
    let here = thread::current().id();
    let dropper = spawn(&**executor, {
        let watch = Arc::clone(watch);
        async move {
            nap(Duration::from_millis(20)).await;
            watch.drop_guard(guard);
            thread::current().id()
        }
    });
    let other = world.b.lock(name.as_str());
    let taken = watch
        .watch(|| other.try_lock_for_async(STEP))
        .await
        .expect("b's wait")
        .expect("b gets the lock once the moved guard drops");
    let dropped_on = dropper.await;
    if executor.parallel() {
        assert_ne!(
            here, dropped_on,
            "the guard was dropped on the thread that took it"
        );
    }
    watch.drop_guard(taken);
    assert!(
        eventually(STEP, || !world.exists(&name)).await,
        "b's queued release never ran"
    );
}

/// A semaphore of one permit contended across the clients (the permit's
/// drop gives it back on the client's threads), and a latch waited for in
/// a task and opened from the side.
async fn semaphore_and_latch(executor: &Arc<dyn Executor>, world: &World) {
    let watch = &world.watch;
    let name = format!("any:{}:semaphore", executor.name());
    let semaphore = world.a.semaphore(name.as_str());
    let set = semaphore.clone();
    assert!(world
        .side
        .run(move || set.try_set_permits(1).expect("try_set_permits")));
    let permit = watch
        .watch(|| semaphore.acquire_async())
        .await
        .expect("a's permit");
    let waiter = spawn(&**executor, {
        let semaphore = world.b.semaphore(name.as_str());
        let watch = Arc::clone(watch);
        async move {
            watch
                .watch(|| semaphore.acquire_async())
                .await
                .expect("b's permit")
        }
    });
    assert!(
        eventually(STEP, || world.b.stats().parked_waiters == 1).await,
        "b's permit never parked: {:?}",
        world.b.stats()
    );
    watch.drop_guard(permit);
    let permit = waiter.await;
    assert_eq!(permit.permits(), 1);
    watch.drop_guard(permit);
    let available = || {
        let semaphore = semaphore.clone();
        world
            .side
            .run(move || semaphore.available_permits().expect("available_permits"))
    };
    assert!(
        eventually(STEP, || available() == 1).await,
        "the permit never came back"
    );

    let name = format!("any:{}:latch", executor.name());
    let latch = world.a.count_down_latch(name.as_str());
    let set = latch.clone();
    assert!(world
        .side
        .run(move || set.try_set_count(1).expect("try_set_count")));
    let opened = spawn(&**executor, {
        let latch = world.b.count_down_latch(name.as_str());
        let watch = Arc::clone(watch);
        async move {
            watch
                .watch(|| latch.wait_async())
                .await
                .expect("the latch's wait")
        }
    });
    assert!(
        eventually(STEP, || world.b.stats().parked_waiters == 1).await,
        "the latch's waiter never parked: {:?}",
        world.b.stats()
    );
    world
        .side
        .run(move || latch.count_down().expect("count_down"));
    assert!(
        opened.await,
        "the latch's wait ended without the latch open"
    );
}

/// A multi-lock waits for one of its locks held by another client's
/// multi-lock; a RedLock is refused while another holds it, then taken.
async fn multi_and_red_locks(executor: &Arc<dyn Executor>, world: &World) {
    let watch = &world.watch;
    let names: Vec<String> = (0..3)
        .map(|n| format!("any:{}:multi:{n}", executor.name()))
        .collect();
    let multi = |client: &Client, of: &[String]| {
        MultiLock::new(of.iter().map(|n| client.lock(n.as_str())).collect())
    };
    let first = multi(&world.a, &names[..2]);
    let held = watch
        .watch(|| first.lock_async())
        .await
        .expect("a's multi-lock");
    let waiter = spawn(&**executor, {
        let second = multi(&world.b, &names[1..]);
        let watch = Arc::clone(watch);
        async move {
            watch
                .watch(|| second.try_lock_for_async(STEP))
                .await
                .expect("b's multi-lock")
                .expect("b's multi-lock once a's is released")
        }
    });
    nap(Duration::from_millis(20)).await;
    watch.drop_guard(held);
    let held = waiter.await;
    assert_eq!(held.guards().len(), 2);
    watch.drop_guard(held);
    for name in &names {
        assert!(
            eventually(STEP, || !world.exists(name)).await,
            "{name} stayed held"
        );
    }

    let names: Vec<String> = (0..3)
        .map(|n| format!("any:{}:red:{n}", executor.name()))
        .collect();
    let red =
        |client: &Client| RedLock::new(names.iter().map(|n| client.lock(n.as_str())).collect());
    let (ours, theirs) = (red(&world.a), red(&world.b));
    let held = watch
        .watch(|| ours.lock_async())
        .await
        .expect("a's RedLock");
    assert_eq!(held.servers_held(), 3);
    let refused = watch
        .watch(|| theirs.try_lock_async())
        .await
        .expect("b's try");
    assert!(refused.is_none(), "b took a RedLock a holds");
    watch
        .watch(|| held.unlock_async())
        .await
        .expect("a's RedLock unlock_async");
    let taken = watch
        .watch(|| theirs.try_lock_async())
        .await
        .expect("b's try")
        .expect("b takes the RedLock once a released it");
    watch.drop_guard(taken);
    for name in &names {
        assert!(
            eventually(STEP, || !world.exists(name)).await,
            "{name} stayed held"
        );
    }
}
