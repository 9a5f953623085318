//! Defects the exhaustive model found in the library as built (issue 40,
//! `model/`), each reproduced here against a real `redis-server` as the
//! model's counterexample describes it, failing as built and passing
//! since its fix; each names the model's counterexample it follows. The
//! first two were fixed in 42393ed and 0d18fa5; the next two are what
//! those fixes left (2bbaed6), and one more checks the mechanism of the
//! latter fix at its worst moment. Then model defects 10 and 11 (92eaa16:
//! an expired generation ended, and a re-entry's TTL counted, before an
//! acquire is sent), 12 (22baf1b: a read acquire drops the caller's
//! expired holds) and the count-down latch's (13).

use std::thread;
use std::time::{Duration, Instant};

use crate::bounded::wait_until;
use crate::fault_proxy::{Action, FaultProxy, Matcher, Rule};
use crate::support::RedisServer;

/// A client through `proxy` with a 400 ms response timeout and `retries`
/// retries 20 ms apart: an attempt held back past 400 ms times out and is
/// kept for its undo.
fn proxied(proxy: &FaultProxy, retries: u32) -> redhold::Client {
    redhold::Client::builder()
        .url(proxy.url())
        .response_timeout(Duration::from_millis(400))
        .retry_attempts(retries)
        .retry_delay(Duration::from_millis(20))
        .build()
        .expect("client through the proxy")
}

/// How long the proxy holds the retry's request back: past the client's
/// response timeout, so the retry times out and is kept for its undo.
const RETRY_HELD: Duration = Duration::from_millis(1500);

/// `Known::LostReplyBeforeLateRetry` (fixed in 42393ed). A `try_lock` whose first attempt
/// runs (the lock is the thread's: one hold) but loses its reply to a cut
/// connection, and whose retry is held back past the response timeout,
/// fails; the retry runs later (a second hold) with the undo written
/// behind it, which gives back one hold above the guards' (none). The
/// first attempt's hold must go too: no guard stands for it. As built the
/// call skips its settling look because its last attempt may still run
/// (`settle_unsure`, `unsure_is_late`), and the undo covers only the late
/// attempt: Redis keeps one hold under the thread's field, with no guard,
/// for the whole watchdog timeout (30 s by default), and nobody else can
/// take the lock meanwhile.
#[test]
fn a_lost_acquire_reply_then_a_late_retry_leave_no_hold_behind() {
    let (server, _proxy, _lock, name) = late_retry_failed("found:lost-then-late");
    // The held-back retry and the undo behind it have run by then.
    thread::sleep(RETRY_HELD + Duration::from_millis(700));
    let free = wait_until(Duration::from_secs(2), || !server.exists(name));
    assert!(
        free.is_some(),
        "a hold no guard stands for kept the lock after the failed call: HGETALL {:?}, \
         PTTL {} ms",
        server.cmd::<Vec<(String, String)>>(&["HGETALL", name]),
        server.cmd::<i64>(&["PTTL", name])
    );
}

/// The holder's lease in [`a_waiter_gets_a_lock_freed_by_an_expiry_after_another_waiter_took_its_wake_up`]:
/// the TTL both waiters read and park on.
const HOLDER_LEASE: Duration = Duration::from_secs(10);
/// The lease the first waiter takes the lock with once woken.
const SHORT_LEASE: Duration = Duration::from_secs(1);

