//! Locks over TLS with an ACL user, on a real `redis-server` that speaks TLS
//! only, with certificates made by `openssl` at test time: locking and
//! wake-ups work for the command and pub/sub connections alike, and a wrong
//! password or an untrusted certificate fails with a clear `Error::Connect`.
#![cfg(feature = "tls")]

mod bounded;
mod support;

use std::time::{Duration, Instant};

use redhold::{Client, Error};
use support::tls::TlsServer;

/// Generous bound for anything that should take milliseconds; far below the
/// 30 s watchdog timeout, so meeting it proves a wake-up, not an expiry.
const PROMPTLY: Duration = Duration::from_secs(5);

const USER: &str = "locker";
const PASSWORD: &str = "s3cret-pw";

fn server_with_user() -> TlsServer {
    let server = TlsServer::start();
    server.add_user(USER, PASSWORD);
    server
}

/// Builds a client for `url` trusting `ca`, bounded in time, and returns
/// the outcome of its first lock call (or of `build` when that fails).
fn first_use(url: String, ca: Vec<u8>) -> redhold::Result<()> {
    bounded::spawn("connect", move || {
        let client = Client::builder()
            .url(url)
            .tls_root_cert(ca)
            .connect_timeout(Duration::from_secs(2))
            .retry_attempts(0)
            .build()?;
        client.lock("probe").try_lock().map(|_| ())
    })
    .join_within(PROMPTLY * 2)
}

#[test]
fn locks_and_wake_ups_work_over_tls_as_an_acl_user() {
    let server = server_with_user();
    let url = server.url_as(USER, PASSWORD);
    let client = |what: &str| {
        Client::builder()
            .url(url.clone())
            .tls_root_cert(server.ca_pem())
            .build()
            .unwrap_or_else(|e| panic!("{what} client over TLS: {e}"))
    };
    let (holder, waiter) = (client("holder"), client("waiter"));

    let guard = holder.lock("tls-lock").lock().expect("lock over TLS");
    assert_eq!(server.cmd(&["EXISTS", "tls-lock"]), "1");
    assert!(
        waiter
            .lock("tls-lock")
            .try_lock()
            .expect("try_lock")
            .is_none(),
        "a second client got a held lock"
    );

    let lock = waiter.lock("tls-lock");
    let blocked = bounded::spawn("waiter", move || {
        let guard = lock.lock().map_err(|e| e.to_string())?;
        guard.unlock().map_err(|e| e.to_string())
    });
    blocked.assert_running_for(Duration::from_millis(300));
    // The waiter listens on a pub/sub connection of its own, as the ACL user.
    let clients = server.cmd(&["CLIENT", "LIST", "TYPE", "pubsub"]);
    assert!(
        clients
            .lines()
            .any(|l| l.contains(&format!("user={USER} "))),
        "no pub/sub connection of user {USER}:\n{clients}"
    );
    let released = Instant::now();
    guard.unlock().expect("release over TLS");
    blocked
        .join_within(PROMPTLY)
        .unwrap_or_else(|e| panic!("waiter: {e}"));
    assert!(released.elapsed() < PROMPTLY);
    assert_eq!(server.cmd(&["EXISTS", "tls-lock"]), "0");

    // Every command connection is the ACL user's too.
    // Left out: the connection that runs CLIENT LIST (`cmd=client|list`
    // from Redis 7.0 on, `cmd=client` on 6.2).
    let clients = server.cmd(&["CLIENT", "LIST", "TYPE", "normal"]);
    let listing = format!("cmd={} ", support::server_version().client_list_cmd());
    let ours: Vec<&str> = clients.lines().filter(|l| !l.contains(&listing)).collect();
    assert!(
        !ours.is_empty() && ours.iter().all(|l| l.contains(&format!("user={USER} "))),
        "connections not of user {USER}:\n{clients}"
    );

    // The other kinds run their scripts over the same connections.
    let _fair = holder.fair_lock("tls-fair").lock().expect("fair lock");
    let _read = holder
        .read_write_lock("tls-rw")
        .read()
        .lock()
        .expect("read lock");
    let fenced = holder
        .fenced_lock("tls-fenced")
        .lock()
        .expect("fenced lock");
    assert!(fenced.token() >= 1);
}

#[test]
fn a_wrong_password_is_a_connect_error_that_hides_it() {
    let server = server_with_user();
    let outcome = first_use(server.url_as(USER, "wrong-pw"), server.ca_pem());
    let error = outcome.expect_err("a wrong password was accepted");
    assert!(
        matches!(error, Error::Connect { .. }),
        "expected Error::Connect, got {error:?}"
    );
    let message = error.to_string();
    assert!(
        message.contains(&format!("127.0.0.1:{}", server.port())),
        "the message does not name the server: {message}"
    );
    assert!(
        !message.contains("wrong-pw"),
        "the message shows the password: {message}"
    );
    assert!(
        !format!("{error:?}").contains("wrong-pw"),
        "Debug shows the password: {error:?}"
    );
    let lower = message.to_lowercase();
    assert!(
        lower.contains("wrongpass") || lower.contains("password") || lower.contains("auth"),
        "the message does not say the credentials were refused: {message}"
    );
}

#[test]
fn an_untrusted_certificate_is_a_connect_error() {
    let server = server_with_user();
    let outcome = first_use(server.url_as(USER, PASSWORD), server.untrusted_ca_pem());
    let error = outcome.expect_err("a server certificate of an untrusted CA was accepted");
    assert!(
        matches!(error, Error::Connect { .. }),
        "expected Error::Connect, got {error:?}"
    );
    let message = error.to_string();
    assert!(
        message.contains(&format!("127.0.0.1:{}", server.port())),
        "the message does not name the server: {message}"
    );
    assert!(
        !message.contains(PASSWORD),
        "the message shows the password: {message}"
    );
    assert!(
        message.to_lowercase().contains("certificate"),
        "the message does not say the certificate was refused: {message}"
    );
}
