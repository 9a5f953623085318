//! Every lock kind on a real three-master Redis Cluster, with lock names on
//! each master: exclusion and hand-over, wake-ups over sharded pub/sub (and
//! classic pub/sub when asked), renewal on every node, and Redisson's
//! sharded wire format. Each test forms a cluster of its own (about 3 s).
//!
//! Sharded pub/sub needs Redis 7 (or Valkey): on a Redis 6.2 cluster the
//! same tests check that the library falls back to classic pub/sub, and
//! that the fallback is what Redisson does there (see `support::version`).
#![cfg(feature = "cluster")]

mod bounded;
mod support;

use std::time::{Duration, Instant};

use redhold::{Client, ClientBuilder, Lock, LockKind};
use support::cluster::RedisCluster;
use support::{server_version, RedisServer};

/// Generous bound for anything that should take milliseconds; far below the
/// 30 s watchdog timeout, so meeting it proves a wake-up, not an expiry.
const PROMPTLY: Duration = Duration::from_secs(5);

/// How long a waiter is checked to stay blocked before the release.
const BLOCKED_FOR: Duration = Duration::from_millis(200);

/// A builder for a client of `cluster`, seeded with every node.
fn builder(cluster: &RedisCluster) -> ClientBuilder {
    Client::builder()
        .cluster(cluster.urls())
        .connect_timeout(Duration::from_secs(2))
}

fn client(cluster: &RedisCluster) -> Client {
    builder(cluster)
        .build()
        .unwrap_or_else(|e| panic!("cluster client for {:?}: {e}", cluster.urls()))
}

/// The pub/sub channel on which releases of lock `name` are announced.
fn channel_of(name: &str) -> String {
    if name.contains('{') {
        format!("redisson_lock__channel:{name}")
    } else {
        format!("redisson_lock__channel:{{{name}}}")
    }
}

fn exists(cluster: &RedisCluster, key: &str) -> bool {
    cluster.cmd_for_key::<i64>(key, &["EXISTS", key]) == 1
}

/// Whether the cluster's servers have sharded pub/sub (Redis 7+, Valkey),
/// and so whether waiters should listen with SSUBSCRIBE (else SUBSCRIBE).
fn sharded() -> bool {
    server_version().has_sharded_pubsub()
}

/// How many connections listen on `channel` with SSUBSCRIBE, per its owner;
/// none on a server without sharded pub/sub (Redis 6.2).
fn shard_subscribers(cluster: &RedisCluster, channel: &str) -> i64 {
    if !sharded() {
        return 0;
    }
    let reply: (String, i64) = cluster.cmd_for_key(channel, &["PUBSUB", "SHARDNUMSUB", channel]);
    reply.1
}

/// How many connections listen on `channel` the way a waiter of a default
/// client should on these servers: with SSUBSCRIBE on the slot's owner
/// where they have sharded pub/sub, with SUBSCRIBE on any node where they
/// have not.
fn waiter_subscribers(cluster: &RedisCluster, channel: &str) -> i64 {
    if sharded() {
        shard_subscribers(cluster, channel)
    } else {
        classic_subscribers(cluster, channel)
    }
}

/// How many connections listen on `channel` with SUBSCRIBE, on all nodes.
fn classic_subscribers(cluster: &RedisCluster, channel: &str) -> i64 {
    (0..cluster.len())
        .map(|i| {
            let reply: (String, i64) = cluster.node(i).cmd(&["PUBSUB", "NUMSUB", channel]);
            reply.1
        })
        .sum()
}

