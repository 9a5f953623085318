//! Every kind of bad input is refused with its own error, quickly, before
//! anything is written to Redis: empty lock names, zero leases, zero
//! timeouts, malformed URLs, unreachable servers, wrong and missing
//! passwords. `Debug` of an error says what `Display` says.

mod bounded;
mod support;

use std::net::{Ipv4Addr, TcpListener};
use std::time::{Duration, Instant};

use redhold::{Client, Error, Interrupt};
use support::RedisServer;

/// A port on which nothing listens (it was free a moment ago).
fn dead_port() -> u16 {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("bind 127.0.0.1:0")
}

fn keys(server: &RedisServer) -> Vec<String> {
    server.cmd(&["KEYS", "*"])
}

#[track_caller]
fn assert_invalid_name<T: std::fmt::Debug>(result: redhold::Result<T>) {
    match result {
        Err(Error::InvalidName { name, reason }) => {
            assert_eq!(name, "");
            assert!(!reason.is_empty());
        }
        other => panic!("expected InvalidName, got {other:?}"),
    }
}

#[track_caller]
fn assert_invalid_lease<T: std::fmt::Debug>(result: redhold::Result<T>) {
    match result {
        Err(Error::InvalidArgument { what, .. }) => assert_eq!(what, "lease"),
        other => panic!("expected InvalidArgument for the lease, got {other:?}"),
    }
}

#[test]
fn empty_lock_name_is_refused_by_every_call() {
    let server = RedisServer::start();
    let client = server.client();
    let lock = client.lock("");
    let wait = Duration::from_millis(100);
    let lease = Duration::from_secs(1);

    assert_invalid_name(lock.lock());
    assert_invalid_name(lock.lock_with_lease(lease));
    assert_invalid_name(lock.try_lock());
    assert_invalid_name(lock.try_lock_for(wait));
    assert_invalid_name(lock.try_lock_for_with_lease(wait, lease));
    assert_invalid_name(lock.lock_interruptibly(&Interrupt::new()));
    assert_invalid_name(lock.lock_interruptibly_with_lease(&Interrupt::new(), lease));
    assert_invalid_name(lock.unlock());
    assert_invalid_name(lock.force_unlock());
    assert_invalid_name(lock.is_locked());
    assert_invalid_name(lock.is_held_by_current_thread());
    assert_invalid_name(lock.hold_count());
    assert_invalid_name(lock.remaining_lease());

    let text = lock.try_lock().unwrap_err().to_string();
    assert!(text.contains("empty"), "the message says why: {text}");
    assert!(
        keys(&server).is_empty(),
        "nothing written: {:?}",
        keys(&server)
    );
}

#[test]
fn zero_lease_is_refused() {
    let server = RedisServer::start();
    let client = server.client();
    let lock = client.lock("leases");
    let wait = Duration::from_millis(100);

    assert_invalid_lease(lock.lock_with_lease(Duration::ZERO));
    assert_invalid_lease(lock.try_lock_for_with_lease(wait, Duration::ZERO));
    assert_invalid_lease(lock.lock_interruptibly_with_lease(&Interrupt::new(), Duration::ZERO));
    // Redis keeps TTLs in whole milliseconds: less than one is zero to it.
    assert_invalid_lease(lock.lock_with_lease(Duration::from_micros(999)));

    let text = lock
        .lock_with_lease(Duration::ZERO)
        .unwrap_err()
        .to_string();
    assert!(text.contains("lease"), "{text}");
    assert!(
        keys(&server).is_empty(),
        "nothing written: {:?}",
        keys(&server)
    );

    // A zero lease is refused even while someone else holds the lock:
    // the call must not wait first.
    let _theirs = server.client().lock("leases").lock().unwrap();
    let started = Instant::now();
    assert_invalid_lease(lock.lock_with_lease(Duration::ZERO));
    assert!(started.elapsed() < Duration::from_secs(2));
}

#[test]
fn zero_timeouts_are_refused_at_build() {
    // A dead URL: if validation came after connecting, this would be a
    // Connect error instead.
    let url = format!("redis://127.0.0.1:{}/", dead_port());
    let builder = || Client::builder().url(url.clone());

    let refused = [
        (
            "watchdog timeout",
            builder().watchdog_timeout(Duration::ZERO).build(),
        ),
        (
            "connect timeout",
            builder().connect_timeout(Duration::ZERO).build(),
        ),
        (
            "response timeout",
            builder().response_timeout(Duration::ZERO).build(),
        ),
        (
            "max idle connections",
            builder().max_idle_connections(0).build(),
        ),
    ];
    for (setting, result) in refused {
        match result {
            Err(Error::InvalidArgument { what, reason }) => {
                assert_eq!(what, setting);
                assert!(!reason.is_empty());
            }
            other => panic!("{setting} of zero: expected InvalidArgument, got {other:?}"),
        }
    }
    let text = builder()
        .watchdog_timeout(Duration::ZERO)
        .build()
        .unwrap_err()
        .to_string();
    assert!(text.contains("watchdog timeout"), "{text}");
}

