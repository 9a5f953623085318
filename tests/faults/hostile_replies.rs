//! A server (or a proxy) that answers one byte at a time, or streams
//! without end on the pub/sub connection: every call still ends within its
//! documented bound, and memory stays bounded (issue 26, defects 2 to 4).

use std::time::{Duration, Instant};

use crate::bounded;
use crate::common::{channel_of, wait_for_subscribers, PROMPTLY};
use crate::fault_proxy::{Action, FaultProxy, Matcher, Rule};
use crate::support::RedisServer;

/// Margin for a noisy machine on top of a documented bound.
const SLACK: Duration = Duration::from_secs(2);

fn command(name: &str) -> Matcher {
    Matcher {
        commands: vec![name.into()],
        ..Matcher::default()
    }
}

/// The acquire's reply, five bytes at 400 ms each: every read comes well
/// within the 1 s response timeout, the whole reply does not.
#[test]
fn a_trickled_acquire_reply_times_out_on_the_whole_reply() {
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.port());
    let response = Duration::from_secs(1);
    let client = redhold::Client::builder()
        .url(proxy.url())
        .response_timeout(response)
        .retry_attempts(0)
        .build()
        .expect("client");
    let lock = client.lock("trickled");
    // Every attempt within the wait limit gets a trickled reply.
    let armed: Vec<_> = (0..20)
        .map(|_| {
            proxy.arming().arm(Rule {
                matcher: Matcher::script("trickled", &[]),
                action: Action::TrickleReply(Duration::from_millis(400)),
            })
        })
        .collect();
    let wait = Duration::from_secs(2);
    let started = Instant::now();
    let outcome = bounded::spawn("try_lock_for", move || {
        lock.try_lock_for(wait)
            .map(|_guard| ())
            .map_err(|e| e.report())
    })
    .join_within(Duration::from_secs(30));
    let took = started.elapsed();
    assert!(
        armed[0].wait_fired(Duration::ZERO),
        "the reply was not trickled"
    );
    let error = outcome.expect_err("a reply trickled past the response timeout was taken");
    assert!(error.contains("response timeout"), "{error}");
    // The last attempt may start just before the wait limit.
    assert!(took < wait + response + SLACK, "took {took:?}");
}

/// The reply to the PING that `build()` sends to check the server, trickled:
/// `build()` fails within its documented bound instead of waiting for the
/// last byte. (The pub/sub handshake's own PING is trickled in
/// `shutdown_is_bounded_while_a_reconnect_is_trickled`.)
#[test]
fn build_returns_within_its_bound_when_the_pubsub_handshake_is_trickled() {
    let server = RedisServer::start_with_args(&["--requirepass", "pw"]);
    let proxy = FaultProxy::start(server.port());
    // With a password, only the pub/sub connection sends PING.
    let _armed = proxy.arming().arm(Rule {
        matcher: command("PING"),
        action: Action::TrickleReply(Duration::from_millis(700)),
    });
    let (connect, response) = (Duration::from_secs(1), Duration::from_secs(1));
    let url = proxy.url().replace("redis://", "redis://:pw@");
    let started = Instant::now();
    let built = bounded::spawn("build", move || {
        redhold::Client::builder()
            .url(url)
            .connect_timeout(connect)
            .response_timeout(response)
            .build()
            .map(|_| ())
            .map_err(|e| e.report())
    })
    .join_within(Duration::from_secs(30));
    let took = started.elapsed();
    let error = built.expect_err("a reply trickled past its timeout was taken");
    assert!(error.contains("in time"), "{error}");
    assert!(took < 2 * connect + response + SLACK, "took {took:?}");
}

/// The pub/sub connection drops and the reconnect's handshake replies are
/// trickled: `shutdown()` still returns within its documented bound.
#[test]
fn shutdown_is_bounded_while_a_reconnect_is_trickled() {
    let server = RedisServer::start_with_args(&["--requirepass", "pw"]);
    let proxy = FaultProxy::start(server.port());
    let (connect, response) = (Duration::from_millis(500), Duration::from_millis(1500));
    let client = redhold::Client::builder()
        .url(proxy.url().replace("redis://", "redis://:pw@"))
        .connect_timeout(connect)
        .response_timeout(response)
        .build()
        .expect("client");
    // A waiter keeps the pub/sub connection in use.
    let holder = server.client();
    let guard = holder.lock("reconnect").lock().expect("holder: lock");
    let lock = client.lock("reconnect");
    let waiter = bounded::spawn("waiter", move || {
        lock.lock().map(|_| ()).map_err(|e| e.report())
    });
    wait_for_subscribers(&server, &channel_of("reconnect"), 1);
    // The reconnect's AUTH and CLIENT SETNAME replies (`+OK\r\n` each):
    // 14 s in all, each byte within the response timeout.
    let armed = proxy.arming().arm(Rule {
        matcher: command("AUTH"),
        action: Action::TrickleReply(Duration::from_millis(1400)),
    });
    let _named = proxy.arming().arm(Rule {
        matcher: command("CLIENT"),
        action: Action::TrickleReply(Duration::from_millis(1400)),
    });
    let _: redis::Value = redis::cmd("CLIENT")
        .arg(&["KILL", "TYPE", "pubsub"])
        .query(&mut server.connection())
        .expect("CLIENT KILL");
    assert!(armed.wait_fired(PROMPTLY), "no reconnect was trickled");
    let started = Instant::now();
    bounded::spawn("shutdown", move || client.shutdown().expect("shutdown"))
        .join_within(Duration::from_secs(60));
    let took = started.elapsed();
    let bound = 2 * (connect + response) + Duration::from_secs(1);
    assert!(took < bound + SLACK, "shutdown took {took:?}");
    assert!(
        waiter.join_within(PROMPTLY).is_err(),
        "the waiter got the lock"
    );
    drop(guard);
}

