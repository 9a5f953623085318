//! Holds that belong to an owner, not a thread (issue 41): reentrant for the
//! owner from any thread, guards that move between threads and are dropped
//! anywhere, every kind and the multi-locks, leaked holds, the watchdog,
//! loss reporting, and one owner driven from many threads at once.

mod bounded;
#[allow(dead_code)]
#[path = "support/fault_proxy.rs"]
mod fault_proxy;
mod support;

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use bounded::wait_until;
use fault_proxy::{Action, FaultProxy, Matcher, Rule};
use redhold::{Error, MultiLock, Owner, OwnerGuard, RedLock};
use support::RedisServer;

/// Generous bound for anything that should take milliseconds.
const PROMPTLY: Duration = Duration::from_secs(10);

fn count(server: &RedisServer, name: &str, field: &str) -> i64 {
    let count: Option<i64> = server.cmd(&["HGET", name, field]);
    count.unwrap_or(0)
}

fn assert_send_sync_static<T: Send + Sync + 'static>(_: &T) {}

#[test]
fn an_owner_reenters_from_another_thread_and_releases_anywhere() {
    let server = RedisServer::start();
    let client = server.client();
    let owner = Owner::new();
    let lock = client.lock("owner:reentry").for_owner(owner);
    let field = lock.holder_id();
    assert!(field.ends_with(&format!(":{}", owner.id())), "{field}");
    let first = lock.lock().unwrap();
    assert_send_sync_static(&first);
    assert_eq!(first.owner(), owner);
    // The same owner from another thread: a re-entry, counted in Redis.
    let second = {
        let lock = lock.clone();
        thread::spawn(move || lock.lock().unwrap()).join().unwrap()
    };
    assert_eq!(count(&server, "owner:reentry", &field), 2);
    assert_eq!(lock.hold_count().unwrap(), 2);
    // The calling thread is another holder: it waits for the owner.
    let thread_lock = client.lock("owner:reentry");
    assert!(thread_lock.try_lock().unwrap().is_none());
    assert!(!thread_lock.is_held_by_current_thread().unwrap());
    // Released on two other threads.
    thread::spawn(move || drop(first)).join().unwrap();
    assert_eq!(count(&server, "owner:reentry", &field), 1);
    thread::spawn(move || second.unlock())
        .join()
        .unwrap()
        .unwrap();
    assert!(!server.exists("owner:reentry"));
    assert!(thread_lock.try_lock().unwrap().is_some());
}

#[test]
fn an_owner_waits_for_a_thread_and_the_thread_for_the_owner() {
    let server = RedisServer::start();
    let client = server.client();
    let lock = client.lock("owner:apart");
    let owned = lock.for_owner(Owner::new());
    let mine = lock.lock().unwrap();
    assert!(owned.try_lock().unwrap().is_none());
    drop(mine);
    let theirs = owned.lock().unwrap();
    assert!(lock.try_lock().unwrap().is_none());
    // Another owner is another holder too.
    assert!(lock.for_owner(Owner::new()).try_lock().unwrap().is_none());
    drop(theirs);
    assert!(lock.try_lock().unwrap().is_some());
}

#[test]
fn a_guard_moved_through_a_channel_is_released_where_it_is_dropped() {
    let server = RedisServer::start();
    let client = server.client();
    let other = server.client();
    let (send, receive) = mpsc::channel::<OwnerGuard>();
    let releaser = thread::spawn(move || {
        let guard = receive.recv().unwrap();
        assert!(guard.is_held());
        thread::sleep(Duration::from_millis(100));
        drop(guard);
    });
    let waiter = {
        let other = other.clone();
        thread::spawn(move || {
            let started = Instant::now();
            let guard = other.lock("owner:channel").lock().unwrap();
            drop(guard);
            started.elapsed()
        })
    };
    let guard = client.lock("owner:channel").for_owner(Owner::new()).lock();
    send.send(guard.unwrap()).unwrap();
    releaser.join().unwrap();
    // Woken by the release on the other thread, not by the TTL (30 s).
    let waited = waiter.join().unwrap();
    assert!(waited < PROMPTLY, "the other client waited {waited:?}");
}