/// `a` and `b` are the same lock on two clients. Checks that `a` holds it
/// reentrantly in the owner node, that `b` is excluded, and that a waiter on
/// `b` gets it promptly once `a` lets go; the lock is gone afterwards.
fn excludes_and_hands_over<K: LockKind>(cluster: &RedisCluster, a: &Lock<K>, b: &Lock<K>) {
    let name = a.name().to_owned();
    let first = a.lock().unwrap_or_else(|e| panic!("lock {name}: {e}"));
    let second = a.lock().unwrap_or_else(|e| panic!("re-lock {name}: {e}"));
    assert_eq!(a.hold_count().expect("hold_count"), 2, "{name}");
    assert!(exists(cluster, &name), "{name} is not on its owner node");
    let ttl: i64 = cluster.cmd_for_key(&name, &["PTTL", &name]);
    assert!(ttl > 0, "{name} has PTTL {ttl}");
    assert!(
        b.try_lock()
            .expect("try_lock on the other client")
            .is_none(),
        "{name} was granted to a second client while held"
    );

    let waiter_lock = b.clone();
    let waiter = bounded::spawn("waiter", move || {
        let guard = waiter_lock.lock().map_err(|e| e.to_string())?;
        guard.unlock().map_err(|e| e.to_string())
    });
    waiter.assert_running_for(BLOCKED_FOR);
    drop(second);
    first
        .unlock()
        .unwrap_or_else(|e| panic!("unlock {name}: {e}"));
    waiter
        .join_within(PROMPTLY)
        .unwrap_or_else(|e| panic!("waiter on {name}: {e}"));
    assert!(!exists(cluster, &name), "{name} left behind after release");
}

#[test]
fn every_lock_kind_works_with_names_on_every_master() {
    let cluster = RedisCluster::start(3);
    let (a, b) = (client(&cluster), client(&cluster));

    for name in cluster.names_on_each_master("plain") {
        excludes_and_hands_over(&cluster, &a.lock(&name), &b.lock(&name));
    }
    for name in cluster.names_on_each_master("spin") {
        excludes_and_hands_over(&cluster, &a.spin_lock(&name), &b.spin_lock(&name));
    }
    for name in cluster.names_on_each_master("write") {
        let (wa, wb) = (
            a.read_write_lock(&name).write(),
            b.read_write_lock(&name).write(),
        );
        excludes_and_hands_over(&cluster, &wa, &wb);
    }
    for name in cluster.names_on_each_master("fair") {
        excludes_and_hands_over(&cluster, &a.fair_lock(&name), &b.fair_lock(&name));
        // The queue and deadline keys share the lock's slot and are cleaned up.
        for helper in ["redisson_lock_queue", "redisson_lock_timeout"] {
            let key = format!("{helper}:{{{name}}}");
            assert_eq!(cluster.node_for_key(&key), cluster.node_for_key(&name));
            assert!(!exists(&cluster, &key), "{key} left behind");
        }
    }
    for name in cluster.names_on_each_master("fenced") {
        let (fa, fb) = (a.fenced_lock(&name), b.fenced_lock(&name));
        let first = fa.lock().expect("fenced lock").token();
        excludes_and_hands_over(&cluster, &fa, &fb);
        let later = fb.lock().expect("fenced lock again");
        assert!(
            later.token() > first,
            "{name}: token {} after token {first}",
            later.token()
        );
        let counter = format!("redisson_lock_token:{{{name}}}");
        let stored: u64 = cluster.cmd_for_key(&counter, &["GET", &counter]);
        assert_eq!(stored, later.token(), "{counter} on the owner node");
    }
    for name in cluster.names_on_each_master("rw") {
        readers_share_and_a_writer_waits(&cluster, &a, &b, &name);
    }
}

/// Readers on two clients hold `name` at once; a writer waits for both and
/// is woken promptly when the last one leaves.
fn readers_share_and_a_writer_waits(cluster: &RedisCluster, a: &Client, b: &Client, name: &str) {
    let read_a = a.read_write_lock(name).read().lock().expect("read on a");
    let read_b = b.read_write_lock(name).read().lock().expect("read on b");
    let mode: String = cluster.cmd_for_key(name, &["HGET", name, "mode"]);
    assert_eq!(mode, "read", "{name}");
    let hold_keys: Vec<String> = cluster.cmd_for_key(name, &["KEYS", &format!("{{{name}}}:*")]);
    assert_eq!(
        hold_keys.len(),
        2,
        "one read-hold key per reader: {hold_keys:?}"
    );

    let writer_lock = b.read_write_lock(name).write();
    let writer = bounded::spawn("writer", move || {
        let guard = writer_lock.lock().map_err(|e| e.to_string())?;
        guard.unlock().map_err(|e| e.to_string())
    });
    writer.assert_running_for(BLOCKED_FOR);
    drop(read_a);
    writer.assert_running_for(BLOCKED_FOR);
    drop(read_b);
    writer
        .join_within(PROMPTLY)
        .unwrap_or_else(|e| panic!("writer on {name}: {e}"));
    assert!(!exists(cluster, name), "{name} left behind");
}

