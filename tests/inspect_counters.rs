//! Semaphores and count-down latches seen from the outside
//! (`Client::inspect_counter`, `Client::list_counters`), as operators and
//! the `redhold` tool see them (issue 24).

mod support;

use std::time::Duration;

use redhold::Error;
use support::RedisServer;

#[test]
fn a_semaphore_a_latch_and_an_expirable_semaphore_are_read_as_they_are() {
    let server = RedisServer::start();
    let client = server.client();
    let semaphore = client.semaphore("c:pool");
    assert!(semaphore.try_set_permits(5).unwrap());
    let permit = semaphore.acquire_many(2).unwrap();
    let latch = client.count_down_latch("c:start");
    assert!(latch.try_set_count(3).unwrap());
    latch.count_down().unwrap();
    let expirable = client.permit_expirable_semaphore("c:leases");
    assert!(expirable.try_set_permits(3).unwrap());
    let short = expirable.acquire(Duration::from_secs(5)).unwrap();
    let long = expirable.acquire(Duration::from_secs(60)).unwrap();

    let pool = client
        .inspect_counter("c:pool")
        .unwrap()
        .expect("a semaphore");
    assert_eq!(pool.value, 3);
    assert!(!pool.is_expirable_semaphore());
    let start = client.inspect_counter("c:start").unwrap().expect("a latch");
    assert_eq!(start.value, 2);
    let leases = client
        .inspect_counter("c:leases")
        .unwrap()
        .expect("expirable");
    assert_eq!(leases.value, 1);
    let ids: Vec<&str> = leases.permits_out.iter().map(|p| p.id.as_str()).collect();
    assert_eq!(ids, [short.id(), long.id()], "soonest lease end first");
    let left = leases.permits_out[0].lease_left().expect("a lease");
    assert!(
        left <= Duration::from_secs(5) && left > Duration::from_secs(1),
        "{left:?}"
    );
    assert!(leases.permits_out[1].lease_left().expect("a lease") > Duration::from_secs(30));

    assert_eq!(client.inspect_counter("c:nothing").unwrap(), None);
    drop(permit);
    assert_eq!(client.inspect_counter("c:pool").unwrap().unwrap().value, 5);
}

#[test]
fn a_lock_or_a_word_is_not_a_counter() {
    let server = RedisServer::start();
    let client = server.client();
    let _held = client.lock("c:lock").lock().unwrap();
    let () = server.cmd(&["SET", "c:word", "hello"]);
    for name in ["c:lock", "c:word"] {
        let outcome = client.inspect_counter(name);
        assert!(
            matches!(outcome, Err(Error::WrongKind { .. })),
            "{name}: {outcome:?}"
        );
    }
    assert!(matches!(
        client.inspect_counter(""),
        Err(Error::InvalidName { .. })
    ));
}

#[test]
fn list_counters_finds_semaphores_and_latches_but_no_helper_keys() {
    let server = RedisServer::start();
    let client = server.client();
    let semaphore = client.semaphore("app:pool");
    semaphore.try_set_permits(2).unwrap();
    drop(semaphore.acquire().unwrap()); // leaves request latches behind
    client
        .count_down_latch("app:start")
        .try_set_count(1)
        .unwrap();
    let expirable = client.permit_expirable_semaphore("app:leases");
    expirable.try_set_permits(1).unwrap();
    let _permit = expirable.acquire(Duration::from_secs(30)).unwrap();
    // Now no permit is available: the name's number is 0, its set holds one.
    drop(client.fenced_lock("app:fenced").lock().unwrap()); // a token counter
    let () = server.cmd(&["SET", "other:count", "7"]);
    for i in 0..50 {
        let () = server.cmd(&["SET", &format!("app:word:{i}"), "hello"]);
    }
    client.inspect_counter("app:pool").unwrap(); // loads the script
    let () = server.cmd(&["CONFIG", "RESETSTAT"]);

    let names: Vec<String> = client
        .list_counters("app:*")
        .unwrap()
        .into_iter()
        .map(|c| c.name)
        .collect();
    assert_eq!(names, ["app:leases", "app:pool", "app:start"]);
    // Strings that hold no number cost a pipelined GET, not a script.
    let calls = server.command_calls();
    assert_eq!(calls.get("evalsha").copied().unwrap_or(0), 3, "{calls:?}");
    let everything: Vec<String> = client
        .list_counters("*")
        .unwrap()
        .into_iter()
        .map(|c| c.name)
        .collect();
    assert_eq!(
        everything,
        ["app:leases", "app:pool", "app:start", "other:count"],
        "latches and token counters are the library's own"
    );
}
