//! Pub/sub edge cases on real `redis-server` processes: settings that mean
//! "no limit", a client dropped or shut down while its pub/sub connection
//! is stuck, and (on a cluster) a sharded subscription that cannot be sent
//! at first. Every wait is bounded, so a broken promise fails the test
//! instead of hanging it.

mod bounded;
mod support;

use std::time::{Duration, Instant};

use support::RedisServer;

/// Generous bound for anything that should take milliseconds; far below the
/// 30 s watchdog timeout and the long response timeouts set below, so
/// meeting it proves a wake-up, not a timeout.
const PROMPTLY: Duration = Duration::from_secs(5);

/// How long a waiter is checked to stay blocked before the test goes on.
const BLOCKED_FOR: Duration = Duration::from_millis(300);

/// A response timeout far longer than [`PROMPTLY`]: a call that returns
/// promptly did not wait for it.
const LONG_RESPONSE_TIMEOUT: Duration = Duration::from_secs(20);

/// A numeric field of an INFO reply.
fn info_field(info: &str, field: &str) -> i64 {
    info.lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {field} in INFO: {info}"))
}

/// A numeric field of `INFO <section>`, over `admin`.
fn info(admin: &mut redis::Connection, section: &str, field: &str) -> i64 {
    let text: String = redis::cmd("INFO")
        .arg(section)
        .query(admin)
        .unwrap_or_else(|e| panic!("INFO {section}: {e}"));
    info_field(&text, field)
}

/// Makes the server refuse new connections once it has `clients` client
/// connections (`maxclients`; those it has are kept, `admin` among them).
/// Returns its count of refused connections so far.
fn refuse_connections_beyond(admin: &mut redis::Connection, clients: i64) -> i64 {
    // A cluster node counts its bus links against the limit too.
    let text: String = redis::cmd("INFO").arg("clients").query(admin).unwrap();
    let bus = text
        .lines()
        .find_map(|line| line.strip_prefix("cluster_connections:"))
        .and_then(|v| v.trim().parse::<i64>().ok())
        .unwrap_or(0);
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxclients")
        .arg(clients + bus)
        .query(admin)
        .expect("CONFIG SET maxclients");
    info(admin, "stats", "rejected_connections")
}

/// Resumes a frozen server when dropped, so that a failed assertion does not
/// leave it stopped for the rest of the test.
struct Thaw<'a>(&'a RedisServer);

impl Drop for Thaw<'_> {
    fn drop(&mut self) {
        self.0.thaw();
    }
}

/// Issue 10: a response timeout of `Duration::MAX` ("no limit") used to
/// overflow an `Instant` in the waiter's wait for its subscription.
#[test]
fn a_waiter_with_an_endless_response_timeout_is_woken() {
    let server = RedisServer::start();
    let holder = server.client();
    let waiter = server
        .builder()
        .response_timeout(Duration::MAX)
        .build()
        .expect("a client whose response timeout is Duration::MAX");
    let name = "endless-response-timeout";
    let guard = holder.lock(name).lock().expect("holder: lock");
    let lock = waiter.lock(name);
    let blocked = bounded::spawn("waiter", move || {
        let guard = lock.lock().map_err(|e| e.to_string())?;
        guard.unlock().map_err(|e| e.to_string())
    });
    blocked.assert_running_for(BLOCKED_FOR);
    let released = Instant::now();
    guard.unlock().expect("holder: unlock");
    blocked
        .join_within(PROMPTLY)
        .unwrap_or_else(|e| panic!("waiter: {e}"));
    assert!(released.elapsed() < PROMPTLY);
}

