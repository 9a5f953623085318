//! `redhold --cluster` on a real 3-master Redis Cluster: `list` scans every
//! master, `show` counts the listeners of a sharded channel, and
//! `force-unlock` wakes a waiter parked on its slot's owner.

mod binary;
#[path = "../../tests/bounded/mod.rs"]
mod bounded;
#[path = "../../tests/support/mod.rs"]
mod support;

use std::collections::BTreeSet;
use std::time::Duration;

use binary::redhold;
use bounded::wait_until;
use support::cluster::RedisCluster;

/// The holders' lease: a waiter that gets in before it ran out was woken.
const LEASE: Duration = Duration::from_secs(60);
/// Generous bound for anything that should take milliseconds.
const PROMPTLY: Duration = Duration::from_secs(10);

fn client(cluster: &RedisCluster) -> redhold::Client {
    redhold::Client::builder()
        .cluster(cluster.urls())
        .connect_timeout(Duration::from_secs(2))
        .build()
        .expect("a cluster client")
}

#[test]
fn locks_on_every_master_are_listed_shown_and_force_unlocked() {
    let cluster = RedisCluster::start(3);
    let holder = client(&cluster);
    let names = cluster.names_on_each_master("lock");
    let guards: Vec<_> = names
        .iter()
        .map(|name| holder.lock(name.as_str()).lock_with_lease(LEASE).unwrap())
        .collect();
    let _read = holder.read_write_lock("{rw}:config").read().lock().unwrap();

    // One seed is enough, as a URL or as host:port.
    let seed = cluster.urls()[0].clone();
    let bare = format!("127.0.0.1:{}", cluster.node(1).port());
    for node in [&seed, &bare] {
        let listed = redhold(&["--cluster", node, "list", "--json"])
            .expect_code(0)
            .json();
        let found: BTreeSet<String> = listed
            .as_array()
            .expect("one array")
            .iter()
            .map(|l| l["name"].as_str().unwrap().to_owned())
            .collect();
        let mut expected: BTreeSet<String> = names.iter().cloned().collect();
        expected.insert("{rw}:config".to_owned());
        assert_eq!(found, expected);
    }

    // A waiter of another client, listening on the sharded channel of the
    // lock's slot (on Redis 6.2, without sharded pub/sub: on the classic
    // channel, on one node, which `show` counts by asking every node).
    let name = names[1].clone();
    let other = client(&cluster);
    let waiter_name = name.clone();
    let waiter = bounded::spawn("waiter", move || {
        other.lock(waiter_name.as_str()).lock().map(drop)
    });
    let channel = format!("redisson_lock__channel:{{{name}}}");
    let listening = wait_until(PROMPTLY, || {
        if support::server_version().has_sharded_pubsub() {
            let reply: (String, i64) =
                cluster.cmd_for_key(&name, &["PUBSUB", "SHARDNUMSUB", &channel]);
            reply.1 == 1
        } else {
            let per_node = (0..cluster.len()).map(|i| {
                let reply: (String, i64) = cluster.node(i).cmd(&["PUBSUB", "NUMSUB", &channel]);
                reply.1
            });
            per_node.sum::<i64>() == 1
        }
    });
    assert!(listening.is_some(), "the waiter did not subscribe");
    std::thread::sleep(Duration::from_millis(200));

    let info = redhold(&["--cluster", &seed, "show", &name, "--json"])
        .expect_code(0)
        .json();
    assert_eq!(info["kind"], "lock");
    assert_eq!(info["locked"], true);
    assert_eq!(info["subscribers"], 1, "{info}");
    assert_eq!(
        info["holders"][0]["client"],
        holder.id().hyphenated().to_string()
    );

    let run = redhold(&["--cluster", &seed, "force-unlock", &name, "--yes"]);
    run.expect_code(0);
    assert!(run.stdout.contains("removed plain lock"), "{}", run.stdout);
    waiter.join_within(PROMPTLY).unwrap();
    drop(guards);
}