/// `Known::WakeUpTakenByOtherWaiter` (fixed in 0d18fa5). Two threads of one client wait for a
/// lock another client holds with a 10 s lease; both park on its TTL. The
/// release's message wakes the oldest (`Waiters::wake_one`), which takes
/// the lock with a 1 s lease and keeps its guard past it (a long critical
/// section, or a pause). The hold expires, silently: the lock is free. The
/// second waiter must get it soon after (promise 3: a waiter never sleeps
/// longer than the lock's TTL); as built it sleeps on the 10 s TTL it read
/// before the release, the lock free and no message coming, until the
/// first waiter's guard drops (4 s later here; 9 s, the rest of the TTL,
/// if it kept its guard that long).
#[test]
fn a_waiter_gets_a_lock_freed_by_an_expiry_after_another_waiter_took_its_wake_up() {
    let server = RedisServer::start();
    let holder = server.client();
    let waiters = server.client();
    let name = "found:wake-up-taken";
    let held = holder
        .lock(name)
        .lock_with_lease(HOLDER_LEASE)
        .expect("the holder takes the lock");
    let parked = |n: usize| {
        let parked = wait_until(Duration::from_secs(5), || {
            waiters.stats().parked_waiters == n
        });
        assert!(parked.is_some(), "{n} waiters did not park");
    };
    let first = {
        let lock = waiters.lock(name);
        thread::spawn(move || {
            let guard = lock
                .lock_with_lease(SHORT_LEASE)
                .expect("the first waiter takes the lock");
            // Well past its lease: the hold expires while the guard
            // stands (its drop, a release of a hold gone, still wakes the
            // other waiter: it reserves it for a hand-over that fails).
            thread::sleep(SHORT_LEASE * 5);
            drop(guard);
        })
    };
    parked(1);
    let second = {
        let lock = waiters.lock(name);
        thread::spawn(move || {
            let guard = lock
                .try_lock_for(HOLDER_LEASE * 2)
                .expect("the second waiter's call");
            (Instant::now(), guard.is_some())
        })
    };
    parked(2);
    let released = Instant::now();
    drop(held);
    let (got_at, got) = second.join().expect("the second waiter");
    first.join().expect("the first waiter");
    assert!(got, "the second waiter never got the lock");
    let waited = got_at.saturating_duration_since(released);
    // The short lease, and a second for the wake-up.
    let bound = SHORT_LEASE + Duration::from_secs(2);
    assert!(
        waited <= bound,
        "the second waiter got the lock {waited:?} after the release, though the lock was \
         free {SHORT_LEASE:?} after it (its first taker's lease ran out): it slept on the \
         holder's TTL, read before the release"
    );
}

/// `Known::CutAttemptsUndoLost`. As in
/// [`a_lost_acquire_reply_then_a_late_retry_leave_no_hold_behind`], a
/// `try_lock`'s first attempt runs and loses its reply to a cut, and its
/// retry is held back past the response timeout; then the held-back
/// connection is cut too (a partition, healed at once) before the retry
/// reaches the server. Neither the retry nor the undos written behind it
/// ever run. The first attempt's hold must go all the same: no guard
/// stands for it. As built (since 42393ed) its give-back rides only on the
/// late retry's connection (`undo_behind`: `1 + cut` releases there), and
/// the settling look is still skipped because that attempt might run
/// late (`settle_unsure`, `unsure_is_late`): Redis keeps the hold for the
/// watchdog timeout.
#[test]
fn a_lost_acquire_reply_then_a_late_retry_cut_off_leave_no_hold_behind() {
    let (server, _proxy, lock, name) = late_retry_cut_off("found:lost-then-late-cut");
    thread::sleep(RETRY_HELD + Duration::from_millis(700));
    let free = wait_until(Duration::from_secs(2), || !server.exists(name));
    assert!(
        free.is_some(),
        "a hold no guard stands for kept the lock after the failed call, its give-back lost \
         with the late retry's connection: HGETALL {:?}, PTTL {} ms",
        server.cmd::<Vec<(String, String)>>(&["HGETALL", name]),
        server.cmd::<i64>(&["PTTL", name])
    );
    drop(lock);
}

/// The undo sent again after its connection was cut (2bbaed6) goes one
/// copy at a time. As in
/// [`a_lost_acquire_reply_then_a_late_retry_cut_off_leave_no_hold_behind`],
/// the undo (one release for the late retry, one for the cut attempt,
/// each "only above 0 holds") never ran; the first copy sent again is held
/// back well past the response timeout, while the thread's next `lock()`
/// waits on its lane. Were a second copy sent while the first may still
/// run, it would give back the cut hold and let `lock()` take the lock;
/// then the first copy's second release (its "nothing above 0" not
/// latched) would find the guarded hold above 0 and give it back: a guard
/// with no hold in Redis, the lock free for anyone.
#[test]
fn an_undo_sent_again_after_its_cut_goes_one_copy_at_a_time() {
    let (server, proxy, lock, name) = late_retry_cut_off("found:undo-again-one-copy");
    let arming = proxy.arming();
    let copy_held = arming.arm(Rule {
        matcher: Matcher::script(name, &[]),
        action: Action::DelayRequest(COPY_HELD),
    });
    let guard = lock.lock().expect("the thread's next lock()");
    assert!(
        copy_held.wait_fired(Duration::from_secs(1)),
        "the undo was not sent again ({})",
        proxy.summary()
    );
    // Every copy that was sent has run by now.
    thread::sleep(COPY_HELD + Duration::from_millis(500));
    let other = server.client();
    let taken = other.lock(name).try_lock().expect("another client's try");
    assert!(
        taken.is_none() && guard.is_held(),
        "the lock is free under a standing guard: a copy of the undo sent while another \
         could still run gave back the guarded hold (HGETALL {:?})",
        server.cmd::<Vec<(String, String)>>(&["HGETALL", name])
    );
    assert_eq!(
        server
            .cmd::<Vec<(String, String)>>(&["HGETALL", name])
            .len(),
        1,
        "one holder field"
    );
    drop(guard);
    assert!(
        wait_until(Duration::from_secs(2), || !server.exists(name)).is_some(),
        "the guard's drop freed the lock"
    );
}