/// Dropping the last clone of a client must not wait for its subscriber
/// thread, even when that thread is stuck in a connection attempt to a
/// server that does not answer (the attempt ends with the response timeout).
#[test]
fn dropping_a_client_does_not_wait_for_a_stuck_subscriber() {
    let server = RedisServer::start();
    let client = server
        .builder()
        .response_timeout(LONG_RESPONSE_TIMEOUT)
        .build()
        .expect("client");
    let mut admin = server.connection();
    // The subscriber's reconnect attempts are refused, quickly, until the
    // server is frozen; from then on an attempt hangs in its handshake.
    // Only `admin` stays: the client's connections are killed next.
    let refused_before = refuse_connections_beyond(&mut admin, 1);
    let killed: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("normal")
        .arg("SKIPME")
        .arg("yes")
        .query(&mut admin)
        .expect("CLIENT KILL");
    assert!(
        killed >= 1,
        "the client's pub/sub connection was not killed"
    );
    let refused = bounded::wait_until(PROMPTLY, || {
        info(&mut admin, "stats", "rejected_connections") > refused_before
    });
    assert!(refused.is_some(), "the subscriber did not try to reconnect");
    server.freeze();
    let _thaw = Thaw(&server);
    // The backoff between attempts is at most 2 s: the next one hangs.
    std::thread::sleep(Duration::from_millis(2500));

    let dropped = bounded::spawn("drop", move || drop(client));
    dropped.join_within(PROMPTLY);
}

#[cfg(feature = "cluster")]
mod cluster {
    //! The same on a three-master cluster, where a node can be stalled while
    //! the slot owner of a lock still answers.

    use std::time::{Duration, Instant};

    use redhold::{Client, ClientBuilder, Error};

    use super::{
        info, refuse_connections_beyond, Thaw, BLOCKED_FOR, LONG_RESPONSE_TIMEOUT, PROMPTLY,
    };
    use crate::bounded;
    use crate::support::cluster::RedisCluster;
    use crate::support::server_version;

    /// Lets the server accept connections again.
    fn accept_connections(admin: &mut redis::Connection) {
        let _: () = redis::cmd("CONFIG")
            .arg("SET")
            .arg("maxclients")
            .arg(10_000)
            .query(admin)
            .expect("CONFIG SET maxclients");
    }

    fn builder(cluster: &RedisCluster) -> ClientBuilder {
        Client::builder()
            .cluster(cluster.urls())
            .connect_timeout(Duration::from_secs(2))
    }

    /// The pub/sub channel on which releases of lock `name` are announced.
    fn channel_of(name: &str) -> String {
        format!("redisson_lock__channel:{{{name}}}")
    }

    /// How many connections listen on `channel` with SSUBSCRIBE, per its owner.
    fn shard_subscribers(cluster: &RedisCluster, channel: &str) -> i64 {
        let reply: (String, i64) =
            cluster.cmd_for_key(channel, &["PUBSUB", "SHARDNUMSUB", channel]);
        reply.1
    }

    /// How many connections listen on `channel` with SUBSCRIBE, on all
    /// nodes; `owner` is asked over `admin`, a connection it already has
    /// (it may refuse new ones).
    fn classic_subscribers(
        cluster: &RedisCluster,
        channel: &str,
        owner: usize,
        admin: &mut redis::Connection,
    ) -> i64 {
        let mut count = |i: usize| -> i64 {
            let mut numsub = redis::cmd("PUBSUB");
            numsub.arg("NUMSUB").arg(channel);
            let reply: (String, i64) = if i == owner {
                numsub.query(admin).expect("PUBSUB NUMSUB on the owner")
            } else {
                cluster.node(i).cmd(&["PUBSUB", "NUMSUB", channel])
            };
            reply.1
        };
        (0..cluster.len()).map(&mut count).sum()
    }

