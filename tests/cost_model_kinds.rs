//! The cost model for the other kinds (issue 27): what a reentrant pair
//! and a hand-over between two clients send to Redis, counted with
//! `INFO commandstats` as in `tests/cost_model.rs` (the plain lock's rows,
//! the herd and the renewals are there).

mod bounded;
mod support;

use std::collections::HashMap;
use std::time::Duration;

use redhold::{Holding, Lock, LockKind, Owner};
use support::RedisServer;

/// Generous bound for anything that should take milliseconds.
const PROMPTLY: Duration = Duration::from_secs(10);

fn reset(server: &RedisServer) {
    let () = server.cmd(&["CONFIG", "RESETSTAT"]);
}

fn scripts(calls: &HashMap<String, u64>) -> u64 {
    calls.get("evalsha").copied().unwrap_or(0) + calls.get("eval").copied().unwrap_or(0)
}

/// Scripts of a reentrant pair (acquire twice, release twice).
fn reentrant_pair<K: LockKind, H: Holding>(server: &RedisServer, lock: &Lock<K, H>) -> u64 {
    drop(lock.lock().unwrap()); // loads the scripts
    reset(server);
    let outer = lock.lock().unwrap();
    let inner = lock.lock().unwrap();
    drop(inner);
    drop(outer);
    scripts(&server.command_calls())
}

/// Scripts and SUBSCRIBEs of one hand-over between two clients in the
/// steady state: one waiter thread of its own client takes the lock round
/// after round (its channel, a fair lock's per-thread one too, stays
/// subscribed between rounds), the holder's client holds it meanwhile.
/// The first round (subscriptions, scripts loaded) is not counted.
fn hand_over<K: LockKind, W: LockKind>(
    server: &RedisServer,
    holder: Lock<K>,
    waiter: Lock<W>,
) -> Vec<(u64, u64)> {
    let waiter_client = waiter.client().clone();
    let (go, go_rx) = std::sync::mpsc::channel::<()>();
    let (done_tx, done) = std::sync::mpsc::channel::<()>();
    let thread = bounded::spawn("waiter", move || {
        while go_rx.recv().is_ok() {
            drop(waiter.lock().unwrap());
            done_tx.send(()).unwrap();
        }
    });
    let mut rounds = Vec::new();
    let mut skipped_rounds = 0;
    for round in 0..5 {
        // Let the last round's announcements reach the waiter's subscriber
        // (see tests/cost_model.rs).
        std::thread::sleep(Duration::from_millis(200));
        let skipped_before = waiter_client.stats().second_tries_skipped;
        let guard = holder.lock_with_lease(Duration::from_secs(60)).unwrap();
        reset(server);
        go.send(()).unwrap();
        let parked = bounded::wait_until(PROMPTLY, || waiter_client.stats().parked_waiters == 1);
        assert!(parked.is_some(), "the waiter never parked");
        drop(guard);
        done.recv_timeout(PROMPTLY).unwrap();
        let run = server.command_calls();
        if round > 0 {
            // The waiter's guard was dropped too: one script less; a round
            // whose quiet was disturbed (no skip counted) tries once more.
            let skipped = waiter_client.stats().second_tries_skipped - skipped_before;
            rounds.push((
                scripts(&run) - 1 - u64::from(skipped == 0),
                run.get("subscribe").copied().unwrap_or(0),
            ));
            skipped_rounds += skipped;
        }
    }
    assert!(
        skipped_rounds >= 2,
        "the second try was skipped in {skipped_rounds} of 4 rounds"
    );
    drop(go);
    thread.join_within(PROMPTLY);
    rounds
}

#[test]
fn a_reentrant_pair_is_four_scripts_for_every_kind() {
    let server = RedisServer::start();
    let client = server.client();
    let rw = client.read_write_lock("c:rw");
    assert_eq!(
        reentrant_pair(&server, &client.fair_lock("c:fair")),
        4,
        "fair"
    );
    assert_eq!(
        reentrant_pair(&server, &client.fenced_lock("c:fenced")),
        4,
        "fenced"
    );
    assert_eq!(
        reentrant_pair(&server, &client.spin_lock("c:spin")),
        4,
        "spin"
    );
    assert_eq!(reentrant_pair(&server, &rw.read()), 4, "read");
    assert_eq!(reentrant_pair(&server, &rw.write()), 4, "write");
}