#[test]
fn every_kind_takes_and_releases_for_an_owner_on_other_threads() {
    let server = RedisServer::start();
    let client = server.client();
    let owner = Owner::new();
    fn moved<K: redhold::LockKind>(guard: OwnerGuard<K>) {
        thread::spawn(move || drop(guard)).join().unwrap();
    }
    moved(client.lock("owner:plain").for_owner(owner).lock().unwrap());
    moved(
        client
            .fair_lock("owner:fair")
            .for_owner(owner)
            .lock()
            .unwrap(),
    );
    moved(
        client
            .spin_lock("owner:spin")
            .for_owner(owner)
            .lock()
            .unwrap(),
    );
    let fenced = client.fenced_lock("owner:fenced").for_owner(owner);
    let first = fenced.lock().unwrap();
    let token = first.token();
    moved(first);
    let second = fenced.lock().unwrap();
    assert!(second.token() > token);
    moved(second);
    let rw = client.read_write_lock("owner:rw");
    let write = rw.write().for_owner(owner).lock().unwrap();
    // The owner that writes may read too (a downgrade), from anywhere.
    let read = {
        let read = rw.read().for_owner(owner);
        thread::spawn(move || read.lock().unwrap()).join().unwrap()
    };
    moved(write);
    // Another owner reads beside it.
    let also = rw.read().for_owner(Owner::new()).lock().unwrap();
    assert!(rw.write().try_lock().unwrap().is_none());
    moved(read);
    moved(also);
    for name in [
        "owner:plain",
        "owner:fair",
        "owner:spin",
        "owner:fenced",
        "owner:rw",
    ] {
        assert!(!server.exists(name), "{name} is still held");
    }
}

#[test]
fn multi_locks_and_red_locks_are_taken_for_an_owner() {
    let servers = [
        RedisServer::start(),
        RedisServer::start(),
        RedisServer::start(),
    ];
    let clients: Vec<_> = servers.iter().map(RedisServer::client).collect();
    let owner = Owner::new();
    let multi = MultiLock::of([
        redhold::MultiMember::from(clients[0].lock("owner:m1")),
        clients[0].fair_lock("owner:m2").into(),
    ])
    .for_owner(owner);
    let guard = multi.lock().unwrap();
    assert_send_sync_static(&guard);
    // Reentrant for the owner from another thread.
    let again = {
        let multi = multi.clone();
        thread::spawn(move || multi.try_lock().unwrap().unwrap())
            .join()
            .unwrap()
    };
    assert!(clients[0].lock("owner:m1").try_lock().unwrap().is_none());
    thread::spawn(move || {
        drop(again);
        drop(guard);
    })
    .join()
    .unwrap();
    assert!(!servers[0].exists("owner:m1") && !servers[0].exists("owner:m2"));

    let red = RedLock::new(clients.iter().map(|c| c.lock("owner:red")).collect()).for_owner(owner);
    let guard = red.lock().unwrap();
    assert_eq!(guard.servers_held(), 3);
    assert!(
        RedLock::new(clients.iter().map(|c| c.lock("owner:red")).collect())
            .try_lock()
            .unwrap()
            .is_none()
    );
    thread::spawn(move || guard.unlock())
        .join()
        .unwrap()
        .unwrap();
    assert!(servers.iter().all(|s| !s.exists("owner:red")));
}

#[test]
fn a_leaked_hold_is_released_by_the_owner_from_another_thread() {
    let server = RedisServer::start();
    let client = server.client();
    let owner = Owner::new();
    let lock = client.lock("owner:leak").for_owner(owner);
    lock.lock().unwrap().leak();
    let guarded = lock.lock().unwrap();
    // A live guard's hold is not released by `unlock`, a leaked one is.
    let lock2 = lock.clone();
    thread::spawn(move || lock2.unlock())
        .join()
        .unwrap()
        .unwrap();
    assert_eq!(lock.hold_count().unwrap(), 1);
    assert!(matches!(lock.unlock(), Err(Error::NotHeld { .. })));
    drop(guarded);
    assert!(!server.exists("owner:leak"));
}