    /// Issue 10: a waiter waiting for the confirmation of its SUBSCRIBE,
    /// which the stalled server does not send, wakes up with `Shutdown` as
    /// soon as the client shuts down, not after the response timeout.
    ///
    /// With classic pub/sub on a cluster the subscription lives on the first
    /// seed (node 0), while the lock lives on another master: node 0 can be
    /// frozen while the waiter's acquire attempts still get answers.
    #[test]
    fn shutdown_ends_a_wait_for_an_unanswered_subscribe() {
        let cluster = RedisCluster::start(3);
        let classic = |c: &RedisCluster| builder(c).sharded_pubsub(false);
        let holder = classic(&cluster).build().expect("holder client");
        let waiter = classic(&cluster)
            .response_timeout(LONG_RESPONSE_TIMEOUT)
            .build()
            .expect("waiter client");
        let name = cluster
            .names_on_each_master("stalled-pubsub")
            .swap_remove(1);
        assert_eq!(cluster.node_for_key(&name), 1);
        let guard = holder.lock(&name).lock().expect("holder: lock");
        let lock = waiter.lock(&name);
        assert!(lock.is_locked().expect("is_locked"), "warm-up");

        // Nothing node 0 is sent is answered from here; the cluster marks
        // it failed only after the 5 s node timeout.
        cluster.node(0).freeze();
        let thaw = Thaw(cluster.node(0));
        let blocked = bounded::spawn("waiter", move || lock.lock().map(drop));
        blocked.assert_running_for(BLOCKED_FOR);

        let started = Instant::now();
        let closer = bounded::spawn("shutdown", move || waiter.shutdown());
        closer.join_within(PROMPTLY).expect("shutdown");
        let outcome = blocked.join_within(PROMPTLY);
        assert!(
            matches!(outcome, Err(Error::Shutdown)),
            "waiter after shutdown: {outcome:?}"
        );
        assert!(started.elapsed() < PROMPTLY);
        drop(thaw);
        guard.unlock().expect("holder: unlock");
    }

    /// Issue 5: an SSUBSCRIBE that cannot be sent (the slot owner refuses
    /// the new pub/sub connection) is retried with backoff until it works,
    /// so the waiter is woken by the release instead of sleeping out the
    /// lock's 30 s TTL.
    ///
    /// On Redis 6.2 (no sharded pub/sub) the client falls back to classic
    /// pub/sub on a connection to any node: the waiter listens while the
    /// owner still refuses new connections, and is woken by the release.
    #[test]
    fn a_failed_ssubscribe_is_retried_until_it_works() {
        let cluster = RedisCluster::start(3);
        let holder = builder(&cluster).build().expect("holder client");
        let waiter = builder(&cluster).build().expect("waiter client");
        assert_eq!(waiter.watchdog_timeout(), Duration::from_secs(30));
        let name = cluster.names_on_each_master("unsent").swap_remove(1);
        let channel = channel_of(&name);
        let guard = holder.lock(&name).lock().expect("holder: lock");
        let lock = waiter.lock(&name);
        // The waiter's command connection to the owner exists from here on.
        assert!(lock.is_locked().expect("is_locked"), "warm-up");

        let mut admin = cluster.owner_of(&name).connection();
        let open = info(&mut admin, "clients", "connected_clients");
        let refused_before = refuse_connections_beyond(&mut admin, open);
        let blocked = bounded::spawn("waiter", move || {
            let guard = lock.lock().map_err(|e| e.to_string())?;
            let got_it = Instant::now();
            guard.unlock().map_err(|e| e.to_string())?;
            Ok::<_, String>(got_it)
        });
        // (With the waiter's result in the message if it gave up.)
        blocked.assert_parked_for(BLOCKED_FOR);
        if server_version().has_sharded_pubsub() {
            let refused = info(&mut admin, "stats", "rejected_connections") - refused_before;
            assert!(
                refused >= 1,
                "the owner refused no connection: the test did not make SSUBSCRIBE fail"
            );
            accept_connections(&mut admin);
            assert!(
                bounded::wait_until(PROMPTLY, || shard_subscribers(&cluster, &channel) == 1)
                    .is_some(),
                "the waiter never subscribed to {channel} once its owner accepted connections"
            );
        } else {
            let owner = cluster.node_for_key(&name);
            assert!(
                bounded::wait_until(PROMPTLY, || {
                    classic_subscribers(&cluster, &channel, owner, &mut admin) == 1
                })
                .is_some(),
                "the waiter does not listen on {channel} with SUBSCRIBE"
            );
            accept_connections(&mut admin);
        }
        let released = Instant::now();
        guard.unlock().expect("holder: unlock");
        let got_it = blocked
            .join_within(PROMPTLY)
            .unwrap_or_else(|e| panic!("waiter: {e}"));
        let took = got_it.saturating_duration_since(released);
        assert!(took < PROMPTLY, "woken {took:?} after the release");
    }
}