/// An owner's holds cost what a thread's do: the same four scripts for a
/// reentrant pair of every kind, re-entered from another thread or not.
#[test]
fn an_owners_reentrant_pair_is_four_scripts_for_every_kind() {
    let server = RedisServer::start();
    let client = server.client();
    let owner = Owner::new();
    let rw = client.read_write_lock("o:rw");
    let kinds = [
        (
            "plain",
            reentrant_pair(&server, &client.lock("o:plain").for_owner(owner)),
        ),
        (
            "fair",
            reentrant_pair(&server, &client.fair_lock("o:fair").for_owner(owner)),
        ),
        (
            "fenced",
            reentrant_pair(&server, &client.fenced_lock("o:fenced").for_owner(owner)),
        ),
        (
            "spin",
            reentrant_pair(&server, &client.spin_lock("o:spin").for_owner(owner)),
        ),
        ("read", reentrant_pair(&server, &rw.read().for_owner(owner))),
        (
            "write",
            reentrant_pair(&server, &rw.write().for_owner(owner)),
        ),
    ];
    for (kind, scripts) in kinds {
        assert_eq!(scripts, 4, "{kind}");
    }
    // Taken on one thread, re-entered and released on others.
    let lock = client.lock("o:threads").for_owner(owner);
    drop(lock.lock().unwrap());
    reset(&server);
    let outer = lock.lock().unwrap();
    let inner = {
        let lock = lock.clone();
        std::thread::spawn(move || lock.lock().unwrap())
            .join()
            .unwrap()
    };
    std::thread::spawn(move || {
        drop(inner);
        drop(outer);
    })
    .join()
    .unwrap();
    assert_eq!(scripts(&server.command_calls()), 4, "across threads");
}

/// Three scripts per hand-over between two clients for every kind that
/// waits on pub/sub, as for the plain lock: the waiter's failed try, the
/// release, the winning try; no SUBSCRIBE in the steady state (a fair
/// waiter's own channel lingers too).
#[test]
fn a_hand_over_between_two_clients_is_three_scripts_for_every_pubsub_kind() {
    let server = RedisServer::start();
    let (a, b) = (server.client(), server.client());
    let rows = [
        (
            "fair",
            hand_over(&server, a.fair_lock("h:fair"), b.fair_lock("h:fair")),
        ),
        (
            "fenced",
            hand_over(
                &server,
                a.fenced_lock("h:fenced"),
                b.fenced_lock("h:fenced"),
            ),
        ),
        (
            "write to write",
            hand_over(
                &server,
                a.read_write_lock("h:ww").write(),
                b.read_write_lock("h:ww").write(),
            ),
        ),
        (
            "write to read",
            hand_over(
                &server,
                a.read_write_lock("h:wr").write(),
                b.read_write_lock("h:wr").read(),
            ),
        ),
        (
            "read to write",
            hand_over(
                &server,
                a.read_write_lock("h:rw").read(),
                b.read_write_lock("h:rw").write(),
            ),
        ),
    ];
    for (kind, rounds) in rows {
        for (round, (scripts, subscribes)) in rounds.into_iter().enumerate() {
            assert_eq!(scripts, 3, "{kind}, round {}", round + 1);
            assert_eq!(subscribes, 0, "{kind}, round {}", round + 1);
        }
    }
}

/// The spin lock's waiter polls instead (its documented cost): a first
/// try, one more at once, then one per backoff step (1 ms doubling up to
/// 128 ms, then 128 ms each), so a hold of `t` ms costs at most 2 + 8 +
/// ⌈t / 128⌉ tries, plus the holder's release and the waiter's. Counted
/// against the time the lock was really held.
#[test]
fn a_spin_waiter_costs_one_try_per_backoff_step() {
    let server = RedisServer::start();
    let (a, b) = (server.client(), server.client());
    let holder = a.spin_lock("h:spin");
    let waiter = b.spin_lock("h:spin");
    let guard = holder.lock().unwrap();
    reset(&server);
    let started = std::time::Instant::now();
    let waiting = bounded::spawn("waiter", move || waiter.lock().map(drop));
    std::thread::sleep(Duration::from_millis(300));
    drop(guard);
    let held = started.elapsed();
    waiting.join_within(PROMPTLY).unwrap();
    let run = server.command_calls();
    let at_cap = u64::try_from(held.as_millis().div_ceil(128)).unwrap_or(u64::MAX);
    let bound = 2 + 8 + at_cap + 2;
    let counted = scripts(&run);
    eprintln!("spin: {counted} scripts for a hold of {held:?} (bound {bound})");
    assert!(
        counted <= bound,
        "{counted} scripts, bound {bound}: {run:?}"
    );
    assert!(
        counted >= 8,
        "the waiter polled less than its backoff says: {run:?}"
    );
}
