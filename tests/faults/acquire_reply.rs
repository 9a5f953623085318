//! An acquire whose reply is garbled or cut mid-way (issue 26, defect 1),
//! through the fault proxy: the call may fail, but the connection that
//! carried the bad reply is never used again, and no hold stays in Redis
//! that no guard owns, for every kind, a re-entry included.

use std::time::Duration;

use redhold::{Lock, LockKind};

use crate::fault_proxy::{Action, FaultProxy, Matcher, Rule};
use crate::support::RedisServer;

/// An acquire reply whose second element is not an integer.
pub(crate) const GARBLED: &[u8] = b"*2\r\n:0\r\n:abc\r\n";

/// A server, a proxy in front of it and a client through the proxy.
pub(crate) fn setup(retry_attempts: u32) -> (RedisServer, FaultProxy, redhold::Client) {
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.port());
    let client = redhold::Client::builder()
        .url(proxy.url())
        .response_timeout(Duration::from_secs(2))
        .retry_attempts(retry_attempts)
        .retry_delay(Duration::from_millis(20))
        .build()
        .expect("client through the proxy");
    (server, proxy, client)
}

/// Arms `action` on the next script call that names `name`.
pub(crate) fn arm(proxy: &FaultProxy, name: &str, action: Action) -> crate::fault_proxy::Armed {
    proxy.arming().arm(Rule {
        matcher: Matcher::script(name, &[]),
        action,
    })
}

/// Runs `check(args…, lock)` on a lock of every single kind (plain, fair,
/// fenced, spin, read, write), named `<prefix>:<kind>`, of `client`.
macro_rules! on_every_kind {
    ($client:expr, $prefix:literal, $check:expr $(, $arg:expr)*) => {{
        let client: &redhold::Client = &$client;
        let rw = |name: &str| client.read_write_lock(name);
        $check($($arg,)* &client.lock(concat!($prefix, ":plain")));
        $check($($arg,)* &client.fair_lock(concat!($prefix, ":fair")));
        $check($($arg,)* &client.fenced_lock(concat!($prefix, ":fenced")));
        $check($($arg,)* &client.spin_lock(concat!($prefix, ":spin")));
        $check($($arg,)* &rw(concat!($prefix, ":rw-r")).read());
        $check($($arg,)* &rw(concat!($prefix, ":rw-w")).write());
    }};
}
pub(crate) use on_every_kind;

/// How many holds Redis counts for the hash `name`, all fields together
/// (the `mode` field of a read-write lock left out).
pub(crate) fn holds_in_redis(server: &RedisServer, name: &str) -> i64 {
    let fields: Vec<(String, String)> = server.cmd(&["HGETALL", name]);
    fields
        .iter()
        .filter(|(field, _)| field != "mode")
        .map(|(_, count)| count.parse::<i64>().unwrap_or(0))
        .sum()
}

#[test]
fn a_garbled_acquire_reply_fails_that_call_and_every_later_call_works() {
    let (server, proxy, client) = setup(0);
    let armed = arm(&proxy, "g:1", Action::GarbleReply(GARBLED));
    let result = client.lock("g:1").try_lock();
    assert!(armed.wait_fired(Duration::from_secs(1)), "the rule fired");
    assert!(result.is_err(), "a garbled reply must fail: {result:?}");
    // The pooled connection is not left out of step.
    for round in 0..3 {
        let other = client.lock(format!("g:other:{round}"));
        assert!(!other.is_locked().expect("is_locked after a garbled reply"));
        let guard = other.try_lock().expect("try_lock after").expect("free");
        assert_eq!(other.hold_count().expect("hold_count after"), 1);
        drop(guard);
    }
    // The script ran before its reply was garbled: the hold is given back.
    assert_eq!(holds_in_redis(&server, "g:1"), 0, "a hold nobody owns");
    assert!(!server.exists("g:1"));
    let guard = client
        .lock("g:1")
        .try_lock()
        .expect("try_lock")
        .expect("free");
    drop(guard);
}