/// Holds `name` on `holder`, blocks a waiter on `waiter`, checks with
/// `while_waiting` how it listens, releases, and returns how long the waiter
/// took to get the lock after the release.
fn wake_up_time(
    holder: &Client,
    waiter: &Client,
    name: &str,
    while_waiting: impl FnOnce(),
) -> Duration {
    let guard = holder.lock(name).lock().expect("holder");
    let lock = waiter.lock(name);
    let blocked = bounded::spawn("waiter", move || {
        let guard = lock.lock().map_err(|e| e.to_string())?;
        let got_it = Instant::now();
        guard.unlock().map_err(|e| e.to_string())?;
        Ok::<_, String>(got_it)
    });
    blocked.assert_running_for(BLOCKED_FOR);
    while_waiting();
    let released = Instant::now();
    guard.unlock().expect("release");
    let got_it = blocked
        .join_within(PROMPTLY)
        .unwrap_or_else(|e| panic!("waiter on {name}: {e}"));
    got_it.saturating_duration_since(released)
}

/// Redis 7 (or Valkey) everywhere: the waiter listens with SSUBSCRIBE on
/// the slot's owner, and not with SUBSCRIBE anywhere. Redis 6.2: it falls
/// back to SUBSCRIBE (on one node; classic messages reach every node).
#[test]
fn a_waiter_is_woken_over_sharded_pubsub_or_its_fallback_on_every_master() {
    let cluster = RedisCluster::start(3);
    let (holder, waiter) = (client(&cluster), client(&cluster));
    assert_eq!(holder.watchdog_timeout(), Duration::from_secs(30));
    for name in cluster.names_on_each_master("wake") {
        let channel = channel_of(&name);
        let took = wake_up_time(&holder, &waiter, &name, || {
            let subscribed =
                bounded::wait_until(PROMPTLY, || waiter_subscribers(&cluster, &channel) == 1);
            assert!(
                subscribed.is_some(),
                "{channel}: {} subscribers (sharded pub/sub: {}), expected 1",
                waiter_subscribers(&cluster, &channel),
                sharded()
            );
            if sharded() {
                assert_eq!(classic_subscribers(&cluster, &channel), 0, "{channel}");
            }
        });
        // Far below the 30 s TTL the waiter would otherwise sleep out.
        assert!(took < PROMPTLY, "{name}: woken {took:?} after the release");
    }
}

#[test]
fn classic_pubsub_when_sharded_pubsub_is_turned_off() {
    let cluster = RedisCluster::start(3);
    let classic = |c: &RedisCluster| {
        builder(c)
            .sharded_pubsub(false)
            .build()
            .expect("cluster client with classic pub/sub")
    };
    let (holder, waiter) = (classic(&cluster), classic(&cluster));
    for name in cluster.names_on_each_master("classic") {
        let channel = channel_of(&name);
        // Classic PUBLISH reaches subscribers on every node, so a raw
        // SUBSCRIBE on a node that does not own the slot hears it too.
        let elsewhere = (cluster.node_for_key(&name) + 1) % cluster.len();
        let mut raw = RawSubscriber::new(cluster.node(elsewhere), "SUBSCRIBE", &channel);
        let took = wake_up_time(&holder, &waiter, &name, || {
            let subscribed =
                bounded::wait_until(PROMPTLY, || classic_subscribers(&cluster, &channel) == 2);
            assert!(
                subscribed.is_some(),
                "{channel}: {} classic subscribers, expected the waiter's and ours",
                classic_subscribers(&cluster, &channel)
            );
            assert_eq!(shard_subscribers(&cluster, &channel), 0, "{channel}");
        });
        assert!(took < PROMPTLY, "{name}: woken {took:?} after the release");
        let heard = raw.next_message(PROMPTLY);
        assert_eq!(
            heard,
            Some(("message".into(), channel.clone(), "0".into())),
            "the release of {name}, heard on another node"
        );
    }
}

