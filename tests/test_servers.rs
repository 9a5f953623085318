//! The test harness's own servers: a test binary killed mid-run (by hand,
//! or by a timeout) runs no `Drop`, yet leaves no `redis-server` behind.

mod support;

#[path = "support/child.rs"]
mod child;

use std::time::{Duration, Instant};

use child::ChildTest;
use support::RedisServer;

/// Set in the child's environment: only then does the child test run.
const CHILD_ENV: &str = "REDHOLD_TEST_SERVERS_CHILD";

/// The watcher looks once a second; a loaded machine may need a few more.
const DIES_WITHIN: Duration = Duration::from_secs(15);

/// Whether `pid` is a live process (not gone, not a zombie).
fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the parenthesised command name.
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X"),
        Err(_) => false,
    }
}

#[test]
fn a_server_dies_with_its_killed_test_process() {
    let mut process = ChildTest::spawn("child_starts_a_server_and_waits", &[(CHILD_ENV, "1")]);
    let line = process
        .wait_for_line("server-pid=", Duration::from_secs(30))
        .expect("the child starts a server");
    let pid: u32 = line["server-pid=".len()..]
        .trim()
        .parse()
        .unwrap_or_else(|e| panic!("a pid in {line:?}: {e}"));
    assert!(alive(pid), "the child's server runs");
    process.kill();
    let started = Instant::now();
    while alive(pid) && started.elapsed() < DIES_WITHIN {
        std::thread::sleep(Duration::from_millis(50));
    }
    if alive(pid) {
        // Clean up before failing, so that the failure leaves nothing either.
        let _ = std::process::Command::new("kill")
            .args(["-9", &pid.to_string()])
            .status();
        panic!("redis-server {pid} outlived its killed test process by {DIES_WITHIN:?}");
    }
}

/// Run by the test above in a child process: starts a server, says its
/// pid, and waits to be killed.
#[test]
fn child_starts_a_server_and_waits() {
    if std::env::var_os(CHILD_ENV).is_none() {
        return;
    }
    let server = RedisServer::start();
    println!("server-pid={}", server.pid);
    std::thread::sleep(Duration::from_secs(120));
    drop(server);
}
