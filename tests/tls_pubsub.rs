//! redhold's own pub/sub socket over TLS (the command connections are the
//! redis crate's), on a real TLS-only `redis-server` with certificates made
//! by `openssl` at test time: waiters are woken by releases, through ticks
//! and keep-alive PINGs and after the server kills the connection, and an
//! untrusted server certificate fails the client's build clearly.
#![cfg(feature = "tls")]

mod bounded;
mod support;

use std::io;
use std::net::{Shutdown, TcpListener, TcpStream};
use std::thread;
use std::time::{Duration, Instant};

use redhold::{Client, Error};
use support::tls::TlsServer;

/// Bound for what should take milliseconds; far below the 30 s watchdog
/// timeout, so meeting it proves a pub/sub wake-up, not a lease expiry.
const PROMPTLY: Duration = Duration::from_secs(5);

/// Silence after which the subscriber PINGs (`PING_AFTER` in the
/// subscriber), plus room for the PONG.
const PING_SILENCE: Duration = Duration::from_millis(7500);

/// A client of `server` over TLS, trusting the server's CA.
fn client(server: &TlsServer) -> Client {
    Client::builder()
        .url(server.server.url())
        .tls_root_cert(server.ca_pem())
        .connect_timeout(Duration::from_secs(2))
        .build()
        .unwrap_or_else(|e| panic!("client over TLS: {e}"))
}

/// The pub/sub channel of the lock `name` (wire format).
fn channel_of(name: &str) -> String {
    format!("redisson_lock__channel:{{{name}}}")
}

/// How many connections subscribe `channel`.
fn subscribers(server: &TlsServer, channel: &str) -> i64 {
    let reply = server.cmd(&["PUBSUB", "NUMSUB", channel]);
    reply
        .lines()
        .nth(1)
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("unexpected PUBSUB NUMSUB reply {reply:?}"))
}

/// Polls `check` every 20 ms until it holds.
///
/// # Panics
///
/// If it does not hold within [`PROMPTLY`].
#[track_caller]
fn wait_until(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + PROMPTLY;
    while !check() {
        assert!(Instant::now() < deadline, "{what}: not within {PROMPTLY:?}");
        thread::sleep(Duration::from_millis(20));
    }
}

/// The lines of `CLIENT LIST TYPE pubsub`: one per pub/sub connection.
fn pubsub_clients(server: &TlsServer) -> Vec<String> {
    let list = server.cmd(&["CLIENT", "LIST", "TYPE", "pubsub"]);
    list.lines().map(str::to_owned).collect()
}

/// The `id=` of a `CLIENT LIST` line.
fn id_of(line: &str) -> String {
    line.split(' ')
        .find_map(|kv| kv.strip_prefix("id="))
        .unwrap_or_else(|| panic!("no id in {line:?}"))
        .to_owned()
}

/// A thread of `waiter` blocked on the lock `name`; it returns when it got
/// the lock (after unlocking it again), with the time it got it.
fn wait_for(waiter: &Client, name: &str) -> bounded::Bounded<Instant> {
    let lock = waiter.lock(name);
    bounded::spawn(name, move || {
        let guard = lock.lock().expect("waiter: lock");
        let acquired = Instant::now();
        guard.unlock().expect("waiter: unlock");
        acquired
    })
}

#[test]
fn waiters_are_woken_by_releases_over_tls() {
    let server = TlsServer::start();
    let (holder, waiter) = (client(&server), client(&server));
    let first = holder.lock("tls-pubsub-1").lock().expect("holder: lock 1");
    let second = holder.lock("tls-pubsub-2").lock().expect("holder: lock 2");

    let woken_first = wait_for(&waiter, "tls-pubsub-1");
    wait_until("first subscription", || {
        subscribers(&server, &channel_of("tls-pubsub-1")) == 1
    });
    // The subscriber thread now sits in a blocking read of the TLS socket;
    // the second waiter's SUBSCRIBE must go out beside it, not after it.
    woken_first.assert_running_for(Duration::from_millis(200));
    let woken_second = wait_for(&waiter, "tls-pubsub-2");
    wait_until("second subscription", || {
        subscribers(&server, &channel_of("tls-pubsub-2")) == 1
    });
    assert_eq!(
        pubsub_clients(&server).len(),
        1,
        "both channels belong on the waiter's one pub/sub connection"
    );

    for (guard, woken) in [(second, woken_second), (first, woken_first)] {
        guard.unlock().expect("holder: unlock");
        let released = Instant::now();
        let waited = woken.join_within(PROMPTLY).duration_since(released);
        assert!(waited < PROMPTLY, "woken {waited:?} after the release");
    }
}

