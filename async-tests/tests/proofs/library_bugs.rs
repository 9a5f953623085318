//! Library bugs the proofs ran into, each shown by a test that failed
//! before its fix (both fixed: the command connections are named by
//! `server/opener.rs`; an async spin-lock waiter's backoff counts as
//! parked, `engine/async_acquire/round.rs`).

use std::thread;
use std::time::{Duration, Instant};

use crate::no_sockets::warm_up;
use crate::redis_side::{connections, own_user};
use crate::support::RedisServer;

/// `Client::identity` and `identity.rs` say the client's name is given to
/// each of its connections (`CLIENT SETNAME`), where `CLIENT LIST` shows
/// it; only the pub/sub connection gets it: `server/opener.rs` (the
/// command connections, the I/O pool's included) sends a `PING`, never a
/// `CLIENT SETNAME`. So an operator cannot tell a client's command
/// connections apart (the parked-task proof logs its client in as an ACL
/// user of its own to count them).
#[test]
fn every_connection_of_a_client_carries_its_name() {
    let _turn = crate::serial();
    let server = RedisServer::start();
    let client = server
        .builder()
        .url(own_user(&server, "named"))
        .build()
        .expect("a client");
    warm_up(&client);
    let guard = client.lock("bugs:named").lock().expect("a blocking lock");
    let by_user = connections(&server, "named");
    let list: String = server.cmd(&["CLIENT", "LIST"]);
    let name = format!("name=redhold:{}:", client.id());
    let named = list.lines().filter(|line| line.contains(&name)).count();
    drop(guard);
    client.shutdown().expect("shutdown");
    assert_eq!(
        named,
        by_user.commands + by_user.pubsub,
        "of the client's {} command and {} pub/sub connections, {named} carry its name",
        by_user.commands,
        by_user.pubsub
    );
}

/// `Stats::parked_waiters` counts "threads parked now (and async calls
/// parked, each a task), waiting for a lock to be released (or for a spin
/// lock's next attempt)". A thread waiting for a spin lock's next attempt
/// is counted; an async call waiting for it is not: its sleeps between
/// attempts (`Phase::Sleeping`, `engine/async_acquire/round.rs`) do not
/// count as parked, only its parks in a channel's line do.
#[test]
fn an_async_spin_lock_waiter_counts_as_parked_like_a_threads() {
    let _turn = crate::serial();
    let server = RedisServer::start();
    let holder = server.client();
    let client = server.client();
    warm_up(&client);
    let held = holder
        .spin_lock("bugs:spin")
        .lock()
        .expect("the holder's spin lock");

    let waiter = {
        let lock = client.spin_lock("bugs:spin");
        thread::spawn(move || {
            lock.try_lock_for(Duration::from_secs(1))
                .map(|got| got.is_some())
        })
    };
    let thread_counted = counted(&client, 1);
    let _ = waiter.join();
    assert!(counted(&client, 0), "the thread waiter stayed counted");

    let waiting = client
        .spin_lock("bugs:spin")
        .try_lock_for_async(Duration::from_secs(5));
    let task_counted = counted(&client, 1);
    drop(waiting);
    drop(held);
    client.shutdown().expect("shutdown");
    holder.shutdown().expect("the holder's shutdown");
    assert!(
        thread_counted,
        "a thread waiting for a spin lock was not counted"
    );
    assert!(
        task_counted,
        "an async call waiting for a spin lock was not counted, a thread is"
    );
}

/// Whether `client` counts `parked` parked waiters within half a second.
fn counted(client: &redhold::Client, parked: usize) -> bool {
    let started = Instant::now();
    while started.elapsed() < Duration::from_millis(500) {
        if client.stats().parked_waiters == parked {
            return true;
        }
        thread::sleep(Duration::from_millis(5));
    }
    false
}
