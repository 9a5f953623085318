//! Acquire ahead: when a release is announced, the subscriber thread sends
//! the oldest parked waiter's acquire for it and wakes it; the waiter reads
//! the reply itself. The waiter must end up exactly as if it had sent its
//! own acquire: its own field, one hold, its own lease; and when the
//! request sent ahead fails, it tries itself.

mod bounded;
mod support;

use std::time::Duration;

use support::RedisServer;

/// Far above anything a loaded machine needs for one wake-up, far below the
/// holder's 30 s TTL: a waiter done within it was woken by the release.
const WAKE_LIMIT: Duration = Duration::from_secs(5);

/// What the waiter saw while it held the lock: the hash, the PTTL and its
/// own hold count.
type Seen = (Vec<(String, i64)>, i64, u32);

/// Holds `name` on `holder`, lets a thread of `waiter` park on it (with a
/// 10 s lease), releases, and returns what the waiter saw once it got the
/// lock, and whether the waiter's client sent its acquire ahead. Before the
/// release `meanwhile` runs (with the waiter parked).
fn release_to_a_parked_waiter(
    server: &RedisServer,
    holder: &redhold::Client,
    waiter: &redhold::Client,
    name: &str,
    meanwhile: impl Fn(),
) -> (Seen, bool) {
    let before = waiter.stats().acquires_ahead;
    let guard = holder.lock(name).lock().unwrap();
    let lock = waiter.lock(name);
    let url = server.url();
    let name_owned = name.to_owned();
    let parked = bounded::spawn("waiter", move || {
        let guard = lock
            .lock_with_lease(Duration::from_secs(10))
            .expect("the waiter gets the lock");
        let mut con = redis::Client::open(url).unwrap().get_connection().unwrap();
        let mut hash: Vec<(String, i64)> = redis::cmd("HGETALL")
            .arg(&name_owned)
            .query(&mut con)
            .unwrap();
        hash.sort();
        let pttl: i64 = redis::cmd("PTTL").arg(&name_owned).query(&mut con).unwrap();
        let holds = lock.hold_count().unwrap();
        drop(guard);
        (hash, pttl, holds)
    });
    bounded::wait_until(WAKE_LIMIT, || waiter.stats().parked_waiters == 1)
        .expect("the waiter parks");
    meanwhile();
    drop(guard);
    let seen = parked.join_within(WAKE_LIMIT);
    (seen, waiter.stats().acquires_ahead > before)
}

#[test]
fn a_waiter_woken_by_another_clients_release_gets_the_lock_as_its_own() {
    let server = RedisServer::start();
    let (holder, waiter) = (server.client(), server.client());
    // The subscriber sends ahead only on an idle connection; the waiter's
    // own first attempt left one idle, so the first release should do.
    // A few tries allow for a machine where it did not.
    let mut sent_ahead = false;
    for _ in 0..5 {
        let ((hash, pttl, holds), ahead) =
            release_to_a_parked_waiter(&server, &holder, &waiter, "ahead", || {});
        assert_eq!(hash.len(), 1, "one holder field: {hash:?}");
        assert_eq!(hash[0].1, 1, "one hold in Redis: {hash:?}");
        assert_eq!(holds, 1, "one hold counted by the waiter");
        assert!(
            pttl > 5_000 && pttl <= 10_000,
            "the waiter's own 10 s lease, not the holder's 30 s: PTTL {pttl} ms"
        );
        if ahead {
            sent_ahead = true;
            break;
        }
    }
    assert!(
        sent_ahead,
        "no acquire was sent ahead: {:?}",
        waiter.stats()
    );
    assert!(!server.exists("ahead"), "released by the waiter's guard");
    assert!(waiter.stats().local_handoffs >= 1);
}

#[test]
fn an_acquire_sent_ahead_that_fails_leaves_the_waiter_to_try_itself() {
    let server = RedisServer::start();
    let (holder, waiter) = (server.client(), server.client());
    let mut sent_ahead = false;
    for _ in 0..5 {
        // Flushed scripts: the acquire sent ahead (an EVALSHA) is refused
        // with NOSCRIPT; the waiter's own attempt loads the script again.
        let ((hash, _, holds), ahead) =
            release_to_a_parked_waiter(&server, &holder, &waiter, "ahead-fails", || {
                let _: () = server.cmd(&["SCRIPT", "FLUSH"]);
            });
        assert_eq!(hash.len(), 1, "one holder field: {hash:?}");
        assert_eq!(hash[0].1, 1, "one hold in Redis: {hash:?}");
        assert_eq!(holds, 1, "one hold counted by the waiter");
        if ahead {
            sent_ahead = true;
            break;
        }
    }
    assert!(
        sent_ahead,
        "no acquire was sent ahead: {:?}",
        waiter.stats()
    );
    assert!(
        !server.exists("ahead-fails"),
        "released by the waiter's guard"
    );
}
