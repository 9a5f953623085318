//! No password is printed, whatever the deployment and whatever form the
//! URL takes: `Debug` of the builder and of a built client, and every
//! error's `Display`, `Debug` and `report()`. Durations too long for Redis
//! are refused rather than wrapped, and a `Lock`'s `Debug` stays short.

mod bounded;
mod support;

use std::time::Duration;

use redhold::{Client, Error};
#[cfg(feature = "cluster")]
use support::cluster::RedisCluster;
#[cfg(feature = "sentinel")]
use support::sentinel::{SentinelSetup, MASTER_NAME};
use support::RedisServer;

const SECRET: &str = "s3cretPW";

/// Fails the test if `text` shows any part of the password.
#[track_caller]
fn assert_hidden(text: &str) {
    assert!(
        !text.contains("s3cret") && !text.contains("PW@"),
        "the password shows: {text}"
    );
}

/// Every way an error is printed.
#[track_caller]
fn assert_error_hides(error: &Error) {
    assert_hidden(&error.to_string());
    assert_hidden(&format!("{error:?}"));
    assert_hidden(&error.report());
}

#[cfg(feature = "cluster")]
#[test]
fn debug_of_a_cluster_builder_hides_passwords() {
    let cluster = Client::builder().cluster([
        format!("redis://user:{SECRET}@h:7000"),
        format!("redis://:{SECRET}@h:7001"),
    ]);
    let shown = format!("{cluster:?}");
    assert_hidden(&shown);
    assert!(shown.contains("h:7001"), "{shown}");
}

#[cfg(feature = "sentinel")]
#[test]
fn debug_of_a_sentinel_builder_hides_passwords() {
    let sentinel =
        Client::builder().sentinel([format!("redis://user:{SECRET}@h:26379")], "mymaster");
    let shown = format!("{sentinel:?}");
    assert_hidden(&shown);
    assert!(shown.contains("mymaster"), "{shown}");
}

#[cfg(feature = "cluster")]
#[test]
fn debug_of_a_built_cluster_client_hides_passwords() {
    let cluster = RedisCluster::start(3);
    for i in 0..cluster.len() {
        cluster
            .node(i)
            .cmd::<()>(&["CONFIG", "SET", "requirepass", SECRET]);
    }
    let urls: Vec<String> = (0..cluster.len())
        .map(|i| format!("redis://:{SECRET}@127.0.0.1:{}/", cluster.node(i).port()))
        .collect();
    let client = Client::builder()
        .cluster(urls)
        .build()
        .expect("cluster client");
    assert_hidden(&format!("{client:?}"));
    assert_hidden(&format!("{:?}", client.lock("x")));
}

#[cfg(feature = "sentinel")]
#[test]
fn debug_of_a_built_sentinel_client_hides_passwords() {
    let setup = SentinelSetup::start();
    setup.require_password(SECRET);
    let urls: Vec<String> = setup
        .sentinel_urls()
        .iter()
        .map(|u| u.replace("redis://", &format!("redis://:{SECRET}@")))
        .collect();
    let client = Client::builder()
        .sentinel(urls, MASTER_NAME)
        .build()
        .expect("sentinel client");
    drop(client.lock("x").try_lock().unwrap());
    assert_hidden(&format!("{client:?}"));
}

#[test]
fn a_socket_url_with_a_password_in_its_query_is_never_printed() {
    let url = format!("redis+unix:///nonexistent/redhold.sock?pass={SECRET}");
    let builder = Client::builder()
        .url(&url)
        .connect_timeout(Duration::from_millis(500))
        .retry_attempts(0);
    assert_hidden(&format!("{builder:?}"));
    let error = builder.build().expect_err("no server at that socket");
    assert_error_hides(&error);
    assert!(
        error
            .to_string()
            .contains("redis+unix:///nonexistent/redhold.sock"),
        "the socket is not named: {error}"
    );
}

