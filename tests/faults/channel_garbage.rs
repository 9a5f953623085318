//! Garbage published on a lock's channel (anything but "0" and "1": empty,
//! binary, huge) is ignored: it wakes nobody into a wrong state, does not
//! cost the subscriber its connection, and a later real release still wakes
//! the waiter (promise 3).

use std::time::{Duration, Instant};

use crate::bounded;
use crate::common::{channel_of, pubsub_connection_ids, wait_for_subscribers, PROMPTLY};
use crate::support::RedisServer;

#[test]
fn garbage_on_a_lock_channel_is_ignored_and_the_subscriber_keeps_working() {
    let server = RedisServer::start();
    let name = "garbage";
    let channel = channel_of(name);
    let holder = server.client();
    let guard = holder.lock(name).lock().expect("holder: lock");
    let waiter = {
        let lock = server.client().lock(name);
        bounded::spawn("waiter", move || {
            let guard = lock.lock().expect("waiter: lock");
            let acquired = Instant::now();
            guard.unlock().expect("waiter: unlock");
            acquired
        })
    };
    wait_for_subscribers(&server, &channel, 1);
    let connections_before = pubsub_connection_ids(&server);
    assert_eq!(connections_before.len(), 1);

    let all_bytes: Vec<u8> = (0..=255).collect();
    // Long, but within the frame cap (the longest name sent plus 4 KiB):
    // a longer frame drops the connection (see hostile_replies.rs).
    let huge = vec![b'x'; 2 << 10];
    let payloads: Vec<&[u8]> = vec![
        b"",
        b"2",
        b"00",
        b" 0",
        b"0 ",
        b"-1",
        b"1\r\n",
        b"\r\n*3\r\n$7\r\nmessage\r\n",
        b"\x00",
        b"\xff\xfe\xfd",
        "zero: \u{1F512}".as_bytes(),
        &all_bytes,
        &huge,
    ];
    let mut publisher = server.connection();
    for payload in &payloads {
        let receivers: i64 = redis::cmd("PUBLISH")
            .arg(&channel)
            .arg(*payload)
            .query(&mut publisher)
            .expect("PUBLISH");
        assert_eq!(receivers, 1, "the waiter's client stopped listening");
    }
    // Garbage published on channels nobody waits on is ignored too.
    let _: i64 = redis::cmd("PUBLISH")
        .arg("redisson_lock__channel:{nobody-waits}")
        .arg(&huge[..])
        .query(&mut publisher)
        .expect("PUBLISH");

    // The waiter still waits (the lock is held), on the same connection.
    waiter.assert_running_for(Duration::from_millis(500));
    assert_eq!(
        pubsub_connection_ids(&server),
        connections_before,
        "garbage cost the subscriber its connection"
    );

    guard.unlock().expect("holder: unlock");
    let released = Instant::now();
    let waited = waiter.join_within(PROMPTLY).duration_since(released);
    assert!(waited < PROMPTLY, "waited {waited:?} after the release");
}