/// How long the proxy holds back the first copy of the undo sent again in
/// [`an_undo_sent_again_after_its_cut_goes_one_copy_at_a_time`]: several
/// response timeouts.
const COPY_HELD: Duration = Duration::from_millis(2000);

/// A `try_lock` whose first attempt runs (one hold) and loses its reply to
/// a cut, and whose retry is held back past the response timeout: the
/// call fails, an undo written behind the retry, both still in the proxy.
fn late_retry_failed(
    name: &'static str,
) -> (
    RedisServer,
    FaultProxy,
    redhold::ReentrantLock,
    &'static str,
) {
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.port());
    let client = proxied(&proxy, 1);
    let lock = client.lock(name);
    // Every script loaded: the held-back EVALSHA finds its script.
    lock.lock()
        .expect("a first hold")
        .unlock()
        .expect("its release");
    let arming = proxy.arming();
    // One-shot rules are looked at in the order armed: the first attempt
    // runs and its reply is lost; the retry is the next one.
    let lost = arming.arm(Rule {
        matcher: Matcher::script(name, &[]),
        action: Action::LoseReply,
    });
    let held = arming.arm(Rule {
        matcher: Matcher::script(name, &[]),
        action: Action::DelayRequest(RETRY_HELD),
    });
    let tried = lock.try_lock();
    assert!(
        lost.wait_fired(Duration::from_secs(1)) && held.wait_fired(Duration::from_secs(1)),
        "the attempts were not lost and held back as planned ({})",
        proxy.summary()
    );
    assert!(
        tried.is_err(),
        "the retry timed out: the call fails ({:?})",
        tried.map(|g| g.is_some())
    );
    (server, proxy, lock, name)
}

/// [`late_retry_failed`], then the held-back connection is cut before the
/// retry runs: the late retry and its undo never run, and Redis keeps the
/// first attempt's hold.
fn late_retry_cut_off(
    name: &'static str,
) -> (
    RedisServer,
    FaultProxy,
    redhold::ReentrantLock,
    &'static str,
) {
    let (server, proxy, lock, name) = late_retry_failed(name);
    // The retry (and the undos behind it) still wait in the proxy: cut
    // their connection before they are forwarded.
    let arming = proxy.arming();
    arming.start_partition();
    arming.heal();
    (server, proxy, lock, name)
}

/// How long the proxy holds back the reply of the second waiter's attempt
/// in [`a_waiter_whose_attempt_read_the_ttl_before_a_local_taking_gets_the_freed_lock`]:
/// past the release and the first waiter's taking, within the response
/// timeout.
const ATTEMPT_REPLY_HELD: Duration = Duration::from_secs(1);

