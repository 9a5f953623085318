//! Unusual input: lock names made of braces, control bytes, unicode or a
//! mebibyte; leases from a millisecond to a year; odd URLs; a wrong user;
//! and a user without permission for scripts. Each works where it is valid
//! or fails with a clear error, and nothing is left locked.
//! (`bad_input.rs` covers empty names, zero leases and timeouts, and the
//! common malformed URLs.)

mod bounded;
mod support;

use std::time::{Duration, Instant};

use redhold::Error;

use support::RedisServer;

/// Generous bound for anything that should take milliseconds.
const PROMPTLY: Duration = Duration::from_secs(5);

/// Every key on the server except release latches (short-lived by design).
fn lock_keys(server: &RedisServer) -> Vec<String> {
    let keys: Vec<String> = server.cmd(&["KEYS", "*"]);
    keys.into_iter()
        .filter(|k| !k.starts_with("redisson_unlock_latch:"))
        .collect()
}

/// Takes `name` on this thread, has another client wait for it, releases,
/// and checks the waiter was woken (promptly, so by the release message on
/// the name's channel) and that nothing is left behind.
fn lock_hand_over_and_clean_up(server: &RedisServer, name: &str) {
    let holder = server.client();
    let lock = holder.lock(name);
    let guard = lock
        .lock()
        .unwrap_or_else(|e| panic!("lock {name:.40?}: {e}"));
    assert_eq!(lock.hold_count().expect("hold_count"), 1);
    let raw_exists: bool = redis::cmd("EXISTS")
        .arg(name)
        .query(&mut server.connection())
        .expect("EXISTS");
    assert!(raw_exists, "the lock's key is not the name itself");

    let waiter = {
        let lock = server.client().lock(name);
        bounded::spawn("waiter", move || {
            let guard = lock.lock().expect("waiter: lock");
            guard.unlock().expect("waiter: unlock");
        })
    };
    waiter.assert_running_for(Duration::from_millis(300));
    guard.unlock().expect("unlock");
    waiter.join_within(PROMPTLY);
    assert!(!lock.is_locked().expect("is_locked"));
    assert_eq!(lock_keys(server), Vec::<String>::new(), "left behind");
}

#[test]
fn names_of_braces_unicode_tags_and_control_bytes_work() {
    let server = RedisServer::start();
    for name in [
        "{",
        "}",
        "{}",
        "}{",
        "{{}}",
        "{{{{{{",
        "{orders}:42",
        "{orders}:{42}",
        "zámek-🔒-ключ-鎖",
        "\u{0}",
        "line\r\nbreak",
        // Blank names are names, as in Redisson (only "" is refused).
        " ",
        "   ",
        "\t",
        " \r\n ",
    ] {
        lock_hand_over_and_clean_up(&server, name);
    }
}

#[test]
fn a_one_mebibyte_name_works() {
    let server = RedisServer::start();
    let name = "n".repeat(1 << 20);
    lock_hand_over_and_clean_up(&server, &name);
    // Errors quote it shortened.
    let client = server.client();
    let error = client
        .lock(name.as_str())
        .unlock()
        .expect_err("unlocking a lock nobody holds");
    assert!(matches!(error, Error::NotHeld { .. }), "{error:?}");
    assert!(
        error.to_string().len() < 1000,
        "the error quotes the whole name"
    );
}

#[test]
fn leases_from_a_millisecond_to_a_year() {
    let server = RedisServer::start();
    let client = server.client();
    let lock = client.lock("leases");

    for lease in [Duration::from_micros(999), Duration::MAX] {
        match lock.lock_with_lease(lease) {
            Err(e @ Error::InvalidArgument { .. }) => {
                assert!(e.to_string().contains("lease"), "{e}")
            }
            other => panic!("lease {lease:?}: {other:?}"),
        }
    }
    assert!(!lock.is_locked().expect("is_locked"));

    // 1 ms: taken, and gone by itself almost at once.
    let lease = Duration::from_millis(1);
    let guard = lock.lock_with_lease(lease).expect("a 1 ms lease");
    let returned = Instant::now();
    let gone = bounded::wait_until(PROMPTLY, || !lock.is_locked().expect("is_locked"));
    assert!(gone.is_some(), "a 1 ms lease is still held");
    // The guard counts the lease on our monotonic clock from before its
    // request, so it must think the hold gone once a lease has passed since
    // the call returned. Redis counts by its wall clock, which a clock step
    // on the machine can move ahead of ours (docs/reliability.md, "Clock
    // jumps"), so Redis saying "gone" alone does not settle it.
    std::thread::sleep((returned + lease).saturating_duration_since(Instant::now()));
    assert!(!guard.is_held(), "a 1 ms lease still believed held");
    match guard.unlock() {
        Err(Error::LockLost { .. }) => {}
        other => panic!("releasing an expired 1 ms lease: {other:?}"),
    }
    // Free for someone else at once.
    let other = server.client();
    let taken = other
        .lock("leases")
        .try_lock()
        .expect("try_lock after a 1 ms lease");
    drop(taken);

    // A year: kept with that TTL, released normally.
    let year = Duration::from_secs(365 * 24 * 3600);
    let guard = lock.lock_with_lease(year).expect("a year-long lease");
    let left = lock
        .remaining_lease()
        .expect("remaining_lease")
        .expect("held");
    assert!(left > year - Duration::from_secs(60), "{left:?}");
    assert!(guard.is_held());
    guard.unlock().expect("unlock a year-long lease");
    assert!(lock_keys(&server).is_empty());
}

