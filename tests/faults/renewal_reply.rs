//! The watchdog's renewals through the fault proxy, spoiled at the N-th
//! reply (not the first: the lock has been renewed before, and the
//! watchdog's connection is an old one): garbled, cut mid-way or lost. The
//! renewal fails once; the connection that carried the bad reply is
//! closed, the next pass renews on a fresh one, and the hold is neither
//! lost nor reported lost.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::fault_proxy::{Action, FaultProxy, Matcher, Rule};
use crate::support::RedisServer;

/// Renewals every 300 ms: a pass that fails leaves two more before the
/// key could expire.
const WATCHDOG: Duration = Duration::from_millis(900);

/// The renewal script's calls that name `lock`.
fn renewals_of(lock: &str) -> Matcher {
    Matcher {
        commands: vec!["EVALSHA".into()],
        exact: Some(
            redis::Script::new(include_str!("../../lua/renew.lua"))
                .get_hash()
                .as_bytes()
                .to_vec(),
        ),
        containing: vec![lock.as_bytes().to_vec()],
        excluding: Vec::new(),
        skip: 0,
    }
}

fn spoiled_renewal(action: Action, nth: u32) {
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.port());
    let lost = Arc::new(AtomicU64::new(0));
    let counted = Arc::clone(&lost);
    let client = redhold::Client::builder()
        .url(proxy.url())
        .watchdog_timeout(WATCHDOG)
        .response_timeout(Duration::from_millis(500))
        .on_lock_lost(move |_| {
            counted.fetch_add(1, Ordering::SeqCst);
        })
        .build()
        .expect("client through the proxy");
    let lock = client.lock("renewed");
    let guard = lock.lock().expect("lock");
    let armed = proxy.arming().arm(Rule {
        matcher: renewals_of("renewed").nth(nth),
        action,
    });
    assert!(
        armed.wait_fired(WATCHDOG * (nth + 2)),
        "{action:?}: renewal #{nth} never came"
    );
    // Three more periods: the key would have expired without renewals.
    std::thread::sleep(WATCHDOG);
    let ttl: i64 = server.cmd(&["PTTL", "renewed"]);
    assert!(
        ttl > 0,
        "{action:?}: the lock was not renewed again (PTTL {ttl})"
    );
    assert!(guard.is_held(), "{action:?}");
    assert_eq!(lost.load(Ordering::SeqCst), 0, "{action:?}: reported lost");
    assert_eq!(client.stats().locks_lost, 0, "{action:?}");
    drop(guard);
    assert!(!server.exists("renewed"), "{action:?}: left held");
}

#[test]
fn a_garbled_second_renewal_reply_costs_one_renewal_not_the_hold() {
    spoiled_renewal(Action::GarbleReply(b"*1\r\n:abc\r\n"), 2);
}

#[test]
fn a_third_renewal_reply_cut_mid_way_costs_one_renewal_not_the_hold() {
    spoiled_renewal(Action::CutMidReply, 3);
}

#[test]
fn a_lost_second_renewal_reply_costs_one_renewal_not_the_hold() {
    spoiled_renewal(Action::LoseReply, 2);
}