#[test]
fn a_waiter_is_woken_after_its_tls_pubsub_connection_is_killed() {
    let server = TlsServer::start();
    let (holder, waiter) = (client(&server), client(&server));
    let name = "tls-pubsub-killed";
    let guard = holder.lock(name).lock().expect("holder: lock");
    let woken = wait_for(&waiter, name);
    wait_until("subscription", || {
        subscribers(&server, &channel_of(name)) == 1
    });
    let killed = pubsub_clients(&server);
    assert_eq!(killed.len(), 1, "{killed:?}");

    assert_eq!(server.cmd(&["CLIENT", "KILL", "TYPE", "pubsub"]), "1");
    // A new TLS connection, with the channel subscribed on it again.
    wait_until("resubscription on a new connection", || {
        let now = pubsub_clients(&server);
        now.len() == 1
            && id_of(&now[0]) != id_of(&killed[0])
            && subscribers(&server, &channel_of(name)) == 1
    });
    woken.assert_running_for(Duration::from_millis(100));

    guard.unlock().expect("holder: unlock");
    let released = Instant::now();
    let waited = woken.join_within(PROMPTLY).duration_since(released);
    assert!(waited < PROMPTLY, "woken {waited:?} after the release");
}

/// With nothing on the wire, the subscriber's reads time out every tick
/// and after some seconds it PINGs: over TLS neither may pass for a broken
/// connection, which would show as a new connection id.
#[test]
fn an_idle_tls_pubsub_connection_survives_ticks_and_pings() {
    let server = TlsServer::start();
    let (holder, waiter) = (client(&server), client(&server));
    let name = "tls-pubsub-idle";
    let guard = holder.lock(name).lock().expect("holder: lock");
    let woken = wait_for(&waiter, name);
    wait_until("subscription", || {
        subscribers(&server, &channel_of(name)) == 1
    });
    let before = pubsub_clients(&server);
    assert_eq!(before.len(), 1, "{before:?}");

    woken.assert_running_for(PING_SILENCE);
    let after = pubsub_clients(&server);
    assert_eq!(after.len(), 1, "{after:?}");
    assert_eq!(
        id_of(&after[0]),
        id_of(&before[0]),
        "the pub/sub connection was replaced while idle"
    );
    assert!(
        after[0].contains("cmd=ping"),
        "the subscriber did not PING through the silence: {}",
        after[0]
    );

    guard.unlock().expect("holder: unlock");
    let released = Instant::now();
    let waited = woken.join_within(PROMPTLY).duration_since(released);
    assert!(waited < PROMPTLY, "woken {waited:?} after the release");
}

#[test]
fn an_untrusted_server_certificate_fails_the_build() {
    let server = TlsServer::start();
    let error = Client::builder()
        .url(server.server.url())
        .tls_root_cert(server.untrusted_ca_pem())
        .connect_timeout(Duration::from_secs(2))
        .retry_attempts(0)
        .build()
        .expect_err("a server certificate of an untrusted CA was accepted");
    assert!(
        matches!(error, Error::Connect { .. }),
        "expected Error::Connect, got {error:?}"
    );
    assert!(
        error.to_string().to_lowercase().contains("certificate"),
        "the message does not say the certificate was refused: {error}"
    );
}

/// The command connection is opened first and reaches a trusted server;
/// the pub/sub connection, opened next, reaches one whose CA the client
/// does not trust. So this failure is the pub/sub handshake's alone.
#[test]
fn an_untrusted_certificate_on_the_pubsub_connection_fails_the_build() {
    let trusted = TlsServer::start();
    let untrusted = TlsServer::start();
    let port = split_proxy(trusted.port(), untrusted.port());
    let error = Client::builder()
        .url(format!("rediss://127.0.0.1:{port}/"))
        .tls_root_cert(trusted.ca_pem())
        .connect_timeout(Duration::from_secs(2))
        .retry_attempts(0)
        .build()
        .expect_err("the pub/sub connection accepted an untrusted certificate");
    assert!(
        matches!(error, Error::Connect { .. }),
        "expected Error::Connect, got {error:?}"
    );
    // The handshake's own words are the cause (`source()`), the advice is
    // the error's: a reader of the whole chain gets both.
    let advice = error.to_string();
    assert!(advice.contains("tls_root_cert"), "no advice in: {advice}");
    let message = error.report();
    for part in ["TLS handshake", "certificate", "tls_root_cert"] {
        assert!(message.contains(part), "no {part:?} in: {message}");
    }
}

/// A TCP forwarder on a fresh port: its first connection goes to port
/// `first`, every later one to port `rest`. Its threads are left behind
/// when the test ends.
fn split_proxy(first: u16, rest: u16) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind the proxy");
    let port = listener.local_addr().expect("proxy address").port();
    thread::spawn(move || {
        for (n, client) in listener.incoming().enumerate() {
            let target = if n == 0 { first } else { rest };
            if let (Ok(client), Ok(server)) = (client, TcpStream::connect(("127.0.0.1", target))) {
                pipe(&client, &server);
                pipe(&server, &client);
            }
        }
    });
    port
}

/// Copies everything from `from` to `to` on a thread, then closes `to` for
/// writing.
fn pipe(from: &TcpStream, to: &TcpStream) {
    let (Ok(mut from), Ok(mut to)) = (from.try_clone(), to.try_clone()) else {
        return;
    };
    thread::spawn(move || {
        let _ = io::copy(&mut from, &mut to);
        let _ = to.shutdown(Shutdown::Write);
    });
}
