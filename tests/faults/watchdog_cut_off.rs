//! The watchdog cut off from Redis for longer than the lease: the process is
//! told that its lock is lost (promise 5) while it is still cut off, by
//! `is_held`, by the `on_lock_lost` callback (exactly once) and by
//! `Err(LockLost)` on release; and the lock really is free afterwards.

use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use redhold::{Error, LossCause};

use crate::bounded::wait_until;
use crate::support::RedisServer;

/// The lock lives this long in Redis after its last renewal.
const WATCHDOG: Duration = Duration::from_secs(1);

/// A client with a 1 s watchdog and default response timeout and retries
/// (3 s, 3 retries), which records every name passed to `on_lock_lost`.
fn watched_client(server: &RedisServer) -> (redhold::Client, Arc<Mutex<Vec<String>>>) {
    let lost = Arc::new(Mutex::new(Vec::new()));
    let client = {
        let lost = Arc::clone(&lost);
        server
            .builder()
            .watchdog_timeout(WATCHDOG)
            .on_lock_lost(move |name| lost.lock().push(name.to_owned()))
            .build()
            .expect("client")
    };
    (client, lost)
}

/// Holds a lock, cuts the client off with `cut_off` for `outage`, restores
/// the connection with `restore`, and checks what the holder was told.
fn lock_is_reported_lost(
    server: &mut RedisServer,
    name: &str,
    outage: Duration,
    cut_off: impl FnOnce(&mut RedisServer),
    restore: impl FnOnce(&mut RedisServer),
) {
    let (client, lost) = watched_client(server);
    let lock = client.lock(name);
    let guard = lock.lock().expect("lock");
    // The watchdog keeps it alive past its timeout while Redis answers.
    thread::sleep(WATCHDOG * 2);
    assert!(guard.is_held() && server.exists(name));
    assert!(lost.lock().is_empty(), "lost while renewals worked");

    cut_off(server);
    let cut = Instant::now();
    // Reported while still cut off: the client must not need Redis to learn
    // that the lease has run out.
    let noticed = wait_until(outage, || !guard.is_held());
    let reported = lost.lock().clone();
    restore(server);
    let noticed = noticed.unwrap_or_else(|| {
        panic!(
            "still believed held {:?} after being cut off",
            cut.elapsed()
        )
    });
    assert!(
        noticed >= WATCHDOG / 3,
        "reported lost after only {noticed:?}: the lease had not run out"
    );
    // The callback runs on the callback thread right after the lock is
    // marked; give it a moment.
    let reported = if reported.is_empty() {
        wait_until(Duration::from_secs(1), || !lost.lock().is_empty());
        lost.lock().clone()
    } else {
        reported
    };
    assert_eq!(reported, vec![name.to_owned()]);

    match guard.unlock() {
        // Expired while renewals could not reach Redis: gone, or already
        // taken by someone else; never blamed on a lease it did not have.
        Err(Error::LockLost { lock, cause, .. }) => {
            assert_eq!(lock, name);
            assert!(
                matches!(cause, LossCause::Vanished | LossCause::TakenOver),
                "{cause:?}"
            );
        }
        other => panic!("releasing a lost lock: {other:?}"),
    }
    // Several watchdog periods later, still reported exactly once.
    thread::sleep(WATCHDOG);
    assert_eq!(*lost.lock(), vec![name.to_owned()]);
    // And the lock is free for others.
    let other = server.client();
    let taken = other
        .lock(name)
        .try_lock()
        .expect("try_lock after the outage");
    assert!(taken.is_some(), "the lost lock is still held");
}

#[test]
fn a_frozen_server_makes_the_lock_lost_within_the_lease() {
    let mut server = RedisServer::start();
    // SIGSTOP: connections stay open, nothing answers.
    lock_is_reported_lost(
        &mut server,
        "cut-off-frozen",
        Duration::from_secs(4),
        |server| server.freeze(),
        |server| server.thaw(),
    );
}

#[test]
fn a_stopped_server_makes_the_lock_lost_within_the_lease() {
    let mut server = RedisServer::start();
    // Connections are refused; the server comes back empty.
    lock_is_reported_lost(
        &mut server,
        "cut-off-stopped",
        Duration::from_secs(4),
        |server| server.stop(),
        |server| server.start_again(),
    );
}