/// `$1000000000000` then filler at 10 MB/s on the pub/sub connection: the
/// frame is refused on its header, the connection is dropped and made
/// again, and the waiter's wake-up arrives promptly (nothing buffered the
/// filler, nothing lost the subscription).
#[test]
fn a_huge_frame_on_pubsub_drops_the_connection_and_wake_ups_still_arrive() {
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.port());
    let name = "flooded";
    let holder = server.client();
    let guard = holder.lock(name).lock().expect("holder: lock");
    let armed = proxy.arming().arm(Rule {
        matcher: command("SUBSCRIBE"),
        action: Action::FloodAfterReply(b"$1000000000000\r\n"),
    });
    let waiter_client = redhold::Client::builder()
        .url(proxy.url())
        .build()
        .expect("waiter client");
    let lock = waiter_client.lock(name);
    let waiter = bounded::spawn("waiter", move || {
        let guard = lock.lock().expect("waiter: lock");
        let acquired = Instant::now();
        guard.unlock().expect("waiter: unlock");
        acquired
    });
    assert!(armed.wait_fired(PROMPTLY), "the flood did not start");
    // Dropped, made again, subscribed again (the flooded one is gone).
    std::thread::sleep(Duration::from_millis(500));
    wait_for_subscribers(&server, &channel_of(name), 1);
    guard.unlock().expect("holder: unlock");
    let released = Instant::now();
    let waited = waiter.join_within(PROMPTLY).duration_since(released);
    assert!(waited < PROMPTLY, "waited {waited:?} after the release");
}

/// A one-node TLS cluster that clients reach only through a raw proxy (the
/// node announces the proxy's port), whose replies are then trickled, each
/// TLS byte 400 ms after the one before: the acquire fails on the response
/// timeout for the whole reply, as on one server. Before, a `rediss://`
/// cluster node kept the redis crate's connection, whose timeout applies
/// to each read, and the call waited for the last byte (over 10 s).
#[cfg(all(feature = "cluster", feature = "tls"))]
#[test]
fn a_trickled_reply_from_a_tls_cluster_node_times_out_on_the_whole_reply() {
    // The proxy first, so that the node announces the proxy's port from
    // its start: Redis 6.2 does not apply a cluster-announce-port set at
    // run time to the node's own entry, and the client would then reach
    // the node past the proxy.
    let proxy = FaultProxy::start_raw(0);
    let port = proxy.port().to_string();
    let node = crate::support::tls::TlsServer::start_with_args(&[
        "--cluster-enabled",
        "yes",
        // Relative to the server's --dir.
        "--cluster-config-file",
        "nodes.conf",
        "--tls-cluster",
        "yes",
        // With tls-cluster, this is the TLS port (every version since 6.2).
        "--cluster-announce-port",
        &port,
    ]);
    proxy.set_upstream(node.port());
    let slots: Vec<String> = (0..16384).map(|slot| slot.to_string()).collect();
    let mut add_slots = vec!["CLUSTER", "ADDSLOTS"];
    add_slots.extend(slots.iter().map(String::as_str));
    node.cmd(&add_slots);
    let formed = Instant::now();
    while !node.cmd(&["CLUSTER", "INFO"]).contains("cluster_state:ok") {
        assert!(
            formed.elapsed() < PROMPTLY,
            "the one-node cluster did not form"
        );
        std::thread::sleep(Duration::from_millis(20));
    }

    let response = Duration::from_secs(1);
    let client = redhold::Client::builder()
        .cluster([format!("rediss://127.0.0.1:{port}/")])
        .tls_root_cert(node.ca_pem())
        .connect_timeout(response)
        .response_timeout(response)
        .retry_attempts(0)
        .build()
        .unwrap_or_else(|e| panic!("cluster client over TLS: {}", e.report()));
    let guard = client.lock("through-the-proxy").lock().expect("lock");
    guard.unlock().expect("unlock");
    // The node names the proxy as the slots' owner, so the client's
    // connections go through it.
    let slots = node.cmd(&["CLUSTER", "SLOTS"]);
    assert!(
        slots.lines().any(|line| line.trim() == port),
        "CLUSTER SLOTS names the node, not the proxy on {port}: {slots}"
    );

    proxy.trickle_all_replies(Some(Duration::from_millis(400)));
    let lock = client.lock("trickled");
    let started = Instant::now();
    let outcome = bounded::spawn("try_lock", move || {
        lock.try_lock()
            .map(|guard| guard.is_some())
            .map_err(|e| e.report())
    })
    .join_within(Duration::from_secs(60));
    let took = started.elapsed();
    proxy.trickle_all_replies(None);
    let error = outcome.expect_err("a reply trickled past the response timeout was taken");
    assert!(
        error.contains("timeout") || error.contains("timed out"),
        "{error}"
    );
    // The acquire's reply, then the look that settles its unknown outcome.
    assert!(took < 2 * response + SLACK, "took {took:?}: {error}");
}
