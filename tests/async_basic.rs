//! The async forms driven by a plain `block_on` (a thread that parks until
//! woken): the library needs no runtime. The executor tests (tokio, smol,
//! the proofs of issue 42) live in the `async-tests` crate.

mod bounded;
mod support;

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::thread::{self, Thread};
use std::time::{Duration, Instant};

use redhold::{Owner, OwnerGuard};
use support::RedisServer;

/// Wakes the thread that runs [`block_on`].
struct Unpark(Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
}

/// Runs `future` to its end on this thread.
fn block_on<F: Future>(future: F) -> F::Output {
    let waker = Waker::from(Arc::new(Unpark(thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut future = pin!(future);
    loop {
        if let Poll::Ready(output) = future.as_mut().poll(&mut cx) {
            return output;
        }
        thread::park();
    }
}

fn assert_send_static<T: Send + 'static>(_: &T) {}

#[test]
fn an_async_acquire_takes_waits_and_releases() {
    let server = RedisServer::start();
    let client = server.client();
    let lock = client.lock("async:basic");
    let future = lock.lock_async();
    assert_send_static(&future);
    let guard: OwnerGuard = block_on(future).unwrap();
    assert!(server.exists("async:basic"));
    // Not reentrant from a thread's handle: a fresh owner each call.
    assert!(block_on(lock.try_lock_async()).unwrap().is_none());
    // A waiter, woken by the release on another thread.
    let waiter = {
        let lock = lock.clone();
        thread::spawn(move || {
            let started = Instant::now();
            let guard = block_on(lock.lock_async()).unwrap();
            (started.elapsed(), guard)
        })
    };
    thread::sleep(Duration::from_millis(200));
    thread::spawn(move || drop(guard)).join().unwrap();
    let (waited, guard) = waiter.join().unwrap();
    assert!(waited < Duration::from_secs(5), "{waited:?}");
    block_on(guard.unlock_async()).unwrap();
    assert!(!server.exists("async:basic"));
}

#[test]
fn an_owners_async_acquires_are_reentrant() {
    let server = RedisServer::start();
    let client = server.client();
    let owner = Owner::new();
    let lock = client.lock("async:owner").for_owner(owner);
    let first = block_on(lock.lock_async()).unwrap();
    let second = block_on(lock.try_lock_for_async(Duration::from_millis(100)))
        .unwrap()
        .unwrap();
    assert_eq!(lock.hold_count().unwrap(), 2);
    drop(first);
    drop(second);
    let gone = bounded::wait_until(Duration::from_secs(5), || !server.exists("async:owner"));
    assert!(gone.is_some(), "the queued releases never ran");
}

#[test]
fn a_dropped_waiting_future_leaves_nothing_behind() {
    let server = RedisServer::start();
    let client = server.client();
    let holder = server.client();
    let held = holder.lock("async:cancel").lock().unwrap();
    {
        let mut future = Box::pin(client.lock("async:cancel").lock_async());
        let waker = Waker::from(Arc::new(Unpark(thread::current())));
        let mut cx = Context::from_waker(&waker);
        assert!(future.as_mut().poll(&mut cx).is_pending());
        let parked = bounded::wait_until(Duration::from_secs(5), || {
            client.stats().parked_waiters == 1
        });
        assert!(parked.is_some(), "never parked: {:?}", client.stats());
    }
    let left = bounded::wait_until(Duration::from_secs(5), || {
        client.stats().parked_waiters == 0
    });
    assert!(left.is_some(), "still parked: {:?}", client.stats());
    drop(held);
    // Nothing of the dropped future's: another client takes it at once.
    assert!(server
        .client()
        .lock("async:cancel")
        .try_lock()
        .unwrap()
        .is_some());
}

#[test]
fn multi_locks_and_red_locks_have_async_forms() {
    let servers = [
        RedisServer::start(),
        RedisServer::start(),
        RedisServer::start(),
    ];
    let clients: Vec<_> = servers.iter().map(RedisServer::client).collect();
    let multi = redhold::MultiLock::of([
        redhold::MultiMember::from(clients[0].lock("async:m1")),
        clients[0].fair_lock("async:m2").into(),
    ]);
    let guard = block_on(multi.lock_async()).unwrap();
    assert!(
        block_on(multi.try_lock_async()).unwrap().is_none(),
        "another owner"
    );
    thread::spawn(move || drop(guard)).join().unwrap();
    let gone = bounded::wait_until(Duration::from_secs(5), || {
        !servers[0].exists("async:m1") && !servers[0].exists("async:m2")
    });
    assert!(gone.is_some(), "the multi-lock's queued releases never ran");

    let red = redhold::RedLock::new(clients.iter().map(|c| c.lock("async:red")).collect());
    let guard = block_on(red.lock_async()).unwrap();
    assert_eq!(guard.servers_held(), 3);
    assert!(block_on(red.try_lock_for_async(Duration::from_millis(100)))
        .unwrap()
        .is_none());
    block_on(guard.unlock_async()).unwrap();
    assert!(servers.iter().all(|s| !s.exists("async:red")));
}

#[test]
fn semaphores_and_latches_have_async_forms() {
    let server = RedisServer::start();
    let client = server.client();
    let semaphore = client.semaphore("async:sem");
    semaphore.set_permits(1).unwrap();
    let permit = block_on(semaphore.acquire_async()).unwrap();
    assert!(block_on(semaphore.try_acquire_async()).unwrap().is_none());
    let waiter = {
        let semaphore = semaphore.clone();
        thread::spawn(move || block_on(semaphore.try_acquire_for_async(Duration::from_secs(5))))
    };
    thread::sleep(Duration::from_millis(200));
    drop(permit);
    let second = waiter
        .join()
        .unwrap()
        .unwrap()
        .expect("the released permit");
    drop(second);
    let back = bounded::wait_until(Duration::from_secs(5), || {
        semaphore.available_permits().unwrap() == 1
    });
    assert!(back.is_some(), "the queued give-back never ran");

    let expirable = client.permit_expirable_semaphore("async:exp");
    assert!(expirable.try_set_permits(1).unwrap());
    let permit = block_on(expirable.acquire_async(Duration::from_secs(30))).unwrap();
    assert!(
        block_on(expirable.try_acquire_async(Duration::from_secs(30)))
            .unwrap()
            .is_none()
    );
    drop(permit);

    let latch = client.count_down_latch("async:latch");
    assert!(latch.try_set_count(1).unwrap());
    assert!(!block_on(latch.wait_for_async(Duration::from_millis(100))).unwrap());
    let waiter = {
        let latch = latch.clone();
        thread::spawn(move || block_on(latch.wait_async()))
    };
    thread::sleep(Duration::from_millis(100));
    latch.count_down().unwrap();
    assert!(waiter.join().unwrap().unwrap());
}

#[test]
fn an_async_shutdown_ends_a_parked_task_with_shutdown() {
    let server = RedisServer::start();
    let client = server.client();
    let _held = server.client().lock("async:down").lock().unwrap();
    let waiter = {
        let lock = client.lock("async:down");
        thread::spawn(move || block_on(lock.lock_async()))
    };
    let parked = bounded::wait_until(Duration::from_secs(5), || {
        client.stats().parked_waiters == 1
    });
    assert!(parked.is_some());
    block_on(client.shutdown_async()).unwrap();
    assert!(matches!(
        waiter.join().unwrap(),
        Err(redhold::Error::Shutdown)
    ));
    assert_eq!(client.stats().async_threads, 0, "the async threads ended");
}

/// The exhaustive model's `Known::WakeUpTakenByOtherWaiter`, with async
/// waiters (`tests/faults/model_found.rs` has the threads'): two async
/// calls park on the holder's 10 s TTL; the release's one wake-up goes to
/// the first, which takes the lock with a 1 s lease and keeps its guard
/// past it. The second's park is bounded by that lease, so it gets the
/// lock about a second after the release, not at the old TTL's end.
#[test]
fn an_async_waiter_gets_a_lock_freed_by_an_expiry_after_another_took_its_wake_up() {
    let server = RedisServer::start();
    let holder = server.client();
    let waiters = server.client();
    let name = "async:wake-up-taken";
    let held = holder
        .lock(name)
        .lock_with_lease(Duration::from_secs(10))
        .unwrap();
    let parked = |n: usize| {
        let parked = bounded::wait_until(Duration::from_secs(5), || {
            waiters.stats().parked_waiters == n
        });
        assert!(parked.is_some(), "{n} waiters did not park");
    };
    let first = {
        let lock = waiters.lock(name);
        thread::spawn(move || {
            let guard = block_on(lock.lock_with_lease_async(Duration::from_secs(1))).unwrap();
            thread::sleep(Duration::from_secs(5));
            drop(guard);
        })
    };
    parked(1);
    let second = {
        let lock = waiters.lock(name);
        thread::spawn(move || {
            let got = block_on(lock.try_lock_for_async(Duration::from_secs(20))).unwrap();
            (Instant::now(), got.is_some())
        })
    };
    parked(2);
    let released = Instant::now();
    drop(held);
    let (got_at, got) = second.join().unwrap();
    first.join().unwrap();
    assert!(got, "the second waiter never got the lock");
    let waited = got_at.saturating_duration_since(released);
    assert!(
        waited <= Duration::from_secs(3),
        "the second async waiter got the lock {waited:?} after the release, though it was \
         free a second after it"
    );
}