#[test]
fn a_garbled_reentry_leaves_redis_counting_what_the_thread_will_release() {
    let (server, proxy, client) = setup(0);
    let lock = client.lock("g:2");
    let outer = lock.lock().expect("the first hold");
    let armed = arm(&proxy, "g:2", Action::GarbleReply(GARBLED));
    let inner = lock.try_lock();
    assert!(armed.wait_fired(Duration::from_secs(1)));
    assert!(inner.is_err(), "{inner:?}");
    assert_eq!(
        holds_in_redis(&server, "g:2"),
        1,
        "Redis counts the lost re-entry"
    );
    drop(outer);
    assert!(!server.exists("g:2"), "the last release left the lock held");
}

/// Takes `lock` (a first hold, or a re-entry over `outer` holds) with its
/// reply spoiled by `action`, then checks that Redis counts exactly the
/// holds guards stand for, and nothing once they are dropped.
fn spoiled<K: LockKind>(
    server: &RedisServer,
    proxy: &FaultProxy,
    lock: &Lock<K>,
    outer: u32,
    action: Action,
) {
    let name = lock.name().to_owned();
    let mut guards = Vec::new();
    for _ in 0..outer {
        guards.push(lock.try_lock().expect("outer hold").expect("free"));
    }
    let armed = arm(proxy, &name, action);
    let taken = lock.try_lock_for(Duration::from_millis(500));
    assert!(armed.wait_fired(Duration::from_secs(1)), "{name}: fired");
    let guards_now = guards.len() as i64 + i64::from(matches!(taken, Ok(Some(_))));
    assert_eq!(
        holds_in_redis(server, &name),
        guards_now,
        "{name} after {action:?} ({taken:?}): Redis and the guards disagree"
    );
    drop(taken);
    drop(guards);
    assert!(!server.exists(&name), "{name}: left held after {action:?}");
}

#[test]
fn every_kind_resolves_a_spoiled_acquire_reply() {
    let (server, proxy, client) = setup(0);
    let rw = |name: &str| client.read_write_lock(name);
    for (i, action) in [Action::GarbleReply(GARBLED), Action::CutMidReply]
        .into_iter()
        .enumerate()
    {
        for outer in 0..2 {
            let n = |kind: &str| format!("s:{kind}:{i}:{outer}");
            spoiled(&server, &proxy, &client.lock(n("plain")), outer, action);
            spoiled(&server, &proxy, &client.fair_lock(n("fair")), outer, action);
            spoiled(
                &server,
                &proxy,
                &client.fenced_lock(n("fenced")),
                outer,
                action,
            );
            spoiled(&server, &proxy, &client.spin_lock(n("spin")), outer, action);
            spoiled(&server, &proxy, &rw(&n("rw-r")).read(), outer, action);
            spoiled(&server, &proxy, &rw(&n("rw-w")).write(), outer, action);
            // A fair lock's queue entry goes too.
            let queue = format!("redisson_lock_queue:{{{}}}", n("fair"));
            assert!(!server.exists(&queue), "{queue} left behind");
        }
    }
}

#[test]
fn a_reply_cut_and_retried_resolves_to_one_hold() {
    // With retries, the pool repeats the attempt: it re-enters what the
    // first one took and gives back the hold counted twice.
    let (server, proxy, client) = setup(2);
    spoiled(
        &server,
        &proxy,
        &client.lock("r:plain"),
        1,
        Action::CutMidReply,
    );
    spoiled(
        &server,
        &proxy,
        &client.lock("r:plain2"),
        0,
        Action::LoseReply,
    );
}