/// By default (`publish_both_ways`) a release on a cluster with sharded
/// pub/sub is announced to both kinds of listener: Redisson before 3.22
/// listens with SUBSCRIBE there, later ones (and redhold) with SSUBSCRIBE.
/// A client told `publish_both_ways(false)` announces only its own way.
#[test]
fn releases_are_announced_both_ways_unless_told_otherwise() {
    let cluster = RedisCluster::start(3);
    let both = client(&cluster);
    let one_way = builder(&cluster)
        .publish_both_ways(false)
        .build()
        .expect("cluster client publishing one way");
    for name in cluster.names_on_each_master("both-ways") {
        let channel = channel_of(&name);
        let owner = cluster.node_for_key(&name);
        let elsewhere = (owner + 1) % cluster.len();
        let mut classic = RawSubscriber::new(cluster.node(elsewhere), "SUBSCRIBE", &channel);
        let mut shard =
            sharded().then(|| RawSubscriber::new(cluster.node(owner), "SSUBSCRIBE", &channel));
        let message = |kind: &str| Some((kind.to_owned(), channel.clone(), "0".to_owned()));

        both.lock(&name)
            .lock()
            .expect("lock")
            .unlock()
            .expect("unlock");
        assert_eq!(
            classic.next_message(PROMPTLY),
            message("message"),
            "{name}: classic"
        );
        if let Some(shard) = &mut shard {
            assert_eq!(
                shard.next_message(PROMPTLY),
                message("smessage"),
                "{name}: sharded"
            );
        }

        one_way
            .lock(&name)
            .lock()
            .expect("lock")
            .unlock()
            .expect("unlock");
        if let Some(shard) = &mut shard {
            assert_eq!(
                shard.next_message(PROMPTLY),
                message("smessage"),
                "{name}: sharded"
            );
            assert_eq!(
                classic.next_message(BLOCKED_FOR),
                None,
                "{name}: published classically too"
            );
        } else {
            // Redis 6.2: classic pub/sub is the only way.
            assert_eq!(
                classic.next_message(PROMPTLY),
                message("message"),
                "{name}: classic"
            );
        }
    }
}

/// A client that listens sharded and is told `hear_classic_releases`
/// hears a release announced with classic PUBLISH only (as Redisson before
/// 3.22 announces them), on every master, through its one pattern
/// connection; without it the waiter would sleep out the 30 s TTL.
#[test]
fn hear_classic_releases_wakes_a_sharded_waiter_on_a_classic_release() {
    let cluster = RedisCluster::start(3);
    // Publishes the way Redisson 3.17 does: PUBLISH only.
    let classic = builder(&cluster)
        .sharded_pubsub(false)
        .publish_both_ways(false)
        .build()
        .expect("classic cluster client");
    let waiter = builder(&cluster)
        .hear_classic_releases(true)
        .build()
        .expect("cluster client hearing classic releases");
    for name in cluster.names_on_each_master("hear-classic") {
        let channel = channel_of(&name);
        let took = wake_up_time(&classic, &waiter, &name, || {
            let subscribed =
                bounded::wait_until(PROMPTLY, || waiter_subscribers(&cluster, &channel) == 1);
            assert!(
                subscribed.is_some(),
                "{channel}: the waiter never subscribed"
            );
        });
        assert!(took < PROMPTLY, "{name}: woken {took:?} after the release");
    }
    let everywhere: i64 = (0..cluster.len())
        .map(|i| {
            redis::cmd("PUBSUB")
                .arg("NUMPAT")
                .query::<i64>(&mut cluster.node(i).connection())
                .expect("PUBSUB NUMPAT")
        })
        .sum();
    // On Redis 6.2 the waiter listens classic already (no sharded pub/sub
    // there), so it needs no pattern connection.
    let patterns = if sharded() { 4 } else { 0 };
    assert_eq!(
        everywhere, patterns,
        "one connection with the four channel patterns on Redis 7+, none on 6.2"
    );
}