#[test]
fn malformed_urls_are_refused_quickly() {
    for url in [
        "not a url",
        "",
        "http://127.0.0.1:6379/",
        "redis://127.0.0.1:notaport/",
    ] {
        let started = Instant::now();
        let result = Client::open(url);
        let took = started.elapsed();
        match result {
            Err(Error::InvalidUrl { url: named, reason }) => {
                // What does not parse is not shown: it may hold a password.
                let shown = match url {
                    "http://127.0.0.1:6379/" => url,
                    "redis://127.0.0.1:notaport/" => "redis://… (not shown: it does not parse)",
                    "" => "",
                    _ => "… (not shown: it does not parse)",
                };
                assert_eq!(named, shown);
                assert!(!reason.is_empty());
            }
            other => panic!("{url:?}: expected InvalidUrl, got {other:?}"),
        }
        assert!(took < Duration::from_secs(1), "{url:?} took {took:?}");
    }
    let text = Client::open("http://127.0.0.1:6379/")
        .unwrap_err()
        .to_string();
    assert!(
        text.contains("http://127.0.0.1:6379/"),
        "the message names the URL: {text}"
    );
    assert!(text.contains("scheme \"http\""), "names the scheme: {text}");
}

#[test]
fn a_malformed_url_names_the_part_that_does_not_parse() {
    let port = Client::open("redis://127.0.0.1:notaport/").unwrap_err();
    assert!(port.to_string().contains("the port"), "{port}");
    let host = Client::open("redis://[::1:6379/").unwrap_err();
    assert!(host.to_string().contains("IPv6"), "{host}");
    // A password with an unencoded `/` ends the host early: the part named
    // is where the password landed, and the password is not shown.
    let slash = Client::open("redis://:se/cretPW@127.0.0.1:6379/").unwrap_err();
    for text in [slash.to_string(), format!("{slash:?}"), slash.report()] {
        assert!(!text.contains("cretPW"), "the password shows: {text}");
        assert!(text.contains("percent-encoded"), "{text}");
    }
    assert!(
        matches!(slash, Error::InvalidUrl { .. }),
        "expected InvalidUrl, got {slash:?}"
    );
}

#[test]
fn debug_says_what_display_says_so_main_prints_the_advice() {
    // `fn main() -> redhold::Result<()>` prints an error with `Debug`.
    let port = dead_port();
    let err = Client::builder()
        .url(format!("redis://127.0.0.1:{port}/"))
        .connect_timeout(Duration::from_secs(1))
        .build()
        .expect_err("nothing listens");
    let debug = format!("{err:?}");
    assert!(debug.starts_with(&err.to_string()), "{debug}");
    assert!(
        debug.contains("check that the server runs there"),
        "{debug}"
    );
    assert!(debug.contains("refused"), "the cause follows: {debug}");
    assert!(debug.contains("Connect"), "the variant follows: {debug}");
    let url = Client::open("redis://127.0.0.1:notaport/").unwrap_err();
    assert!(format!("{url:?}").starts_with(&url.to_string()), "{url:?}");
}

#[test]
fn unreachable_server_fails_within_the_connect_timeout() {
    let port = dead_port();
    let url = format!("redis://127.0.0.1:{port}/");
    let connect_timeout = Duration::from_secs(1);
    let started = Instant::now();
    let result = Client::builder()
        .url(url.clone())
        .connect_timeout(connect_timeout)
        .build();
    let took = started.elapsed();
    let err = match result {
        Err(err @ Error::Connect { .. }) => err,
        other => panic!("expected Connect, got {other:?}"),
    };
    assert!(
        took < connect_timeout + Duration::from_secs(1),
        "took {took:?}"
    );
    if let Error::Connect { url: named, .. } = &err {
        assert_eq!(named, &url);
    }
    let text = err.to_string();
    assert!(text.contains(&format!("127.0.0.1:{port}")), "{text}");
    assert!(err.is_connection_error());
    assert!(
        std::error::Error::source(&err).is_some(),
        "the cause is kept"
    );
}

#[test]
fn silent_server_fails_within_the_timeouts() {
    // Accepts connections (the kernel completes the handshake) but never answers.
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("bind");
    let port = listener.local_addr().expect("local_addr").port();
    let url = format!("redis://127.0.0.1:{port}/");
    let timeout = Duration::from_millis(500);
    let started = Instant::now();
    let result = Client::builder()
        .url(url)
        .connect_timeout(timeout)
        .response_timeout(timeout)
        .build();
    let took = started.elapsed();
    match result {
        Err(err @ Error::Connect { .. }) => {
            assert!(
                err.to_string().contains(&format!("127.0.0.1:{port}")),
                "{err}"
            );
        }
        other => panic!("expected Connect, got {other:?}"),
    }
    assert!(took < Duration::from_secs(3), "took {took:?}");
    drop(listener);
}