#[test]
fn the_watchdog_renews_an_owners_hold_and_reports_its_loss_with_the_owner() {
    let server = RedisServer::start();
    let lost = Arc::new(Mutex::new(Vec::new()));
    let client = {
        let lost = Arc::clone(&lost);
        server
            .builder()
            .watchdog_timeout(Duration::from_millis(600))
            .on_hold_lost(move |hold| lost.lock().unwrap().push(hold.clone()))
            .build()
            .unwrap()
    };
    let owner = Owner::new();
    let guard = client
        .lock("owner:watched")
        .for_owner(owner)
        .lock()
        .unwrap();
    assert_eq!(client.stats().owner_held_locks, 1);
    // Three watchdog timeouts later, still held and renewed.
    thread::sleep(Duration::from_millis(1900));
    assert!(guard.is_held());
    assert!(server.exists("owner:watched"));
    let ttl: i64 = server.cmd(&["PTTL", "owner:watched"]);
    assert!(ttl > 0 && ttl <= 600, "PTTL {ttl}");
    // Deleted behind its back: the watchdog reports it with the owner.
    assert!(server
        .client()
        .lock("owner:watched")
        .force_unlock()
        .unwrap());
    let reported = wait_until(PROMPTLY, || !lost.lock().unwrap().is_empty());
    assert!(reported.is_some(), "no loss reported");
    let hold = lost.lock().unwrap()[0].clone();
    assert_eq!(hold.lock, "owner:watched");
    assert_eq!(hold.owner, Some(owner));
    assert!(!guard.is_held());
    match guard.unlock() {
        Err(Error::LockLost { owner: Some(o), .. }) => assert_eq!(o, owner),
        other => panic!("expected LockLost naming the owner, got {other:?}"),
    }
    assert_eq!(client.stats().owner_held_locks, 0);
}

/// The lock of the storm below.
const NAME: &str = "owner:storm";

/// Eight threads of one owner take and drop one lock at random for a few
/// seconds while connections are killed and replies stall; another client
/// tries the lock all along and must never get it while a guard of the
/// owner stands. Afterwards Redis holds nothing of the owner.
#[test]
fn one_owner_from_eight_threads_keeps_exact_counts_through_faults() {
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.port());
    let client = redhold::Client::builder()
        .url(proxy.url())
        .connect_timeout(Duration::from_millis(300))
        .response_timeout(Duration::from_millis(400))
        .retry_attempts(2)
        .retry_delay(Duration::from_millis(20))
        .watchdog_timeout(Duration::from_secs(3))
        .build()
        .unwrap();
    let foreign = server.client();
    let name = NAME;
    let owner = Owner::new();
    let lock = client.lock(name).for_owner(owner);
    let field = lock.holder_id();
    drop(lock.lock().unwrap()); // loads the scripts
    let live = Arc::new(AtomicI64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let run_for = Duration::from_secs(4);
    let mut threads = Vec::new();
    for n in 0..8u64 {
        let (lock, live, stop) = (lock.clone(), Arc::clone(&live), Arc::clone(&stop));
        threads.push(thread::spawn(move || {
            let mut held: Vec<OwnerGuard> = Vec::new();
            let mut step = n;
            let mut taken = 0u32;
            while !stop.load(Ordering::SeqCst) {
                step = step
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                if held.len() < 3 && step >> 62 != 0 {
                    if let Ok(Some(guard)) = lock.try_lock_for(Duration::from_millis(200)) {
                        live.fetch_add(1, Ordering::SeqCst);
                        held.push(guard);
                        taken += 1;
                    }
                } else if let Some(guard) = held.pop() {
                    live.fetch_sub(1, Ordering::SeqCst);
                    drop(guard);
                }
            }
            for guard in held.drain(..) {
                live.fetch_sub(1, Ordering::SeqCst);
                drop(guard);
            }
            taken
        }));
    }
    let faults = {
        let (server_port, stop) = (server.port(), Arc::clone(&stop));
        let arming = proxy.arming();
        thread::spawn(move || {
            let side = redis::Client::open(format!("redis://127.0.0.1:{server_port}/")).unwrap();
            let mut conn = side.get_connection().unwrap();
            let mut round = 0u32;
            while !stop.load(Ordering::SeqCst) {
                thread::sleep(Duration::from_millis(300));
                round += 1;
                if round.is_multiple_of(2) {
                    let _: redis::RedisResult<i64> = redis::cmd("CLIENT")
                        .arg("KILL")
                        .arg("TYPE")
                        .arg("normal")
                        .arg("SKIPME")
                        .arg("yes")
                        .query(&mut conn);
                } else {
                    // The next script's reply stalls past the response
                    // timeout: its request ran, the caller does not know.
                    let _armed = arming.arm(Rule {
                        matcher: Matcher::script(NAME, &[]),
                        action: Action::DelayReply(Duration::from_millis(600)),
                    });
                    thread::sleep(Duration::from_millis(300));
                }
            }
        })
    };
    let mut intruded = 0u32;
    let started = Instant::now();
    while started.elapsed() < run_for {
        if let Ok(Some(guard)) = foreign.lock(name).try_lock() {
            // The owner cannot take the lock while this client holds it:
            // a guard counted now was live before it, a second holder.
            if live.load(Ordering::SeqCst) > 0 {
                intruded += 1;
            }
            drop(guard);
        }
        thread::sleep(Duration::from_millis(5));
    }
    stop.store(true, Ordering::SeqCst);
    let taken: u32 = threads.into_iter().map(|t| t.join().unwrap()).sum();
    faults.join().unwrap();
    eprintln!(
        "storm: the owner took the lock {taken} times on 8 threads in {run_for:?}; {:?}",
        client.stats()
    );
    assert_eq!(
        intruded, 0,
        "another client got the lock while the owner's guards stood"
    );
    assert!(taken > 20, "the owner took the lock only {taken} times");
    // Releases carried on in the background settle, then nothing is left.
    let settled = wait_until(PROMPTLY, || count(&server, name, &field) == 0);
    assert!(
        settled.is_some(),
        "Redis still counts {} holds of the owner, no guard stands ({:?})",
        count(&server, name, &field),
        client.stats()
    );
    assert!(
        lock.try_lock().unwrap().is_some(),
        "the owner takes it again"
    );
}