#[test]
fn an_acquire_counted_twice_after_a_lease_ran_out_is_not_given_to_the_stale_guard() {
    // A leased hold runs out; the thread's next acquire loses its reply and
    // is retried, so Redis counts it twice. That count is a new hold, not a
    // re-entry of the expired one: the old guard must report the loss, not
    // release the new hold.
    let (server, proxy, client) = setup(2);
    let lock = client.lock("stale:1");
    let old = lock
        .lock_with_lease(Duration::from_millis(100))
        .expect("a short lease");
    std::thread::sleep(Duration::from_millis(250));
    assert!(!server.exists("stale:1"), "the lease ran out");
    let armed = arm(&proxy, "stale:1", Action::LoseReply);
    let new = lock.lock().expect("retried after the lost reply");
    assert!(armed.wait_fired(Duration::from_secs(1)));
    assert_eq!(holds_in_redis(&server, "stale:1"), 1, "one hold, one guard");
    assert!(
        matches!(old.unlock(), Err(redhold::Error::LockLost { .. })),
        "the expired guard released someone's hold"
    );
    assert_eq!(holds_in_redis(&server, "stale:1"), 1, "the new hold stays");
    drop(new);
    assert!(!server.exists("stale:1"));
}

/// A re-entrant guard dropped while its release request is held back (the
/// server gets it late): the drop returns after one response timeout and
/// the release goes on in the background. The thread's `hold_count()` and
/// `is_held_by(own id)` settle that release first: they say 1, the guard it
/// still has, never 2 (the checker's seed 12387245797983760573).
#[test]
fn hold_count_does_not_count_a_hold_whose_release_is_pending() {
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.port());
    let client = redhold::Client::builder()
        .url(proxy.url())
        .response_timeout(Duration::from_millis(300))
        .retry_attempts(1)
        .build()
        .expect("client through the proxy");
    let lock = client.lock("pending-count");
    let outer = lock.lock().unwrap();
    let inner = lock.lock().unwrap();
    let held_back = proxy.arming().arm(Rule {
        matcher: Matcher::script("pending-count", &["redisson_unlock_latch:"]),
        action: Action::DelayRequest(Duration::from_secs(3)),
    });
    drop(inner);
    assert!(
        held_back.wait_fired(Duration::from_secs(5)),
        "the release was not held back"
    );
    assert_eq!(client.stats().pending_releases, 1, "{:?}", client.stats());
    assert_eq!(
        lock.hold_count().unwrap(),
        1,
        "the dropped guard is not counted"
    );
    assert!(lock.is_held_by(&lock.holder_id()).unwrap());
    drop(outer);
    assert_eq!(lock.hold_count().unwrap(), 0);
    assert!(!server.exists("pending-count"));
}

/// A lost reply of every kind's acquire, retried by the pool (a first hold
/// and a re-entry): Redis ends up counting exactly the guards.
#[test]
fn a_lost_acquire_reply_retried_resolves_to_one_hold_for_every_kind() {
    let (server, proxy, client) = setup(2);
    let rw = |name: &str| client.read_write_lock(name);
    for outer in 0..2 {
        let n = |kind: &str| format!("lost:{kind}:{outer}");
        spoiled(
            &server,
            &proxy,
            &client.lock(n("plain")),
            outer,
            Action::LoseReply,
        );
        spoiled(
            &server,
            &proxy,
            &client.fair_lock(n("fair")),
            outer,
            Action::LoseReply,
        );
        spoiled(
            &server,
            &proxy,
            &client.fenced_lock(n("fenced")),
            outer,
            Action::LoseReply,
        );
        spoiled(
            &server,
            &proxy,
            &client.spin_lock(n("spin")),
            outer,
            Action::LoseReply,
        );
        spoiled(
            &server,
            &proxy,
            &rw(&n("rw-r")).read(),
            outer,
            Action::LoseReply,
        );
        spoiled(
            &server,
            &proxy,
            &rw(&n("rw-w")).write(),
            outer,
            Action::LoseReply,
        );
    }
}

/// Takes `lock` `holds` times, then wipes Redis (a restart without
/// persistence): the lock's name and the guards, whose holds are gone.
fn holds_wiped<K: LockKind>(
    holds: usize,
    server: &RedisServer,
    lock: &Lock<K>,
) -> (String, Vec<redhold::LockGuard<K>>) {
    let wiped = (0..holds)
        .map(|_| lock.try_lock().expect("outer hold").expect("free"))
        .collect();
    server.cmd::<()>(&["FLUSHALL"]);
    (lock.name().to_owned(), wiped)
}