#[test]
fn renewal_keeps_every_kind_alive_on_every_node() {
    let cluster = RedisCluster::start(3);
    let watchdog = Duration::from_secs(1);
    let client = builder(&cluster)
        .watchdog_timeout(watchdog)
        .build()
        .expect("cluster client");
    let other = client_for_checks(&cluster);

    let plain: Vec<_> = held(&cluster, "renew-plain", |n| client.lock(n).lock());
    let spin: Vec<_> = held(&cluster, "renew-spin", |n| client.spin_lock(n).lock());
    let fair: Vec<_> = held(&cluster, "renew-fair", |n| client.fair_lock(n).lock());
    let fenced: Vec<_> = held(&cluster, "renew-fenced", |n| client.fenced_lock(n).lock());
    let write: Vec<_> = held(&cluster, "renew-write", |n| {
        client.read_write_lock(n).write().lock()
    });
    let read: Vec<_> = held(&cluster, "renew-read", |n| {
        client.read_write_lock(n).read().lock()
    });

    // Three watchdog timeouts: without renewal every key would be gone.
    std::thread::sleep(watchdog * 3);

    let mut names = Vec::new();
    names.extend(plain.iter().map(|(n, g)| (n.clone(), g.is_held())));
    names.extend(spin.iter().map(|(n, g)| (n.clone(), g.is_held())));
    names.extend(fair.iter().map(|(n, g)| (n.clone(), g.is_held())));
    names.extend(fenced.iter().map(|(n, g)| (n.clone(), g.is_held())));
    names.extend(write.iter().map(|(n, g)| (n.clone(), g.is_held())));
    names.extend(read.iter().map(|(n, g)| (n.clone(), g.is_held())));
    let mut owners_seen = [false; 3];
    for (name, is_held) in &names {
        assert!(is_held, "{name}: the guard says the lock was lost");
        let ttl: i64 = cluster.cmd_for_key(name, &["PTTL", name]);
        assert!(ttl > 0, "{name}: PTTL {ttl} after {:?}", watchdog * 3);
        // A plain try on a read-write lock's name is refused as the wrong
        // kind: taken all the same.
        match other.lock(name).try_lock() {
            Ok(None) | Err(redhold::Error::WrongKind { .. }) => {}
            Ok(Some(_)) => panic!("{name} was free for another client"),
            Err(e) => panic!("{name}: try_lock: {e}"),
        }
        owners_seen[cluster.node_for_key(name)] = true;
    }
    assert_eq!(owners_seen, [true; 3]);
    // A read hold also lives in a key of its own, renewed with the hash.
    for (name, _) in &read {
        let hold_keys: Vec<String> =
            cluster.cmd_for_key(name, &["KEYS", &format!("{{{name}}}:*:rwlock_timeout:*")]);
        assert_eq!(hold_keys.len(), 1, "{name}: {hold_keys:?}");
        let ttl: i64 = cluster.cmd_for_key(&hold_keys[0], &["PTTL", &hold_keys[0]]);
        assert!(ttl > 0, "{}: PTTL {ttl}", hold_keys[0]);
    }

    for (name, guard) in plain {
        guard
            .unlock()
            .unwrap_or_else(|e| panic!("unlock {name}: {e}"));
    }
    for (name, guard) in spin {
        guard
            .unlock()
            .unwrap_or_else(|e| panic!("unlock {name}: {e}"));
    }
    for (name, guard) in fair {
        guard
            .unlock()
            .unwrap_or_else(|e| panic!("unlock {name}: {e}"));
    }
    for (name, guard) in fenced {
        guard
            .unlock()
            .unwrap_or_else(|e| panic!("unlock {name}: {e}"));
    }
    for (name, guard) in write {
        guard
            .unlock()
            .unwrap_or_else(|e| panic!("unlock {name}: {e}"));
    }
    for (name, guard) in read {
        guard
            .unlock()
            .unwrap_or_else(|e| panic!("unlock {name}: {e}"));
    }
    for (name, _) in &names {
        assert!(!exists(&cluster, name), "{name} left behind");
    }
}

/// A second client, for checking from outside that locks are held.
fn client_for_checks(cluster: &RedisCluster) -> Client {
    client(cluster)
}

/// Takes one lock per master with `take`, named `prefix-<n>`.
fn held<G>(
    cluster: &RedisCluster,
    prefix: &str,
    take: impl Fn(&str) -> redhold::Result<G>,
) -> Vec<(String, G)> {
    cluster
        .names_on_each_master(prefix)
        .into_iter()
        .map(|name| {
            let guard = take(&name).unwrap_or_else(|e| panic!("lock {name}: {e}"));
            (name, guard)
        })
        .collect()
}