#[test]
fn odd_urls_are_refused_clearly() {
    for url in [
        "redis://",
        "redis://127.0.0.1:99999/",
        "redis://127.0.0.1:6379/notadb",
        "redis://[::1/",
        // Without the `tls` feature a TLS URL cannot be served at all.
        #[cfg(not(feature = "tls"))]
        "rediss://127.0.0.1:6379/",
    ] {
        let started = Instant::now();
        let result = redhold::Client::builder()
            .url(url)
            .connect_timeout(Duration::from_secs(1))
            .build();
        match result {
            Err(e @ Error::InvalidUrl { .. }) => {
                let text = e.to_string();
                // A URL that does not parse is shown as its scheme alone:
                // where its password ends is anybody's guess.
                let shown = if url.starts_with("redis://127.0.0.1:99999") || url == "redis://[::1/"
                {
                    "redis://… (not shown: it does not parse)"
                } else {
                    url
                };
                assert!(text.contains(shown), "the URL is not named: {text}");
                assert!(text.contains("expected redis://"), "no hint: {text}");
                if url.starts_with("rediss") {
                    // Names the feature and the line that turns it on.
                    assert!(
                        text.contains(r#"features = ["tls"]"#),
                        "the feature is not named: {text}"
                    );
                }
            }
            other => panic!("{url:?} was accepted: {other:?}"),
        }
        assert!(
            started.elapsed() < PROMPTLY,
            "{url:?} took {:?}",
            started.elapsed()
        );
    }
    // Well-formed, but nothing listens there.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let mut well_formed = vec![format!("redis://127.0.0.1:{closed}/")];
    if cfg!(feature = "tls") {
        well_formed.push(format!("rediss://127.0.0.1:{closed}/"));
    }
    for url in well_formed {
        let started = Instant::now();
        match redhold::Client::builder()
            .url(&url)
            .connect_timeout(Duration::from_secs(1))
            .build()
        {
            Err(e @ Error::Connect { .. }) => assert!(e.is_connection_error(), "{e:?}"),
            other => panic!("nothing listens at {url}: {other:?}"),
        }
        assert!(started.elapsed() < PROMPTLY);
    }
}

#[test]
fn an_unknown_user_is_refused_without_showing_the_password() {
    let server = RedisServer::start();
    let url = format!("redis://nobody:wrong-secret@127.0.0.1:{}/", server.port());
    match redhold::Client::open(&url) {
        Err(e @ Error::Connect { .. }) => {
            let text = e.to_string();
            assert!(
                !text.contains("wrong-secret"),
                "the password leaked: {text}"
            );
            assert!(text.contains("nobody"), "the user is not named: {text}");
            assert!(text.contains("credentials"), "{text}");
        }
        other => panic!("{url}: {other:?}"),
    }
    assert!(lock_keys(&server).is_empty());
}

#[test]
fn a_user_without_eval_gets_a_clear_error_and_nothing_is_locked() {
    let server = RedisServer::start();
    let _: () = server.cmd(&[
        "ACL", "SETUSER", "limited", "on", ">pw", "~*", "&*", "+@all", "-eval", "-evalsha",
    ]);
    let url = format!("redis://limited:pw@127.0.0.1:{}/", server.port());
    let client = redhold::Client::open(&url).expect("the user may connect");
    let lock = client.lock("no-eval");
    let started = Instant::now();
    match lock.lock() {
        Err(e @ Error::Redis(_)) => {
            assert!(!e.is_connection_error(), "not a network problem: {e:?}");
            // The advice is the error's own; the refused command is named
            // by its cause, the server's reply.
            let advice = e.to_string().to_lowercase();
            assert!(advice.contains("permission"), "no advice in: {advice}");
            let text = e.report().to_lowercase();
            assert!(
                text.contains("noperm") || text.contains("permission"),
                "the error does not say what is missing: {text}"
            );
            assert!(text.contains("evalsha") || text.contains("eval"), "{text}");
        }
        other => panic!("locking without EVAL: {other:?}"),
    }
    // Refused at once, not retried like a network error.
    assert!(started.elapsed() < PROMPTLY);
    assert!(matches!(lock.try_lock(), Err(Error::Redis(_))));
    assert!(!lock.is_locked().expect("EXISTS is allowed"));
    assert!(lock_keys(&server).is_empty());
}