/// `Known::TtlReadBeforeLocalTake`. A holder (another client) holds a lock
/// with a 10 s lease. A thread of the waiters' client tries it (busy),
/// joins the waiters and tries again; that attempt reads the 10 s TTL, and
/// its reply is held back. Meanwhile a second thread of that client parks
/// on the TTL. The holder releases: the message wakes the parked thread
/// (`Waiters::wake_one`), which takes the lock with a 1 s lease and keeps
/// its guard past it; its taking bounds the waiters parked then
/// (`Waiters::bound_parked`, 0d18fa5), and the first thread is not parked
/// yet. Its reply comes: busy, 10 s, read before the release; it parks on
/// that. The taker's hold expires silently. The first thread must get the
/// lock soon after (promise 3); as built it sleeps on the stale TTL until
/// the taker's guard drops (4 s later here).
#[test]
fn a_waiter_whose_attempt_read_the_ttl_before_a_local_taking_gets_the_freed_lock() {
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.port());
    let holder = server.client();
    let waiters = redhold::Client::builder()
        .url(proxy.url())
        .response_timeout(ATTEMPT_REPLY_HELD * 3)
        .build()
        .expect("client through the proxy");
    let name = "found:ttl-read-before-local-take";
    let held = holder
        .lock(name)
        .lock_with_lease(HOLDER_LEASE)
        .expect("the holder takes the lock");
    let arming = proxy.arming();
    // The first thread's second attempt: the first finds the lock busy
    // before its client listens on the channel, so it tries again once
    // it joined the waiters.
    let delayed = arming.arm(Rule {
        matcher: Matcher::script(name, &[]).nth(2),
        action: Action::DelayReply(ATTEMPT_REPLY_HELD),
    });
    let late_reader = {
        let lock = waiters.lock(name);
        thread::spawn(move || {
            let guard = lock
                .try_lock_for(HOLDER_LEASE * 2)
                .expect("the first thread's call");
            (Instant::now(), guard.is_some())
        })
    };
    assert!(
        delayed.wait_fired(Duration::from_secs(5)),
        "the first thread's second attempt was not held back ({})",
        proxy.summary()
    );
    let taker = {
        let lock = waiters.lock(name);
        thread::spawn(move || {
            let guard = lock
                .lock_with_lease(SHORT_LEASE)
                .expect("the second thread takes the lock");
            // Well past its lease: the hold expires while the guard stands.
            thread::sleep(SHORT_LEASE * 5);
            drop(guard);
        })
    };
    let parked = wait_until(Duration::from_secs(5), || {
        waiters.stats().parked_waiters == 1
    });
    assert!(parked.is_some(), "the second thread did not park");
    let released = Instant::now();
    drop(held);
    let (got_at, got) = late_reader.join().expect("the first thread");
    taker.join().expect("the second thread");
    assert!(got, "the first thread never got the lock");
    let waited = got_at.saturating_duration_since(released);
    let bound = SHORT_LEASE + ATTEMPT_REPLY_HELD + Duration::from_secs(1);
    assert!(
        waited <= bound,
        "the first thread got the lock {waited:?} after the release, though the lock was \
         free {SHORT_LEASE:?} after it (its taker's lease ran out): it parked on the \
         holder's TTL, read before the release, after the taking bounded the waiters parked"
    );
}

/// The lease of the old guard in
/// [`an_expired_guards_unlock_does_not_release_a_hold_its_thread_took_since`].
const OLD_LEASE: Duration = Duration::from_millis(300);

/// Defect 10 (`model/tests/client_found.rs`, found with `sync_replicas`
/// and a failover that brings back an undone acquire), here without a
/// replica: a thread's guard outlives its lease; the hold expires and
/// another client takes and releases the lock. The thread's next
/// `try_lock` takes the lock anew, but its reply is cut and the call's
/// settling look is cut too: the call fails, and its hold stays in Redis
/// (a documented limit: it expires after its lease, renewed by nobody).
/// The old guard's unlock must not answer `Ok` for that hold: its own
/// expired before the other client entered. As built the old generation
/// outlived the new acquire (the call failed, so nothing replaced its
/// record), and the unlock released the new hold and said `Ok`.
#[test]
fn an_expired_guards_unlock_does_not_release_a_hold_its_thread_took_since() {
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.port());
    let client = proxied(&proxy, 0);
    let other = server.client();
    let name = "found:expired-guard-unlock";
    let lock = client.lock(name);
    // Every script loaded: the cut EVALSHA finds its script.
    lock.lock()
        .expect("a first hold")
        .unlock()
        .expect("its release");
    let old = lock.lock_with_lease(OLD_LEASE).expect("the old hold");
    let expired = wait_until(Duration::from_secs(5), || !server.exists(name));
    assert!(expired.is_some(), "the old hold did not expire");
    other
        .lock(name)
        .lock()
        .expect("another client enters the lock")
        .unlock()
        .expect("and leaves it");
    let arming = proxy.arming();
    let lost = arming.arm(Rule {
        matcher: Matcher::script(name, &[]),
        action: Action::LoseReply,
    });
    let look = arming.arm(Rule {
        matcher: Matcher {
            commands: vec!["HGET".into()],
            exact: Some(name.as_bytes().to_vec()),
            ..Matcher::default()
        },
        action: Action::LoseReply,
    });
    let tried = lock.try_lock();
    assert!(
        lost.wait_fired(Duration::from_secs(1)) && look.wait_fired(Duration::from_secs(1)),
        "the attempt and the look were not cut as planned ({})",
        proxy.summary()
    );
    assert!(
        tried.is_err(),
        "the cut attempt fails the call ({:?})",
        tried.map(|g| g.is_some())
    );
    assert!(
        server.exists(name),
        "the cut attempt took the lock: the test's premise"
    );
    let unlocked = old.unlock();
    assert!(
        matches!(unlocked, Err(redhold::Error::LockLost { .. })),
        "the unlock of a guard whose lease ran out before another client entered the lock \
         answered {unlocked:?}, releasing a hold its thread took since (HGETALL after: {:?})",
        server.cmd::<Vec<(String, String)>>(&["HGETALL", name])
    );
}

