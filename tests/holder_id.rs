//! `Lock::holder_id` and `Lock::is_held_by`: a thread's id in the lock's
//! hash, and asking from anywhere whether a given holder holds the lock.

mod support;

use std::thread;

use redhold::Error;
use support::RedisServer;

#[test]
fn holder_id_is_the_field_redis_holds_and_is_held_by_answers_for_any_thread() {
    let server = RedisServer::start();
    let client = server.client();
    let lock = client.lock("holder-id:a");
    let mine = lock.holder_id();
    assert!(
        mine.starts_with(&format!("{}:", client.id())),
        "a holder id starts with the client's id: {mine}"
    );
    assert!(!lock.is_held_by(&mine).unwrap(), "not held yet");

    let guard = lock.lock().unwrap();
    let fields: Vec<String> = server.cmd(&["HKEYS", "holder-id:a"]);
    assert_eq!(
        fields,
        vec![mine.clone()],
        "the holder id is the hash's field"
    );
    assert!(lock.is_held_by(&mine).unwrap());

    // Another thread (and another client) sees the same answer for our id,
    // and a different id for itself.
    let other_client = server.client();
    let (theirs, ours_seen) = thread::scope(|s| {
        s.spawn(|| {
            let other = other_client.lock("holder-id:a");
            (other.holder_id(), other.is_held_by(&mine).unwrap())
        })
        .join()
        .unwrap()
    });
    assert_ne!(theirs, mine);
    assert!(ours_seen, "another client sees our hold through our id");
    assert!(!lock.is_held_by(&theirs).unwrap());

    drop(guard);
    assert!(!lock.is_held_by(&mine).unwrap(), "released");
}

#[test]
fn a_write_lock_holder_id_is_its_write_field() {
    let server = RedisServer::start();
    let client = server.client();
    let rw = client.read_write_lock("holder-id:rw");
    let write = rw.write();
    let id = write.holder_id();
    assert!(id.ends_with(":write"), "{id}");
    let _guard = write.lock().unwrap();
    assert!(write.is_held_by(&id).unwrap());
}

#[test]
fn an_empty_holder_id_is_refused() {
    let server = RedisServer::start();
    let client = server.client();
    let err = client.lock("holder-id:e").is_held_by("").unwrap_err();
    assert!(matches!(err, Error::InvalidArgument { .. }), "{err:?}");
    assert!(err.to_string().contains("holder id"), "{err}");
}