/// Every wiped guard knows its hold is gone, and its release says so
/// instead of releasing a hold taken since.
fn wiped_guards_say_lost<K: LockKind>(name: &str, wiped: Vec<redhold::LockGuard<K>>) {
    for guard in wiped {
        assert!(
            !guard.is_held(),
            "{name}: a wiped guard still counts as held"
        );
        let released = guard.unlock();
        assert!(
            matches!(released, Err(redhold::Error::LockLost { .. })),
            "{name}: a wiped guard's release said {released:?}"
        );
    }
}

/// `holds` holds the thread had are wiped from Redis (a restart without
/// persistence; `FLUSHALL` here), then its next acquire of the lock loses
/// its reply and is retried. The call returns a guard of one new hold,
/// the wiped guards report the loss, and releasing them never frees the
/// lock under the new guard. With two holds, Redis once counted the new
/// acquire twice, no more than the holds the thread had, and that was
/// taken for a re-entry (the checker's seed 5491602550734926002); see
/// `reentry_after_wipe.rs` for one.
pub(crate) fn wiped_then_retried<K: LockKind>(
    holds: usize,
    server: &RedisServer,
    proxy: &FaultProxy,
    lock: &Lock<K>,
) {
    let (name, wiped) = holds_wiped(holds, server, lock);
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
    wiped_guards_say_lost(&name, wiped);
    assert_eq!(
        holds_in_redis(server, &name),
        1,
        "{name}: the new hold stays"
    );
    assert!(new.is_held(), "{name}: the new guard");
    drop(new);
    assert!(!server.exists(&name), "{name}: left held");
}

#[test]
fn a_retried_acquire_after_the_holds_were_wiped_is_one_new_hold_for_every_kind() {
    let (server, proxy, client) = setup(2);
    on_every_kind!(client, "wiped", wiped_then_retried, 2, &server, &proxy);
}

/// The same wipe, then the next acquire's reply is garbled and the call
/// fails: nothing may stay in Redis, and the wiped guards report the loss.
/// With two holds, the client once counted the wiped holds (2) above what
/// Redis counted (1) and read that as "nothing extra" (the checker's seed
/// 6959796510194120993).
pub(crate) fn wiped_then_failed<K: LockKind>(
    holds: usize,
    server: &RedisServer,
    proxy: &FaultProxy,
    lock: &Lock<K>,
) {
    let (name, wiped) = holds_wiped(holds, server, lock);
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
    wiped_guards_say_lost(&name, wiped);
    assert!(!server.exists(&name), "{name}: left held");
}

#[test]
fn a_failed_acquire_after_the_holds_were_wiped_gives_its_hold_back_for_every_kind() {
    let (server, proxy, client) = setup(0);
    on_every_kind!(client, "wipedf", wiped_then_failed, 2, &server, &proxy);
}

/// How long the proxy holds an acquire's first request back: past the
/// response timeout of [`late_attempt_client`], so the pool's retry takes
/// the lock first.
const HELD_BACK: Duration = Duration::from_millis(1500);

/// A client through `proxy` whose calls time out well before [`HELD_BACK`]
/// and are retried once.
fn late_attempt_client(proxy: &FaultProxy) -> redhold::Client {
    redhold::Client::builder()
        .url(proxy.url())
        .response_timeout(Duration::from_millis(400))
        .retry_attempts(1)
        .retry_delay(Duration::from_millis(20))
        .build()
        .expect("client through the proxy")
}

/// Takes `lock` while its first acquire request is held back: the retry
/// takes it; the held-back request is still on its way. The guard comes
/// back boxed, so that the guards of every kind can be kept together.
fn take_past_a_held_back_attempt<K: LockKind + 'static>(
    proxy: &FaultProxy,
    lock: &Lock<K>,
) -> (String, Box<dyn std::any::Any>) {
    let name = lock.name().to_owned();
    // Every script is loaded first: the late EVALSHA finds its script.
    lock.lock().unwrap().unlock().unwrap();
    let held_back = arm(proxy, &name, Action::DelayRequest(HELD_BACK));
    let guard = lock
        .lock()
        .unwrap_or_else(|e| panic!("{name}: the retry did not take the lock: {}", e.report()));
    assert!(
        held_back.wait_fired(Duration::from_secs(1)),
        "{name}: no acquire was held back"
    );
    (name, Box::new(guard))
}

