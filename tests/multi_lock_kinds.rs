//! MultiLock over locks of every kind (issue 24): plain, fair, fenced, spin,
//! read and write locks in one set, all or nothing, released last first.

mod support;

use std::time::Duration;

use redhold::{Error, MultiLock, MultiMember};
use support::RedisServer;

/// Every kind once, on names of its own: plain, fair, fenced, spin, the
/// read side of `k:rw1` and the write side of `k:rw2`.
fn every_kind(client: &redhold::Client) -> MultiLock {
    MultiLock::of([
        MultiMember::from(client.lock("k:plain")),
        client.fair_lock("k:fair").into(),
        client.fenced_lock("k:fenced").into(),
        client.spin_lock("k:spin").into(),
        client.read_write_lock("k:rw1").read().into(),
    ])
    .with(client.read_write_lock("k:rw2").write())
}

const KEYS: [&str; 6] = ["k:plain", "k:fair", "k:fenced", "k:spin", "k:rw1", "k:rw2"];

fn existing(server: &RedisServer) -> u32 {
    let mut args = vec!["EXISTS"];
    args.extend(KEYS);
    server.cmd(&args)
}

#[test]
fn a_multi_lock_over_every_kind_is_all_or_nothing() {
    let server = RedisServer::start();
    let (mine, theirs) = (server.client(), server.client());
    let multi = every_kind(&mine);
    assert_eq!(multi.members().len(), 6);
    assert_eq!(multi.members()[1].kind(), "fair lock");
    assert_eq!(multi.members()[5].name(), "k:rw2");

    // Another client holds the write side of the last member: nothing of
    // the set may stay locked, and the fair lock keeps no queue entry.
    let theirs_write = theirs.read_write_lock("k:rw2").write().lock().unwrap();
    assert!(multi.try_lock().unwrap().is_none());
    assert_eq!(existing(&server), 1, "only their write lock");
    assert!(!server.exists("redisson_lock_queue:{k:fair}"));
    assert!(multi
        .try_lock_for(Duration::from_millis(200))
        .unwrap()
        .is_none());
    assert_eq!(existing(&server), 1, "a wait left locks behind");
    assert!(!server.exists("redisson_lock_queue:{k:fair}"));
    drop(theirs_write);

    let guard = multi.try_lock().unwrap().expect("every lock is free");
    assert!(guard.is_held());
    assert_eq!(existing(&server), 6);
    let tokens: Vec<_> = guard.guards().iter().filter_map(|g| g.token()).collect();
    assert_eq!(tokens.len(), 1, "the fenced member's token: {tokens:?}");
    // A read member is shared, the others exclude.
    let reader = theirs.read_write_lock("k:rw1").read().try_lock().unwrap();
    assert!(reader.is_some(), "the read member excludes readers");
    drop(reader);
    assert!(theirs.lock("k:plain").try_lock().unwrap().is_none());
    assert!(theirs.fair_lock("k:fair").try_lock().unwrap().is_none());
    assert!(theirs
        .read_write_lock("k:rw1")
        .write()
        .try_lock()
        .unwrap()
        .is_none());
    drop(guard);
    assert_eq!(existing(&server), 0, "dropping the guard left locks");
}

#[test]
fn the_locks_are_released_in_the_reverse_order_of_their_acquisition() {
    let server = RedisServer::start();
    let client = server.client();
    let multi = every_kind(&client);
    let guard = multi.lock().unwrap();
    let taken: Vec<String> = guard.guards().iter().map(|g| g.name().to_owned()).collect();
    assert_eq!(taken, KEYS, "taken in the set's order");
    // Every command from now on goes to the slow log, in order.
    let () = server.cmd(&["CONFIG", "SET", "slowlog-log-slower-than", "0"]);
    let () = server.cmd(&["SLOWLOG", "RESET"]);
    guard.unlock().unwrap();
    let () = server.cmd(&["CONFIG", "SET", "slowlog-log-slower-than", "10000"]);
    let log: Vec<redis::Value> = server.cmd(&["SLOWLOG", "GET", "1000"]);
    let mut released = Vec::new();
    // Newest first; each entry: id, time, duration, args, ...
    for entry in log.iter().rev() {
        let redis::Value::Array(fields) = entry else {
            continue;
        };
        let Some(redis::Value::Array(args)) = fields.get(3) else {
            continue;
        };
        let text: Vec<String> = args
            .iter()
            .map(|a| redis::from_redis_value::<String>(a.clone()).unwrap_or_default())
            .collect();
        if text
            .first()
            .is_some_and(|c| c.eq_ignore_ascii_case("evalsha"))
        {
            released.push(text[3].clone());
        }
    }
    // A release script's first call on this server is refused (NOSCRIPT),
    // loaded and sent again: one release, logged twice in a row.
    released.dedup();
    let mut expected: Vec<String> = KEYS.iter().map(|k| (*k).to_owned()).collect();
    expected.reverse();
    assert_eq!(released, expected, "release order");
}

#[test]
fn into_guards_releases_each_lock_on_its_own() {
    let server = RedisServer::start();
    let client = server.client();
    let guards = every_kind(&client).lock().unwrap().into_guards();
    assert_eq!(guards.len(), 6);
    for (i, guard) in guards.into_iter().enumerate() {
        let name = guard.name().to_owned();
        guard.unlock().unwrap();
        assert!(!server.exists(&name), "{name}");
        assert_eq!(existing(&server), 5 - i as u32);
    }
}

#[test]
fn a_member_of_the_wrong_kind_fails_the_set_and_leaves_nothing() {
    let server = RedisServer::start();
    let client = server.client();
    // `k:rw2` holds a plain lock of another client: its write member
    // finds the wrong layout.
    let other = server.client();
    let plain = other.lock("k:rw2").lock().unwrap();
    let outcome = every_kind(&client).try_lock();
    assert!(
        matches!(outcome, Err(Error::WrongKind { .. })),
        "{outcome:?}"
    );
    assert_eq!(existing(&server), 1, "only the other client's plain lock");
    drop(plain);
}

#[test]
fn a_multi_lock_waits_for_a_busy_member_of_any_kind() {
    let server = RedisServer::start();
    let (mine, theirs) = (server.client(), server.client());
    let fair = theirs.fair_lock("k:fair").lock().unwrap();
    let multi = every_kind(&mine);
    let waiting = std::thread::spawn(move || multi.lock().map(|g| g.guards().len()));
    std::thread::sleep(Duration::from_millis(200));
    assert!(!waiting.is_finished(), "the fair member is held");
    drop(fair);
    assert_eq!(waiting.join().unwrap().unwrap(), 6);
    assert_eq!(existing(&server), 0, "the waiter's guard was dropped");
}
