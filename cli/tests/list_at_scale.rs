//! `redhold list` over a keyspace of many hashes that are not locks: what
//! it sends per key, counted exactly, and a pattern that a backtracking
//! matcher could not finish.

mod binary;
#[path = "../../tests/support/mod.rs"]
mod support;

use binary::redhold;
use support::RedisServer;

/// Hashes that are not locks, beside the locks.
const OTHER_HASHES: usize = 2_000;

/// Listing reads each hash of the keyspace with one pipelined `HRANDFIELD`
/// and runs the inspection script only for the hashes that look like locks:
/// a keyspace of many other hashes costs a cheap command per key, not a
/// script and four `TYPE`s (4.6 s for 100,000 hashes before).
#[test]
fn list_runs_a_script_only_for_the_hashes_that_look_like_locks() {
    let server = RedisServer::start();
    let mut load = redis::pipe();
    for i in 0..OTHER_HASHES {
        load.cmd("HSET")
            .arg(format!("user:{i}"))
            .arg("name")
            .arg(i)
            .ignore();
    }
    let mut conn = redis::Client::open(server.url())
        .unwrap()
        .get_connection()
        .unwrap();
    let () = load.query(&mut conn).unwrap();
    let client = server.client();
    let locks = ["order:1", "order:2", "order:3"].map(|name| client.lock(name));
    let _guards: Vec<_> = locks.iter().map(|lock| lock.lock().unwrap()).collect();

    // A first run loads the inspection script; the second is counted.
    redhold(&["--url", &server.url(), "list", "*"]).expect_code(0);
    let () = server.cmd(&["CONFIG", "RESETSTAT"]);
    let run = redhold(&["--url", &server.url(), "list", "*"]);
    run.expect_code(0);
    for name in ["order:1", "order:2", "order:3"] {
        assert!(run.stdout.contains(name), "{name} listed: {}", run.stdout);
    }
    assert!(!run.stdout.contains("user:"), "{}", run.stdout);

    let calls = server.command_calls();
    let hashes = (OTHER_HASHES + locks.len()) as u64;
    assert_eq!(calls.get("hrandfield"), Some(&hashes), "{calls:?}");
    assert_eq!(
        calls.get("evalsha"),
        Some(&(locks.len() as u64)),
        "one inspection per lock: {calls:?}"
    );
    // The inspection script's own four TYPEs per lock, nothing per hash.
    assert_eq!(
        calls.get("type"),
        Some(&(4 * locks.len() as u64)),
        "{calls:?}"
    );
}

/// `*a*a…*b` against a 60-byte name of a fair queue: a backtracking matcher
/// ran 14.8 s of CPU on it; the binary's own one-minute limit fails this
/// test should that come back.
#[test]
fn a_pathological_pattern_finishes_at_scan_speed() {
    let server = RedisServer::start();
    let name = "a".repeat(60);
    let queue = format!("redisson_lock_queue:{{{name}}}");
    let _: i64 = server.cmd(&["RPUSH", &queue, "someone:1"]);
    let run = redhold(&["--url", &server.url(), "list", "*a*a*a*a*a*a*a*a*a*a*a*a*b"]);
    run.expect_code(0);
    assert!(!run.stdout.contains(&name), "{}", run.stdout);
}