#[test]
fn wrong_password_is_a_clear_connect_error() {
    let server = RedisServer::start_with_args(&["--requirepass", "right-secret"]);
    let port = server.port();

    let wrong = format!("redis://:hunter2-wrong@127.0.0.1:{port}/");
    let started = Instant::now();
    let err = Client::builder()
        .url(wrong)
        .connect_timeout(Duration::from_secs(2))
        .build()
        .expect_err("wrong password");
    assert!(started.elapsed() < Duration::from_secs(3));
    assert!(matches!(err, Error::Connect { .. }), "{err:?}");
    let text = err.to_string();
    assert!(text.contains(&format!("127.0.0.1:{port}")), "{text}");
    assert!(!text.contains("hunter2"), "the password leaked: {text}");
    assert!(
        text.contains("credentials") || text.to_lowercase().contains("pass"),
        "the message points at the password: {text}"
    );

    let err = Client::open(&server.url_without_password()).expect_err("no password");
    // The server's own reply, read through the re-exported redis crate.
    let Error::Connect { source, .. } = &err else {
        panic!("expected Connect, got {err:?}");
    };
    let source: &redhold::redis::RedisError = source;
    assert_eq!(source.code(), Some("NOAUTH"), "{source:?}");
    let text = err.to_string();
    assert!(
        text.contains("requires a password and the URL gives none"),
        "NOAUTH says that a password is missing, not that it is wrong: {text}"
    );

    // The right password works, for commands and for the wake-up channel,
    // and stays out of the client's Debug output.
    let client = server.client();
    let debug = format!("{client:?}");
    assert!(
        !debug.contains("right-secret"),
        "the password leaked: {debug}"
    );
    let holder = server.client().lock("guarded");
    let guard = holder.lock().unwrap();
    let lock = client.lock("guarded");
    let waiter = bounded::spawn("waiter", move || {
        let started = Instant::now();
        let got = lock
            .try_lock_for(Duration::from_secs(10))
            .map(|g| g.is_some());
        (got, started.elapsed())
    });
    std::thread::sleep(Duration::from_millis(300));
    drop(guard);
    let (got, waited) = waiter.join_within(Duration::from_secs(15));
    assert!(matches!(got, Ok(true)), "{got:?}");
    assert!(
        waited < Duration::from_secs(5),
        "woken by the release message on an authenticated pub/sub connection, waited {waited:?}"
    );
}

#[test]
fn absurd_settings_are_refused_or_harmless() {
    // Each setting is out of any sensible range. build() may refuse it with
    // InvalidArgument; if it accepts it, a lock/unlock cycle must work, must
    // not panic (a release runs in Drop too), and must leave every key with
    // a TTL of the configured size (never none, never a wrapped-around one).
    let server = RedisServer::start();
    let day = Duration::from_secs(24 * 3600);
    let cases = [
        (
            "watchdog timeout of Duration::MAX",
            server.builder().watchdog_timeout(Duration::MAX),
            day,
        ),
        (
            "watchdog timeout just over u64::MAX ms",
            server
                .builder()
                .watchdog_timeout(Duration::from_secs(u64::MAX / 1000 + 1)),
            day,
        ),
        (
            "connect timeout of Duration::MAX",
            server.builder().connect_timeout(Duration::MAX),
            Duration::from_secs(20),
        ),
        (
            "response timeout of Duration::MAX",
            server.builder().response_timeout(Duration::MAX),
            Duration::from_secs(20),
        ),
        (
            "retry delay of Duration::MAX",
            server.builder().retry_delay(Duration::MAX),
            Duration::from_secs(20),
        ),
        (
            "u32::MAX retry attempts",
            server.builder().retry_attempts(u32::MAX),
            Duration::from_secs(20),
        ),
    ];
    for (i, (setting, builder, min_ttl)) in cases.into_iter().enumerate() {
        let name = format!("absurd:{i}");
        let url = server.url();
        let outcome = bounded::spawn(&format!("absurd-{i}"), move || {
            let client = match builder.build() {
                Err(Error::InvalidArgument { .. }) => return Ok(None),
                Err(other) => {
                    return Err(format!("build: expected InvalidArgument, got {other:?}"))
                }
                Ok(client) => client,
            };
            let mut raw = redis::Client::open(url)
                .and_then(|c| c.get_connection())
                .map_err(|e| e.to_string())?;
            let guard = client
                .lock(name.as_str())
                .lock()
                .map_err(|e| format!("lock: {e:?}"));
            let ttl: i64 = redis::cmd("PTTL")
                .arg(&name)
                .query(&mut raw)
                .map_err(|e| e.to_string())?;
            let released = guard?.unlock().map_err(|e| format!("unlock: {e:?}"));
            Ok(Some((ttl, released)))
        })
        .join_within(Duration::from_secs(10));
        match outcome {
            Ok(None) => {}
            Ok(Some((ttl, released))) => {
                let min_ms = min_ttl.as_millis() as i64;
                assert!(
                    ttl >= min_ms,
                    "{setting}: lock PTTL {ttl} ms, expected at least {min_ms}"
                );
                assert_eq!(released, Ok(()), "{setting}");
            }
            Err(e) => panic!("{setting}: {e}"),
        }
        for key in server.cmd::<Vec<String>>(&["KEYS", "*"]) {
            let ttl: i64 = server.cmd(&["PTTL", &key]);
            assert!(ttl > 0, "{setting}: key {key:?} left with PTTL {ttl}");
        }
    }
}
