//! A re-entry whose reply is spoiled after the thread's holds were wiped
//! (a restart without persistence, a flush, another process's
//! force-unlock): the script must not take the free lock as if it were
//! the thread's own. Had it done so, Redis would count exactly the holds
//! the thread had (one), so neither the failed call's settling look nor a
//! retried call's count could tell the new hold from the wiped one; the
//! wiped guard would then release it and say `Ok`, although someone else
//! may have held the lock in between: a silent loss (the checker's seed
//! 8346898502138983948 on a spin lock). A thread that counts holds sends
//! its acquire as a re-entry only, which changes nothing when its holds
//! are gone and says so.

use redhold::Error;

use crate::acquire_reply::{
    holds_in_redis, on_every_kind, setup, wiped_then_failed, wiped_then_retried,
};
use crate::support::RedisServer;

/// Takes the plain lock `name` once with `client`, then wipes Redis
/// (`FLUSHALL`): the guard, whose hold is gone.
fn one_hold_wiped(
    server: &RedisServer,
    client: &redhold::Client,
    name: &str,
) -> redhold::LockGuard {
    let wiped = client
        .lock(name)
        .try_lock()
        .expect("the first hold")
        .expect("free");
    server.cmd::<()>(&["FLUSHALL"]);
    wiped
}

#[test]
fn a_failed_reentry_after_a_wipe_takes_nothing_and_the_wiped_guard_says_lost() {
    let (server, proxy, client) = setup(0);
    on_every_kind!(client, "rw1", wiped_then_failed, 1, &server, &proxy);
}

#[test]
fn a_retried_reentry_after_a_wipe_is_a_new_hold_and_the_wiped_guard_says_lost() {
    let (server, proxy, client) = setup(2);
    on_every_kind!(client, "rw2", wiped_then_retried, 1, &server, &proxy);
}

/// Without any fault: a re-entry after the wipe is a new hold (the first
/// attempt finds the holds gone, the second takes the free lock), and a
/// re-entry after another client took the lock meanwhile finds it busy.
#[test]
fn a_reentry_after_a_wipe_starts_a_new_generation_or_finds_the_lock_busy() {
    let (server, _proxy, client) = setup(0);
    let name = "rw3:plain";
    let lock = client.lock(name);
    let wiped = one_hold_wiped(&server, &client, name);
    let new = lock.try_lock().expect("re-entry").expect("free");
    assert!(!wiped.is_held() && new.is_held());
    assert_eq!(holds_in_redis(&server, name), 1);
    assert!(matches!(wiped.unlock(), Err(Error::LockLost { .. })));
    drop(new);
    assert!(!server.exists(name));

    let other = redhold::Client::builder()
        .url(server.url())
        .build()
        .expect("another client");
    let wiped = one_hold_wiped(&server, &client, name);
    let theirs = other.lock(name).try_lock().unwrap().expect("free");
    assert!(lock.try_lock().expect("re-entry").is_none(), "busy");
    assert!(!wiped.is_held());
    assert!(matches!(wiped.unlock(), Err(Error::LockLost { .. })));
    drop(theirs);
    assert!(!server.exists(name));
}
