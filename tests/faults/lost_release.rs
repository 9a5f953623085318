//! A release whose first attempt never reached the server, retried after
//! the hold was lost: the lease ran out and another client took the lock,
//! or the server restarted and came back empty. The retry finds the field
//! gone and cannot prove that the hold was ours until the release, so
//! `unlock()` must report [`Error::LockLost`], never `Ok`, for every kind.
//! (A retry whose first attempt freed the lock and lost its reply still
//! succeeds: see `server_stall.rs`.)

use std::time::Duration;

use redhold::{Error, Lock, LockKind};

use crate::bounded::wait_until;
use crate::common::PROMPTLY;
use crate::support::RedisServer;

/// Short enough to run out while the test waits, long enough to be taken.
const SHORT_LEASE: Duration = Duration::from_millis(200);

/// Long enough that only a restart can end it during the test.
const LONG_LEASE: Duration = Duration::from_secs(60);

/// A client that retries a failed command: the retry is the point.
fn client(server: &RedisServer) -> redhold::Client {
    server
        .builder()
        .response_timeout(Duration::from_secs(2))
        .retry_attempts(3)
        .retry_delay(Duration::from_millis(50))
        .build()
        .expect("client")
}

/// Connections the server has accepted so far.
fn connections_received(server: &RedisServer) -> u64 {
    let info: String = server.cmd(&["INFO", "stats"]);
    info.lines()
        .find_map(|l| l.strip_prefix("total_connections_received:"))
        .and_then(|n| n.trim().parse().ok())
        .expect("total_connections_received in INFO stats")
}

/// Runs `unlock` and checks that it needed a fresh connection: the pooled
/// one it tried first was dead, so the script ran on a retry.
fn unlock_on_a_retry(
    server: &RedisServer,
    unlock: impl FnOnce() -> redhold::Result<()>,
) -> redhold::Result<()> {
    let _: () = server.cmd(&["CONFIG", "RESETSTAT"]);
    let before = connections_received(server);
    let result = unlock();
    // Each admin command opens a connection of its own: the one reading
    // `after` is counted once; anything beyond it is the client's.
    let after = connections_received(server);
    assert!(
        after >= before + 2,
        "the release opened no new connection: its first attempt did not fail \
         (connections received before {before}, after {after})"
    );
    result
}

#[track_caller]
fn assert_lost<T: std::fmt::Debug>(result: redhold::Result<T>, what: &str) {
    match result {
        Err(Error::LockLost { .. }) => {}
        other => panic!("{what}: expected LockLost, got {other:?}"),
    }
}

/// The lease of `holder`'s only hold runs out, `taker` (another client)
/// takes the lock, every normal connection is killed, and the holder's
/// release is retried on a new connection.
fn lost_to_another_client<K: LockKind>(server: &RedisServer, holder: Lock<K>, taker: Lock<K>) {
    let guard = holder
        .lock_with_lease(SHORT_LEASE)
        .expect("the holder's hold");
    // A read lock is shared: the taker could join the holder. Wait for the
    // holder's own hold to run out first.
    wait_until(PROMPTLY, || holder.hold_count().expect("hold_count") == 0)
        .expect("the holder's lease ran out");
    let mut theirs = None;
    wait_until(PROMPTLY, || {
        theirs = taker.try_lock().expect("the taker's try_lock");
        theirs.is_some()
    })
    .expect("the lease ran out and the other client took the lock");

    let killed: i64 = server.cmd(&["CLIENT", "KILL", "TYPE", "normal"]);
    assert!(killed >= 1, "no pooled connection to kill");

    assert_lost(
        unlock_on_a_retry(server, || guard.unlock()),
        "a release retried after the lock was taken by another client",
    );
    assert!(
        taker.is_locked().expect("is_locked"),
        "the other client's hold is untouched"
    );
    drop(theirs);
}

/// The holder's pooled connection dies with a server restart that wipes
/// its hold; the release is retried on a new connection.
fn lost_to_a_restart<K: LockKind>(mut server: RedisServer, holder: Lock<K>) {
    let guard = holder
        .lock_with_lease(LONG_LEASE)
        .expect("the holder's hold");
    server.stop();
    server.start_again();

    assert_lost(
        unlock_on_a_retry(&server, || guard.unlock()),
        "a release retried after a restart wiped the hold",
    );
}

/// One test per lock kind and case, each on a server of its own (the kill
/// and the restart hit every connection).
macro_rules! lost_release_tests {
    ($($kind:ident: $lock:expr;)*) => {
        $(
            mod $kind {
                use super::*;

                #[test]
                fn a_retried_release_after_another_client_took_the_lock_is_lost() {
                    let server = RedisServer::start();
                    let make: fn(&redhold::Client) -> Lock<_> = $lock;
                    lost_to_another_client(
                        &server,
                        make(&client(&server)),
                        make(&server.client()),
                    );
                }

                #[test]
                fn a_retried_release_after_a_restart_is_lost() {
                    let server = RedisServer::start();
                    let make: fn(&redhold::Client) -> Lock<_> = $lock;
                    let holder = make(&client(&server));
                    lost_to_a_restart(server, holder);
                }
            }
        )*
    };
}

lost_release_tests! {
    plain: |client| client.lock("lost-release");
    fenced: |client| client.fenced_lock("lost-release");
    spin: |client| client.spin_lock("lost-release");
    fair: |client| client.fair_lock("lost-release");
    read: |client| client.read_write_lock("lost-release").read();
    write: |client| client.read_write_lock("lost-release").write();
}