#[test]
fn an_unparseable_url_shows_nothing_past_its_scheme() {
    // A `/` in the password, not percent-encoded: the URL does not parse.
    for url in [
        "redis://:s3cret/PW@127.0.0.1:1/".to_owned(),
        "redis://us/er:s3cretPW@127.0.0.1:1/".to_owned(),
    ] {
        let error = Client::open(&url).expect_err("a malformed URL");
        assert!(matches!(error, Error::InvalidUrl { .. }), "{error:?}");
        assert_error_hides(&error);
        #[cfg(feature = "cluster")]
        {
            let error = Client::builder()
                .cluster([url.clone()])
                .build()
                .expect_err("a malformed URL");
            assert_error_hides(&error);
        }
        #[cfg(feature = "sentinel")]
        {
            let error = Client::builder()
                .sentinel([url.clone()], "m")
                .build()
                .expect_err("a malformed URL");
            assert_error_hides(&error);
        }
    }
}

#[test]
fn durations_too_long_for_redis_are_refused_not_wrapped() {
    let server = RedisServer::start();
    let huge = Duration::from_secs(1 << 62);
    let error = server
        .builder()
        .fair_wait_timeout(huge)
        .build()
        .expect_err("a fair wait timeout of 146 billion years");
    assert!(
        matches!(
            error,
            Error::InvalidArgument {
                what: "fair wait timeout",
                ..
            }
        ),
        "{error:?}"
    );
    assert!(
        error.to_string().contains("century"),
        "no limit given: {error}"
    );

    let error = server
        .builder()
        .response_timeout(Duration::MAX)
        .sync_replicas(1, huge)
        .build()
        .expect_err("a WAIT timeout of 146 billion years");
    assert!(
        matches!(
            error,
            Error::InvalidArgument {
                what: "sync_replicas timeout",
                ..
            }
        ),
        "{error:?}"
    );

    // The longest accepted value still works.
    let century = Duration::from_secs(100 * 365 * 24 * 3600);
    let client = server.builder().fair_wait_timeout(century).build().unwrap();
    let lock = client.fair_lock("fair");
    let guard = lock.try_lock().unwrap().expect("free");
    drop(guard);
}

#[test]
fn debug_of_a_lock_with_a_huge_name_stays_short() {
    let server = RedisServer::start();
    let client = server.client();
    let name = "n".repeat(1 << 20);
    for shown in [
        format!("{:?}", client.lock(&name)),
        format!("{:?}", client.fair_lock(&name)),
        format!("{:?}", client.read_write_lock(&name).write()),
    ] {
        assert!(shown.len() < 1000, "Debug printed {} bytes", shown.len());
    }
}

/// The TLS test: a certificate for another host name.
#[cfg(feature = "tls")]
mod tls {
    use std::io;
    use std::net::{TcpListener, TcpStream};
    use std::thread;
    use std::time::Duration;

    use redhold::{Client, Error};

    use crate::support::tls::TlsServer;

    /// Forwards every connection to 127.0.0.2:<port> to `to`, so that a
    /// server whose certificate names 127.0.0.1 and localhost is reached
    /// under another address.
    fn forward_from_another_address(to: u16) -> u16 {
        let listener = TcpListener::bind("127.0.0.2:0").expect("127.0.0.2 is a loopback address");
        let port = listener.local_addr().unwrap().port();
        thread::spawn(move || {
            for inbound in listener.incoming().flatten() {
                let Ok(outbound) = TcpStream::connect(("127.0.0.1", to)) else {
                    continue;
                };
                let mut a = inbound.try_clone().unwrap();
                let mut b = outbound.try_clone().unwrap();
                thread::spawn(move || io::copy(&mut a, &mut b));
                let (mut c, mut d) = (outbound, inbound);
                thread::spawn(move || io::copy(&mut c, &mut d));
            }
        });
        port
    }

    #[test]
    fn a_certificate_for_another_host_is_not_blamed_on_the_ca() {
        let server = TlsServer::start();
        let port = forward_from_another_address(server.port());
        let error = Client::builder()
            .url(format!("rediss://127.0.0.2:{port}/"))
            .tls_root_cert(server.ca_pem())
            .connect_timeout(Duration::from_secs(2))
            .retry_attempts(0)
            .build()
            .expect_err("the certificate does not name 127.0.0.2");
        let message = error.to_string();
        assert!(matches!(error, Error::Connect { .. }), "{error:?}");
        assert!(
            message.contains("not valid for the host name") && !message.contains("tls_root_cert"),
            "the hint does not fit a wrong host name: {message}"
        );
    }
}
