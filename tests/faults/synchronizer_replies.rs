//! A semaphore's or a count-down latch's change whose reply is lost on the
//! way back (the script ran), retried by the client: the retry replays the
//! first attempt's reply from its request latch instead of changing the
//! count again. Without that, a retried count-down would open a latch one
//! count early, a retried release would make a permit out of nothing, and
//! a retried acquire would leak one.

use std::time::Duration;

use crate::fault_proxy::{Action, FaultProxy, Matcher, Rule};
use crate::support::RedisServer;

/// A server, a proxy in front of it and a client through the proxy that
/// retries a command whose reply was lost.
fn setup() -> (RedisServer, FaultProxy, redhold::Client) {
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.port());
    let client = redhold::Client::builder()
        .url(proxy.url())
        .response_timeout(Duration::from_secs(2))
        .retry_attempts(3)
        .retry_delay(Duration::from_millis(20))
        .build()
        .expect("client through the proxy");
    // Loads every script first: a lost NOSCRIPT reply would prove nothing.
    let warm = client.semaphore("warm-up");
    warm.release(1).expect("warm-up release");
    warm.try_acquire()
        .expect("warm-up acquire")
        .expect("a permit")
        .forget();
    let warm = client.count_down_latch("warm-up-latch");
    warm.count_down().expect("warm-up count-down");
    warm.delete().expect("warm-up delete");
    (server, proxy, client)
}

/// Loses the reply of the next script call on key `name` whose arguments
/// contain `marker` (a channel name tells the scripts apart).
fn lose_reply(proxy: &FaultProxy, name: &str, marker: &str) -> crate::fault_proxy::Armed {
    proxy.arming().arm(Rule {
        matcher: Matcher::script(name, &[marker]),
        action: Action::LoseReply,
    })
}

#[test]
fn a_retried_count_down_counts_once() {
    let (server, proxy, client) = setup();
    let latch = client.count_down_latch("cd");
    assert!(latch.try_set_count(2).unwrap());
    let armed = lose_reply(&proxy, "cd", "redisson_countdownlatch__channel__");
    assert_eq!(latch.count_down().expect("retried count-down"), 1);
    assert!(armed.wait_fired(Duration::from_secs(1)), "the rule fired");
    assert_eq!(server.cmd::<String>(&["GET", "cd"]), "1", "counted once");
}

#[test]
fn a_retried_latch_delete_says_it_deleted() {
    let (server, proxy, client) = setup();
    let latch = client.count_down_latch("del");
    assert!(latch.try_set_count(3).unwrap());
    let armed = lose_reply(&proxy, "del", "redisson_countdownlatch__channel__");
    assert!(
        latch.delete().expect("retried delete"),
        "the delete that ran says false"
    );
    assert!(armed.wait_fired(Duration::from_secs(1)), "the rule fired");
    assert_eq!(server.cmd::<i64>(&["EXISTS", "del"]), 0);
}

#[test]
fn a_retried_release_gives_its_permits_once() {
    let (server, proxy, client) = setup();
    let sem = client.semaphore("rel");
    sem.set_permits(0).unwrap();
    let armed = lose_reply(&proxy, "rel", "redisson_sc:");
    sem.release(1).expect("retried release");
    assert!(armed.wait_fired(Duration::from_secs(1)), "the rule fired");
    assert_eq!(server.cmd::<String>(&["GET", "rel"]), "1", "given once");
}

#[test]
fn a_retried_acquire_takes_its_permits_once() {
    let (server, proxy, client) = setup();
    let sem = client.semaphore("acq");
    sem.set_permits(3).unwrap();
    // The acquire script names no channel: its request latch tells it.
    let armed = lose_reply(&proxy, "acq", "redisson_unlock_latch:{acq}");
    let permit = sem
        .try_acquire()
        .expect("retried acquire")
        .expect("a permit");
    assert!(armed.wait_fired(Duration::from_secs(1)), "the rule fired");
    assert_eq!(server.cmd::<String>(&["GET", "acq"]), "2", "taken once");
    drop(permit);
    assert_eq!(server.cmd::<String>(&["GET", "acq"]), "3");
}

#[test]
fn an_acquire_that_fails_after_taking_its_permits_gives_them_back() {
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.port());
    // No retry: the lost reply fails the call.
    let client = redhold::Client::builder()
        .url(proxy.url())
        .response_timeout(Duration::from_secs(2))
        .retry_attempts(0)
        .build()
        .expect("client through the proxy");
    let sem = client.semaphore("unsure");
    sem.set_permits(3).unwrap();
    sem.try_acquire()
        .unwrap()
        .expect("loads the script")
        .release()
        .unwrap();
    let armed = lose_reply(&proxy, "unsure", "redisson_unlock_latch:{unsure}");
    let outcome = sem.try_acquire();
    assert!(armed.wait_fired(Duration::from_secs(1)), "the rule fired");
    assert!(
        outcome.is_err(),
        "a lost reply without retry fails: {outcome:?}"
    );
    assert_eq!(
        server.cmd::<String>(&["GET", "unsure"]),
        "3",
        "the permit the lost attempt took is back"
    );
}

#[test]
fn an_acquire_request_that_reaches_redis_late_takes_nothing() {
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.port());
    let client = redhold::Client::builder()
        .url(proxy.url())
        .response_timeout(Duration::from_millis(300))
        .retry_attempts(2)
        .retry_delay(Duration::from_millis(20))
        .build()
        .expect("client through the proxy");
    let sem = client.semaphore("late");
    sem.release(1).unwrap();
    sem.try_acquire()
        .unwrap()
        .expect("loads the script")
        .forget();
    // Held back past the response timeout: the client retries, finds no
    // permit and returns; the first request still runs afterwards.
    let armed = proxy.arming().arm(Rule {
        matcher: Matcher::script("late", &["redisson_unlock_latch:{late}"]),
        action: Action::DelayRequest(Duration::from_millis(1500)),
    });
    assert!(sem.try_acquire().unwrap().is_none(), "no permit yet");
    assert!(armed.wait_fired(Duration::from_secs(1)), "the rule fired");
    // A permit comes before the held-back request runs: it must stay.
    server.client().semaphore("late").release(1).unwrap();
    std::thread::sleep(Duration::from_millis(2000));
    assert_eq!(
        server.cmd::<String>(&["GET", "late"]),
        "1",
        "a late request of a call that ended took the permit"
    );
}

#[test]
fn a_retried_expirable_acquire_takes_one_permit() {
    let (server, proxy, client) = setup();
    let sem = client.permit_expirable_semaphore("pes");
    assert!(sem.try_set_permits(3).unwrap());
    let minute = Duration::from_secs(60);
    sem.try_acquire(minute)
        .unwrap()
        .expect("loads the script")
        .release()
        .unwrap();
    let armed = lose_reply(&proxy, "pes", "redisson_unlock_latch:{pes}");
    let permit = sem
        .try_acquire(minute)
        .expect("retried acquire")
        .expect("a permit");
    assert!(armed.wait_fired(Duration::from_secs(1)), "the rule fired");
    assert_eq!(server.cmd::<String>(&["GET", "pes"]), "2", "taken once");
    assert!(permit.release().unwrap());
    assert_eq!(server.cmd::<String>(&["GET", "pes"]), "3");
}