#[test]
fn waiters_and_renewals_follow_a_slot_that_moves() {
    let mut cluster = RedisCluster::start(3);
    let (holder, waiter) = (client(&cluster), client(&cluster));
    let renewing = builder(&cluster)
        .watchdog_timeout(Duration::from_secs(1))
        .build()
        .expect("cluster client");
    let name = cluster.names_on_each_master("moving").swap_remove(0);
    // Same slot as `name` (its hash tag), renewed every third of a second.
    let renewed = format!("{{{name}}}:renewed");
    let slot = cluster.slot_of(&name);
    assert_eq!(cluster.slot_of(&renewed), slot);
    let channel = channel_of(&name);
    assert_eq!(cluster.slot_of(&channel), slot);

    let renewed_guard = renewing.lock(&renewed).lock().expect("renewed lock");
    let guard = holder.lock(&name).lock().expect("holder");
    let lock = waiter.lock(&name);
    let blocked = bounded::spawn("waiter", move || {
        let guard = lock.lock().map_err(|e| e.to_string())?;
        guard.unlock().map_err(|e| e.to_string())
    });
    blocked.assert_running_for(BLOCKED_FOR);
    assert!(
        bounded::wait_until(PROMPTLY, || waiter_subscribers(&cluster, &channel) == 1).is_some(),
        "the waiter does not listen on {channel} on node {}",
        cluster.node_for_key(&name)
    );

    // The old owner drops its sharded subscribers of the slot; the waiter
    // must subscribe again on the new owner. (A classic subscription, on
    // Redis 6.2, does not depend on the slot and stays where it is.)
    cluster.move_slot(slot, 1);
    assert_eq!(cluster.node_for_key(&name), 1);
    assert!(
        bounded::wait_until(PROMPTLY, || waiter_subscribers(&cluster, &channel) == 1).is_some(),
        "the waiter did not subscribe to {channel} again on its new owner"
    );
    // Renewals find the key on its new owner: two timeouts later it lives.
    std::thread::sleep(Duration::from_secs(2));
    assert!(renewed_guard.is_held(), "{renewed} was lost after the move");
    let ttl: i64 = cluster.cmd_for_key(&renewed, &["PTTL", &renewed]);
    assert!(ttl > 0, "{renewed}: PTTL {ttl} on its new owner");

    let released = Instant::now();
    guard.unlock().expect("release after the move");
    blocked
        .join_within(PROMPTLY)
        .unwrap_or_else(|e| panic!("waiter on {name}: {e}"));
    assert!(released.elapsed() < PROMPTLY);
    renewed_guard.unlock().expect("unlock the renewed lock");
    assert!(!exists(&cluster, &name) && !exists(&cluster, &renewed));
}

/// The watchdog timeout of the failover tests: above the time a master
/// killed takes to be replaced (the 5 s node timeout and an election), so
/// that a replicated hold outlives the failover and its loss would be a
/// defect, not an expiry.
const FAILOVER_WATCHDOG: Duration = Duration::from_secs(20);