/// Takes a lock of every single kind, named `<prefix>:<kind>`, past a
/// held-back attempt (see [`take_past_a_held_back_attempt`]); each guard
/// is kept, or dropped right after its call returned, its request still
/// held back, when `drop_at_once`.
fn take_every_kind_past_a_held_back_attempt(
    proxy: &FaultProxy,
    client: &redhold::Client,
    prefix: &str,
    drop_at_once: bool,
) -> Vec<(String, Option<Box<dyn std::any::Any>>)> {
    let name = |kind: &str| format!("{prefix}:{kind}");
    let rw = |kind: &str| client.read_write_lock(name(kind));
    let mut taken = Vec::new();
    let mut keep = |(name, guard): (String, Box<dyn std::any::Any>)| {
        taken.push((name, (!drop_at_once).then_some(guard)));
    };
    keep(take_past_a_held_back_attempt(
        proxy,
        &client.lock(name("plain")),
    ));
    keep(take_past_a_held_back_attempt(
        proxy,
        &client.fair_lock(name("fair")),
    ));
    keep(take_past_a_held_back_attempt(
        proxy,
        &client.fenced_lock(name("fenced")),
    ));
    keep(take_past_a_held_back_attempt(
        proxy,
        &client.spin_lock(name("spin")),
    ));
    keep(take_past_a_held_back_attempt(proxy, &rw("rw-r").read()));
    keep(take_past_a_held_back_attempt(proxy, &rw("rw-w").write()));
    taken
}

/// An acquire whose first request is held back past the response timeout
/// (a stalled path) while the pool's retry takes the lock: the held-back
/// request still runs when it arrives, after the call returned its guard,
/// and counts a second hold under the thread's field. The undo written
/// behind it gives that hold back, for every kind: Redis counts one hold
/// for the one guard, and the lock is free once the guard drops (before,
/// the late hold, owned by no guard, kept the lock for the rest of its
/// 30 s watchdog lease; the model checker's stalled-member case found it).
#[test]
fn an_attempt_held_back_behind_a_retry_that_took_the_lock_is_given_back() {
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.port());
    let client = late_attempt_client(&proxy);
    let taken = take_every_kind_past_a_held_back_attempt(&proxy, &client, "late-ok", false);
    // Every held-back request has been let go and has run by then (the
    // last one was taken last), with whatever follows it on its connection.
    std::thread::sleep(HELD_BACK + Duration::from_millis(700));
    for (name, _guard) in &taken {
        assert_eq!(
            holds_in_redis(&server, name),
            1,
            "{name}: Redis counts more holds than the one guard"
        );
    }
    for (name, guard) in taken {
        drop(guard);
        assert!(
            !server.exists(&name),
            "{name}: a hold that no guard owns kept the lock"
        );
    }
}

/// As above, but each guard is dropped at once, before its held-back
/// request arrives: the release must not run before the undo behind that
/// request, or the late hold would take the freed lock and the undo (which
/// gives back a hold only above the one guard) would leave it standing.
/// The drop waits for the undo one response timeout, then its release
/// goes on in the background after it; every lock is free soon after the
/// late requests ran (before, the late hold kept each for 30 s).
#[test]
fn a_guard_dropped_before_its_held_back_attempt_arrives_leaves_the_lock_free() {
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.port());
    let client = late_attempt_client(&proxy);
    let taken = take_every_kind_past_a_held_back_attempt(&proxy, &client, "late-drop", true);
    for (name, _) in &taken {
        let free =
            crate::bounded::wait_until(HELD_BACK + Duration::from_secs(3), || !server.exists(name));
        assert!(
            free.is_some(),
            "{name}: a late hold kept the lock after its guard was dropped (PTTL {} ms)",
            server.cmd::<i64>(&["PTTL", name])
        );
    }
}