/// Found by the seeded checker (`tests/model`, owners/crew.rs; seed
/// 17455055605529433091, master seed 777): a release by a thread of the
/// client hands the lock straight to a parked thread A of an owner; before
/// A records the handed-over hold (`park_end.rs`, `handed_over`: one hold,
/// no turn on the lane), thread B of the same owner re-enters the lock
/// (Redis counts 2) and records its hold first. The renewal map has no
/// record of the owner's yet, so B's count of 2 is one hold more than its
/// guards: B gives one back as an orphan (A's). A then records "1 hold, a
/// first hold" over B's live record, which is marked lost: Redis counts 1
/// for two guards, and B's guard says `is_held() == false` right after its
/// call returned the lock. Once A gives its guard back the lock is free
/// while B's guard stands: another client takes it. A thread holder cannot
/// meet this (it is parked); an owner's threads can. It failed in about
/// one round in six here; the release now records the handed hold itself,
/// under the successor's lane turn (`RenewalMap::add_handed`), and the
/// waiter claims that record.
#[test]
fn a_handover_to_an_owners_thread_keeps_a_reentry_by_another_of_its_threads() {
    let server = RedisServer::start();
    let client = server.client();
    let other = server.client();
    for round in 0..300u64 {
        let name = format!("owner:handed:{round}");
        let lock = client.lock(&name);
        let owned = lock.for_owner(Owner::new());
        let field = owned.holder_id();
        let mine = lock.lock().unwrap();
        let a = {
            let owned = owned.clone();
            thread::spawn(move || owned.lock().unwrap())
        };
        // A parks behind the thread's hold; B tries every few hundred µs.
        thread::sleep(Duration::from_millis(20));
        let b = {
            let owned = owned.clone();
            thread::spawn(move || loop {
                if let Some(guard) = owned.try_lock().unwrap() {
                    return guard;
                }
                thread::sleep(Duration::from_micros(200 + round % 7 * 100));
            })
        };
        thread::sleep(Duration::from_millis(3));
        drop(mine);
        let a = a.join().unwrap();
        let b = b.join().unwrap();
        let (a_held, b_held) = (a.is_held(), b.is_held());
        let counted = count(&server, &name, &field);
        drop(a);
        let taken = other.lock(&name).try_lock().unwrap().is_some();
        assert!(
            a_held && b_held && counted == 2 && !taken,
            "round {round}: the owner's field counts {counted} for its 2 guards, A's is_held() \
             {a_held}, B's {b_held}; another client took the lock under B's guard: {taken}"
        );
        drop(b);
    }
}