/// The first guard's lease in
/// [`a_reentry_the_call_did_not_keep_still_counts_for_its_generation`],
/// and the longer one its thread's failed re-entry sets.
const FIRST_LEASE: Duration = Duration::from_secs(1);
const REENTRY_LEASE: Duration = Duration::from_secs(4);

/// Defect 11 (model, `ClientMutation::ReentryLeaseNotExtended`): a
/// thread holds a lock with a 1 s lease and re-enters it with a 4 s
/// lease; the re-entry runs (Redis's TTL is now 4 s), but its reply is
/// cut, and the call gives that hold back (its settling look): the key
/// keeps the 4 s TTL. After 1.2 s the client took the thread's holds for
/// expired, though Redis still counts one. The thread's next `try_lock`
/// runs late and fails, and the undo behind it gives back only what the
/// client counted above its guards. The first guard's unlock must then
/// leave the lock free. As built the `try_lock` went as a first taking
/// (Redis counted 2, the undo gave back 1), the first guard was stale,
/// and the lock stayed taken, with no guard, for the watchdog timeout
/// (30 s) the late attempt set.
#[test]
fn a_reentry_the_call_did_not_keep_still_counts_for_its_generation() {
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.port());
    let client = proxied(&proxy, 0);
    let name = "found:reentry-not-kept";
    let lock = client.lock(name);
    // Every script loaded: the cut and held-back EVALSHAs find theirs.
    lock.lock()
        .expect("a first hold")
        .unlock()
        .expect("its release");
    let first = lock.lock_with_lease(FIRST_LEASE).expect("the first hold");
    let arming = proxy.arming();
    let cut = arming.arm(Rule {
        matcher: Matcher::script(name, &[]),
        action: Action::LoseReply,
    });
    let reentry = lock.try_lock_for_with_lease(Duration::ZERO, REENTRY_LEASE);
    assert!(
        cut.wait_fired(Duration::from_secs(1)) && reentry.is_err(),
        "the re-entry's reply was not cut as planned ({}; {:?})",
        proxy.summary(),
        reentry.map(|g| g.is_some())
    );
    assert_eq!(
        server
            .cmd::<Vec<(String, String)>>(&["HGETALL", name])
            .len(),
        1,
        "the settling look gave the re-entry's hold back, the first stays"
    );
    thread::sleep(FIRST_LEASE + Duration::from_millis(200));
    assert!(
        server.exists(name),
        "Redis keeps the hold past the first lease"
    );
    let held = arming.arm(Rule {
        matcher: Matcher::script(name, &[]),
        action: Action::DelayRequest(RETRY_HELD),
    });
    let tried = lock.try_lock();
    assert!(
        held.wait_fired(Duration::from_secs(1)) && tried.is_err(),
        "the try_lock was not held back as planned ({}; {:?})",
        proxy.summary(),
        tried.map(|g| g.is_some())
    );
    // The late attempt and the undo behind it have run by then.
    thread::sleep(RETRY_HELD + Duration::from_millis(700));
    let unlocked = first.unlock();
    let free = wait_until(Duration::from_secs(2), || !server.exists(name));
    assert!(
        free.is_some(),
        "the lock stayed taken after its only guard's unlock ({unlocked:?}): HGETALL {:?}, \
         PTTL {} ms",
        server.cmd::<Vec<(String, String)>>(&["HGETALL", name]),
        server.cmd::<i64>(&["PTTL", name])
    );
}

