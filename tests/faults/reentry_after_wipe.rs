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

use std::time::Duration;

use redhold::{Error, Lock, LockKind};

use crate::acquire_reply::{arm, holds_in_redis, on_every_kind, setup, GARBLED};
use crate::fault_proxy::{Action, FaultProxy};
use crate::support::RedisServer;

/// Takes `lock` once, then wipes Redis (`FLUSHALL`): the lock's name and
/// the guard whose hold is gone.
fn one_hold_wiped<K: LockKind>(
    server: &RedisServer,
    lock: &Lock<K>,
) -> (String, redhold::LockGuard<K>) {
    let wiped = lock.try_lock().expect("the first hold").expect("free");
    server.cmd::<()>(&["FLUSHALL"]);
    (lock.name().to_owned(), wiped)
}

/// The re-entry's reply is garbled and the call fails: nothing may stay in
/// Redis, and the wiped guard reports its loss.
fn wiped_then_failed<K: LockKind>(server: &RedisServer, proxy: &FaultProxy, lock: &Lock<K>) {
    let (name, wiped) = one_hold_wiped(server, lock);
    let armed = arm(proxy, &name, Action::GarbleReply(GARBLED));
    let failed = lock.try_lock();
    assert!(armed.wait_fired(Duration::from_secs(1)), "{name}: fired");
    assert!(
        failed.is_err(),
        "{name}: a garbled reply must fail: {failed:?}"
    );
    assert_eq!(
        holds_in_redis(server, &name),
        0,
        "{name}: a hold no guard owns"
    );
    assert!(
        !wiped.is_held(),
        "{name}: the wiped guard still counts as held"
    );
    let released = wiped.unlock();
    assert!(
        matches!(released, Err(Error::LockLost { .. })),
        "{name}: the wiped guard's release said {released:?}"
    );
    assert!(!server.exists(&name), "{name}: left held");
}

/// The re-entry's reply is lost and the pool sends it again: the call
/// returns a guard of one new hold, and the wiped guard reports its loss
/// instead of releasing the new hold.
fn wiped_then_retried<K: LockKind>(server: &RedisServer, proxy: &FaultProxy, lock: &Lock<K>) {
    let (name, wiped) = one_hold_wiped(server, lock);
    let armed = arm(proxy, &name, Action::LoseReply);
    let new = lock
        .try_lock_for(Duration::from_millis(500))
        .expect("retried after the lost reply")
        .expect("the lock was free");
    assert!(armed.wait_fired(Duration::from_secs(1)), "{name}: fired");
    assert_eq!(
        holds_in_redis(server, &name),
        1,
        "{name}: one hold, one guard"
    );
    let released = wiped.unlock();
    assert!(
        matches!(released, Err(Error::LockLost { .. })),
        "{name}: the wiped guard's release said {released:?}"
    );
    assert_eq!(
        holds_in_redis(server, &name),
        1,
        "{name}: the new hold stays"
    );
    assert!(new.is_held());
    drop(new);
    assert!(!server.exists(&name), "{name}: left held");
}

#[test]
fn a_failed_reentry_after_a_wipe_takes_nothing_and_the_wiped_guard_says_lost() {
    let (server, proxy, client) = setup(0);
    on_every_kind!(client, "rw1", wiped_then_failed, &server, &proxy);
}

#[test]
fn a_retried_reentry_after_a_wipe_is_a_new_hold_and_the_wiped_guard_says_lost() {
    let (server, proxy, client) = setup(2);
    on_every_kind!(client, "rw2", wiped_then_retried, &server, &proxy);
}

/// Without any fault: a re-entry after the wipe is a new hold (the first
/// attempt finds the holds gone, the second takes the free lock), and a
/// re-entry after another client took the lock meanwhile finds it busy.
#[test]
fn a_reentry_after_a_wipe_starts_a_new_generation_or_finds_the_lock_busy() {
    let (server, _proxy, client) = setup(0);
    let lock = client.lock("rw3:plain");
    let (name, wiped) = one_hold_wiped(&server, &lock);
    let new = lock.try_lock().expect("re-entry").expect("free");
    assert!(!wiped.is_held() && new.is_held());
    assert_eq!(holds_in_redis(&server, &name), 1);
    assert!(matches!(wiped.unlock(), Err(Error::LockLost { .. })));
    drop(new);
    assert!(!server.exists(&name));

    let other = redhold::Client::builder()
        .url(server.url())
        .build()
        .expect("another client");
    let (name, wiped) = one_hold_wiped(&server, &lock);
    let theirs = other.lock(name.as_str()).try_lock().unwrap().expect("free");
    assert!(lock.try_lock().expect("re-entry").is_none(), "busy");
    assert!(!wiped.is_held());
    assert!(matches!(wiped.unlock(), Err(Error::LockLost { .. })));
    drop(theirs);
    assert!(!server.exists(&name));
}