/// A waiter parked on a lock whose master fails over to its replica (by
/// `failover`, which returns the new master) follows the slot: it listens
/// in the shard that serves it now and is woken promptly by the holder's
/// release, which (like the watchdog's renewals) is sent to the new master;
/// nothing is reported lost.
fn waiter_follows_its_slot_through(
    name: &str,
    failover: impl FnOnce(&mut RedisCluster, usize) -> usize,
) {
    let mut cluster = RedisCluster::start_with_replicas(3);
    let lost = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let holder = {
        let lost = std::sync::Arc::clone(&lost);
        builder(&cluster)
            .watchdog_timeout(FAILOVER_WATCHDOG)
            .on_lock_lost(move |name| lost.lock().unwrap().push(name.to_owned()))
            .build()
            .expect("cluster client")
    };
    let waiter = client(&cluster);
    // Same slot as `name` (its hash tag), held by the watchdog throughout.
    let renewed = format!("{{{name}}}:renewed");
    let channel = channel_of(name);
    let old_master = cluster.node_for_key(name);
    assert_eq!(cluster.node_for_key(&renewed), old_master);

    let renewed_guard = holder.lock(&renewed).lock().expect("renewed lock");
    let guard = holder.lock(name).lock().expect("holder");
    let lock = waiter.lock(name);
    let blocked = bounded::spawn("waiter", move || {
        let guard = lock.lock().map_err(|e| e.report())?;
        guard.unlock().map_err(|e| e.report())
    });
    blocked.assert_parked_for(BLOCKED_FOR);
    assert!(
        bounded::wait_until(PROMPTLY, || waiter_subscribers(&cluster, &channel) == 1).is_some(),
        "the waiter does not listen on {channel} on node {old_master}"
    );
    // Both holds are on the replica before the failover: neither may be
    // lost.
    let acked: i64 = cluster.node(old_master).cmd(&["WAIT", "1", "5000"]);
    assert_eq!(acked, 1, "the replica did not acknowledge the holds");

    let new_master = failover(&mut cluster, old_master);
    assert_eq!(cluster.node_for_key(name), new_master);
    // Still parked, not failed: the lock is the holder's on the new master.
    blocked.assert_parked_for(Duration::from_secs(1));
    // It listens in the shard that serves the slot now: on the promoted
    // replica, or on the old master when that stayed up as its replica and
    // kept the subscription (seen with Redis 7.0): shard messages reach a
    // shard's replicas too, as the prompt wake-up below shows. Classic
    // pub/sub (Redis 6.2) listens once, on any node that is up.
    let numsub = if sharded() { "SHARDNUMSUB" } else { "NUMSUB" };
    let per_node = || -> Vec<i64> {
        (0..cluster.len())
            .map(|i| {
                cluster
                    .node(i)
                    .try_cmd::<(String, i64)>(&["PUBSUB", numsub, &channel])
                    .map_or(0, |reply| reply.1)
            })
            .collect()
    };
    let in_the_shard = |counts: &[i64]| {
        counts.iter().sum::<i64>() == 1
            && (!sharded() || counts[new_master] + counts[old_master] == 1)
    };
    assert!(
        bounded::wait_until(PROMPTLY, || in_the_shard(&per_node())).is_some(),
        "the waiter does not listen on {channel} in the shard of the promoted replica \
         (node {new_master}); subscribers per node: {:?}",
        per_node()
    );
    // The watchdog renews on the new master: the TTL there goes up.
    let pttl = || cluster.cmd_for_key::<i64>(&renewed, &["PTTL", &renewed]);
    let mut last = pttl();
    assert!(last > 0, "{renewed}: PTTL {last} on the new master");
    let went_up = bounded::wait_until(FAILOVER_WATCHDOG, || {
        let now = pttl();
        let up = now > last;
        last = now;
        up
    });
    assert!(
        went_up.is_some(),
        "no renewal of {renewed} on the new master"
    );

    let released = Instant::now();
    guard.unlock().expect("release on the new master");
    blocked
        .join_within(PROMPTLY)
        .unwrap_or_else(|e| panic!("waiter on {name}: {e}"));
    assert!(released.elapsed() < PROMPTLY);
    renewed_guard.unlock().expect("unlock the renewed lock");
    assert!(!exists(&cluster, name) && !exists(&cluster, &renewed));
    assert!(
        lost.lock().unwrap().is_empty(),
        "reported lost: {:?}",
        lost.lock().unwrap()
    );
}

/// A coordinated failover: the old master stays up as a replica and
/// answers MOVED, and drops its sharded subscribers of the slot.
#[test]
fn a_parked_waiter_follows_its_slot_through_a_failover() {
    waiter_follows_its_slot_through("failing-over", RedisCluster::fail_over);
}

/// The master dies: the slot is down until the replica is elected (after
/// the 5 s node timeout), and the waiter's subscription dies with the node.
#[test]
fn a_parked_waiter_follows_its_slot_when_its_master_dies() {
    waiter_follows_its_slot_through("master-dies", RedisCluster::kill_master);
}