/// The other reader's lease in
/// [`a_failed_read_try_lock_after_an_expired_read_hold_leaves_no_hold_behind`]:
/// it keeps the hash alive past the thread's expired hold.
const OTHER_READER_LEASE: Duration = Duration::from_secs(10);
/// The thread's first read hold's lease there.
const EXPIRED_READ_LEASE: Duration = Duration::from_millis(300);

/// Model defect 12 (`deep_kinds`, the read lock): a thread's read hold
/// expires while another client's read hold keeps the lock's hash alive,
/// so the thread's field still counts the expired hold (Redisson's layout:
/// a hold's key expires, its count stays until a release). The thread's
/// next read `try_lock` has its first attempt's reply cut and its retry
/// held back past the response timeout; the call fails, and the undo
/// behind the late retry gives back two holds above none. Once the other
/// reader releases, a writer must get the lock. As built the field counted
/// the dead hold too: the undo's two releases dropped it and one live
/// hold, and the other live one kept the lock, with no guard, for the
/// watchdog timeout (30 s).
#[test]
fn a_failed_read_try_lock_after_an_expired_read_hold_leaves_no_hold_behind() {
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.port());
    let client = proxied(&proxy, 1);
    let other = server.client();
    let name = "found:read-dead-hold";
    let lock = client.read_write_lock(name).read();
    // Every script loaded: the cut and held-back EVALSHAs find theirs.
    lock.lock()
        .expect("a first read hold")
        .unlock()
        .expect("its release");
    let other_reader = other
        .read_write_lock(name)
        .read()
        .lock_with_lease(OTHER_READER_LEASE)
        .expect("the other client's read hold");
    let expired = lock
        .lock_with_lease(EXPIRED_READ_LEASE)
        .expect("the thread's read hold");
    thread::sleep(EXPIRED_READ_LEASE + Duration::from_millis(300));
    let arming = proxy.arming();
    let lost = arming.arm(Rule {
        matcher: Matcher::script(name, &[]),
        action: Action::LoseReply,
    });
    let held = arming.arm(Rule {
        matcher: Matcher::script(name, &[]),
        action: Action::DelayRequest(RETRY_HELD),
    });
    let tried = lock.try_lock();
    assert!(
        lost.wait_fired(Duration::from_secs(1)) && held.wait_fired(Duration::from_secs(1)),
        "the attempts were not lost and held back as planned ({})",
        proxy.summary()
    );
    assert!(
        tried.is_err(),
        "the retry timed out: the call fails ({:?})",
        tried.map(|g| g.is_some())
    );
    // The held-back retry and the undo behind it have run by then.
    thread::sleep(RETRY_HELD + Duration::from_millis(700));
    drop(expired);
    other_reader.unlock().expect("the other reader's release");
    let writer = other.read_write_lock(name).write();
    let got = wait_until(Duration::from_secs(3), || {
        writer.try_lock().expect("the writer's try").is_some()
    });
    assert!(
        got.is_some(),
        "a writer could not take the lock once every guard was gone: HGETALL {:?}, PTTL {} ms",
        server.cmd::<Vec<(String, String)>>(&["HGETALL", name]),
        server.cmd::<i64>(&["PTTL", name])
    );
}

/// Model defect 13 (`LatchMutation::CountDownNotUndone` in
/// `model/tests/latch.rs`): a `count_down` whose every attempt failed, the
/// last one held back past the response timeout, returns an error; the
/// latch opens (another count-down) and is armed again for a second round
/// (`try_set_count`); then the held-back request runs. As built it found
/// no request latch (no attempt ran before it) and counted the new round
/// down to 0: the second round opened though nobody counted it down.
/// Fixed: the failed call's undo, on a connection of its own before the
/// call returns, closed its request latch, and the late request replays.
#[test]
fn a_failed_count_down_that_runs_late_does_not_count_the_next_round() {
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.port());
    let client = redhold::Client::builder()
        .url(proxy.url())
        .response_timeout(Duration::from_millis(300))
        .retry_attempts(0)
        .build()
        .expect("client through the proxy");
    let warm = client.count_down_latch("found:warm-up");
    warm.count_down().expect("loads the script");
    let latch = client.count_down_latch("found:rounds");
    assert!(latch.try_set_count(1).expect("round 1 armed"));
    let armed = proxy.arming().arm(Rule {
        matcher: Matcher::script("found:rounds", &["redisson_countdownlatch__channel__"]),
        action: Action::DelayRequest(RETRY_HELD),
    });
    assert!(
        latch.count_down().is_err(),
        "the count-down held back past the response timeout fails"
    );
    assert!(armed.wait_fired(Duration::from_secs(1)), "the rule fired");
    // Another process opens round 1 and arms round 2 before the held-back
    // request reaches the server.
    let other = server.client().count_down_latch("found:rounds");
    assert_eq!(other.count_down().expect("round 1 opened"), 0);
    assert!(other.try_set_count(1).expect("round 2 armed"));
    thread::sleep(RETRY_HELD + Duration::from_millis(700));
    assert_eq!(
        other.count().expect("the count"),
        1,
        "round 2 was counted down by the late request of a count_down that failed in round 1: \
         it opened though nobody counted it down"
    );
}

/// The lease of the guard in
/// [`a_late_attempt_that_re_enters_counts_for_its_generation`].
const RE_ENTERED_LEASE: Duration = Duration::from_secs(4);
/// How long its call's first attempt is held back: it runs, a re-entry
/// of the hold the retry took, well after the retry.
const FIRST_ATTEMPT_HELD: Duration = Duration::from_millis(2500);
/// How long each attempt of the failing `try_lock` is held back: past the
/// response timeout, well within the re-entry's TTL.
const LATER_ATTEMPTS_HELD: Duration = Duration::from_millis(600);

/// Model defect 11, second shape (three faults: `ClientMutation::LateAttemptLeaseNotCounted`):
/// a thread's `lock_with_lease(4 s)` has its first attempt held back past
/// the response timeout, and its retry takes the lock. The late attempt
/// then runs, re-entering that hold (Redis's TTL is 4 s from then), and
/// the undo behind it gives the hold back, not the TTL. At the retry's
/// lease end the client took the holds for expired, though Redis still
/// counts one; its next `try_lock` (both attempts held back, the call
/// fails) went as a first taking, and its undos (one release each,
/// `above:0`) left a hold with no guard, for the watchdog timeout the
/// late attempts set. The guard's unlock must leave the lock free.
#[test]
fn a_late_attempt_that_re_enters_counts_for_its_generation() {
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.port());
    let client = proxied(&proxy, 1);
    let name = "found:late-reentry";
    let lock = client.lock(name);
    // Every script loaded: the held-back EVALSHAs find theirs.
    lock.lock()
        .expect("a first hold")
        .unlock()
        .expect("its release");
    let arming = proxy.arming();
    let first = arming.arm(Rule {
        matcher: Matcher::script(name, &[]),
        action: Action::DelayRequest(FIRST_ATTEMPT_HELD),
    });
    let started = Instant::now();
    let guard = lock
        .lock_with_lease(RE_ENTERED_LEASE)
        .expect("the retry takes the lock");
    assert!(
        first.wait_fired(Duration::from_secs(1)),
        "the first attempt was not held back"
    );
    // Past the lease as the call counted it, within the late re-entry's.
    let after_lease = started + RE_ENTERED_LEASE + Duration::from_millis(300);
    thread::sleep(after_lease.saturating_duration_since(Instant::now()));
    assert!(
        server.exists(name),
        "Redis keeps the hold the late attempt re-entered"
    );
    let held: Vec<_> = (0..2)
        .map(|_| {
            arming.arm(Rule {
                matcher: Matcher::script(name, &[]),
                action: Action::DelayRequest(LATER_ATTEMPTS_HELD),
            })
        })
        .collect();
    let tried = lock.try_lock();
    assert!(
        held.iter().all(|h| h.wait_fired(Duration::from_secs(1))) && tried.is_err(),
        "the try_lock's attempts were not held back as planned ({}; {:?})",
        proxy.summary(),
        tried.map(|g| g.is_some())
    );
    // The late attempts and the undos behind them have run by then.
    thread::sleep(LATER_ATTEMPTS_HELD + Duration::from_millis(700));
    let unlocked = guard.unlock();
    let free = wait_until(Duration::from_secs(2), || !server.exists(name));
    assert!(
        free.is_some(),
        "the lock stayed taken after its only guard's unlock ({unlocked:?}): HGETALL {:?}, \
         PTTL {} ms",
        server.cmd::<Vec<(String, String)>>(&["HGETALL", name]),
        server.cmd::<i64>(&["PTTL", name])
    );
}