/// Both sides make the same choice (docs/wire-format.md): SPUBLISH and
/// SSUBSCRIBE on the slot's owner where every master has sharded pub/sub
/// (Redis 7+, Valkey), PUBLISH and SUBSCRIBE where they have not (Redis
/// 6.2, where Redisson's `AUTO` mode falls back to classic pub/sub too).
#[test]
fn sharded_wake_ups_match_redisson_on_the_wire() {
    let cluster = RedisCluster::start(3);
    let client = client(&cluster);
    let (subscribe, message, publish) = if sharded() {
        ("SSUBSCRIBE", "smessage", "SPUBLISH")
    } else {
        ("SUBSCRIBE", "message", "PUBLISH")
    };
    for name in cluster.names_on_each_master("wire") {
        let channel = channel_of(&name);
        let owner = cluster.owner_of(&name);

        // Our release is announced with SPUBLISH "0" on the slot's owner,
        // where a Redisson waiter listens with SSUBSCRIBE (or with their
        // classic counterparts).
        let mut raw = RawSubscriber::new(owner, subscribe, &channel);
        client
            .lock(&name)
            .lock()
            .expect("lock")
            .unlock()
            .expect("unlock");
        assert_eq!(
            raw.next_message(PROMPTLY),
            Some((message.into(), channel.clone(), "0".into())),
            "release of {name} on its owner node"
        );

        // A Redisson holder's release (DEL, then SPUBLISH "0") wakes our waiter.
        let field = "9f0c2d1e-0000-4000-8000-000000000001:1";
        let _: () = owner.cmd(&["HSET", &name, field, "1"]);
        let _: () = owner.cmd(&["PEXPIRE", &name, "30000"]);
        let lock = client.lock(&name);
        let waiter = bounded::spawn("waiter", move || {
            let guard = lock.lock().map_err(|e| e.to_string())?;
            guard.unlock().map_err(|e| e.to_string())
        });
        waiter.assert_running_for(BLOCKED_FOR);
        assert!(
            bounded::wait_until(PROMPTLY, || waiter_subscribers(&cluster, &channel) >= 2).is_some(),
            "our waiter does not listen on {channel} with {subscribe}"
        );
        let _: () = owner.cmd(&["DEL", &name]);
        let heard: i64 = owner.cmd(&[publish, &channel, "0"]);
        assert!(heard >= 1, "{publish} reached {heard} subscribers");
        waiter
            .join_within(PROMPTLY)
            .unwrap_or_else(|e| panic!("waiter on {name}: {e}"));
    }
}

/// A raw pub/sub connection, as another client (Redisson) would have.
struct RawSubscriber {
    con: redis::Connection,
}

impl RawSubscriber {
    /// Sends `command` (SUBSCRIBE or SSUBSCRIBE) for `channel` to `server`
    /// and waits for the confirmation.
    fn new(server: &RedisServer, command: &str, channel: &str) -> RawSubscriber {
        let mut con = server.connection();
        con.send_packed_command(&redis::cmd(command).arg(channel).get_packed_command())
            .expect("send subscribe");
        con.set_read_timeout(Some(PROMPTLY)).expect("read timeout");
        let confirm: Vec<redis::Value> =
            redis::from_redis_value(con.recv_response().expect("subscribe confirmation"))
                .expect("confirmation is an array");
        let kind: String = redis::from_redis_value_ref(&confirm[0]).expect("confirmation kind");
        assert_eq!(kind, command.to_ascii_lowercase(), "{command} {channel}");
        RawSubscriber { con }
    }

    /// The next message as (kind, channel, payload), or `None` if none
    /// arrives within `limit`.
    fn next_message(&mut self, limit: Duration) -> Option<(String, String, String)> {
        self.con
            .set_read_timeout(Some(limit))
            .expect("read timeout");
        match self.con.recv_response() {
            Ok(value) => {
                let parts: Vec<String> =
                    redis::from_redis_value(value).expect("message is an array of strings");
                match <[String; 3]>::try_from(parts) {
                    Ok([kind, channel, payload]) => Some((kind, channel, payload)),
                    Err(parts) => panic!("unexpected pub/sub message {parts:?}"),
                }
            }
            Err(e) if e.is_timeout() => None,
            Err(e) => panic!("raw subscriber: {e}"),
        }
    }
}
