//! `redhold force-unlock` on a real redis-server: the lock goes whatever its
//! kind, and waiters parked in another client wake at once instead of
//! sleeping out the holder's 60 s lease.

mod binary;
#[path = "../../tests/bounded/mod.rs"]
mod bounded;
#[path = "../../tests/support/mod.rs"]
mod support;

use std::sync::mpsc;
use std::time::Duration;

use binary::redhold;
use bounded::wait_until;
use redhold::Error;
use support::RedisServer;

/// The holders' lease: a waiter that gets in before it ran out was woken.
const LEASE: Duration = Duration::from_secs(60);
/// Generous bound for anything that should take milliseconds.
const PROMPTLY: Duration = Duration::from_secs(10);

/// How many connections listen on `channel`.
fn subscribers(server: &RedisServer, channel: &str) -> i64 {
    let reply: (String, i64) = server.cmd(&["PUBSUB", "NUMSUB", channel]);
    reply.1
}

/// Waits until `count` connections listen on `channel`, then a little
/// longer, so that the waiters behind them have parked.
#[track_caller]
fn wait_for_listeners(server: &RedisServer, channel: &str, count: i64) {
    let found = wait_until(PROMPTLY, || subscribers(server, channel) >= count);
    assert!(found.is_some(), "nobody listens on {channel}");
    std::thread::sleep(Duration::from_millis(200));
}

/// Runs `force-unlock --yes` and checks what it says it removed. (Whether
/// the lock is gone cannot be seen in Redis: the woken waiter takes it.)
#[track_caller]
fn force_unlock(server: &RedisServer, name: &str, kind: &str) {
    let run = redhold(&["--url", &server.url(), "force-unlock", name, "--yes"]);
    run.expect_code(0);
    assert!(
        run.stdout.contains(&format!("removed {kind} lock")),
        "{}",
        run.stdout
    );
}

#[test]
fn a_plain_lock_goes_and_its_waiter_wakes() {
    let server = RedisServer::start();
    let holder = server.client();
    let guard = holder.lock("plain").lock_with_lease(LEASE).unwrap();
    let other = server.client();
    let waiter = bounded::spawn("waiter", move || other.lock("plain").lock().map(drop));
    wait_for_listeners(&server, "redisson_lock__channel:{plain}", 1);

    // show reports the listener before the lock goes.
    let info = redhold(&["--url", &server.url(), "show", "plain", "--json"])
        .expect_code(0)
        .json();
    assert_eq!(info["subscribers"], 1, "{info}");

    force_unlock(&server, "plain", "plain");
    waiter.join_within(PROMPTLY).unwrap();
    assert!(matches!(guard.unlock(), Err(Error::LockLost { .. })));
}

#[test]
fn a_fenced_lock_goes_and_keeps_its_token() {
    let server = RedisServer::start();
    let holder = server.client();
    let guard = holder.fenced_lock("fenced").lock_with_lease(LEASE).unwrap();
    let other = server.client();
    let waiter = bounded::spawn("waiter", move || {
        other.fenced_lock("fenced").lock().map(|g| g.token())
    });
    wait_for_listeners(&server, "redisson_lock__channel:{fenced}", 1);
    force_unlock(&server, "fenced", "fenced");
    let token = waiter.join_within(PROMPTLY).unwrap();
    assert!(token > guard.token());
}

#[test]
fn a_fair_lock_goes_and_the_head_of_its_queue_wakes() {
    let server = RedisServer::start();
    let holder = server.client();
    let _guard = holder.fair_lock("fair").lock_with_lease(LEASE).unwrap();
    let other = server.client();
    let waiter = bounded::spawn("waiter", move || other.fair_lock("fair").lock().map(drop));
    let queued = wait_until(PROMPTLY, || {
        server.cmd::<usize>(&["LLEN", "redisson_lock_queue:{fair}"]) == 1
    });
    assert!(queued.is_some(), "the waiter did not queue");
    let head: String = server.cmd(&["LINDEX", "redisson_lock_queue:{fair}", "0"]);
    wait_for_listeners(
        &server,
        &format!("redisson_lock__channel:{{fair}}:{head}"),
        1,
    );
    force_unlock(&server, "fair", "fair");
    waiter.join_within(PROMPTLY).unwrap();
}

#[test]
fn a_write_lock_goes_and_every_parked_reader_wakes() {
    let server = RedisServer::start();
    let holder = server.client();
    let _guard = holder
        .read_write_lock("rw")
        .write()
        .lock_with_lease(LEASE)
        .unwrap();
    // Two readers of one client, which must hold the lock side by side: a
    // wake-up for one waiter per process would leave the second parked.
    let readers = server.client();
    let (entered, inside) = mpsc::channel();
    let (leave_tx, leave_rx) = mpsc::channel::<()>();
    let leave_rx = std::sync::Arc::new(std::sync::Mutex::new(leave_rx));
    let mut threads = Vec::new();
    for n in 0..2 {
        let (readers, entered, leave) = (readers.clone(), entered.clone(), leave_rx.clone());
        threads.push(bounded::spawn(&format!("reader-{n}"), move || {
            let guard = readers.read_write_lock("rw").read().lock()?;
            entered.send(n).unwrap();
            let _ = leave.lock().unwrap().recv_timeout(PROMPTLY);
            guard.unlock()
        }));
    }
    wait_for_listeners(&server, "redisson_rwlock:{rw}", 1);
    force_unlock(&server, "rw", "read-write");
    for _ in 0..2 {
        inside
            .recv_timeout(PROMPTLY)
            .expect("both readers get in at once");
    }
    drop(leave_tx);
    for thread in threads {
        thread.join_within(PROMPTLY).unwrap();
    }
}

#[test]
fn a_read_lock_goes_and_the_writer_wakes() {
    let server = RedisServer::start();
    let holder = server.client();
    let _guard = holder
        .read_write_lock("rw")
        .read()
        .lock_with_lease(LEASE)
        .unwrap();
    let other = server.client();
    let writer = bounded::spawn("writer", move || {
        other.read_write_lock("rw").write().lock().map(drop)
    });
    wait_for_listeners(&server, "redisson_rwlock:{rw}", 1);
    force_unlock(&server, "rw", "read-write");
    writer.join_within(PROMPTLY).unwrap();
}

#[test]
fn without_yes_and_without_a_terminal_nothing_is_removed() {
    let server = RedisServer::start();
    let holder = server.client();
    let _guard = holder.lock("kept").lock().unwrap();
    let run = redhold(&["--url", &server.url(), "force-unlock", "kept"]);
    run.expect_code(5).expect_one_line_error();
    assert!(run.stderr.contains("--yes"), "{}", run.stderr);
    assert!(server.exists("kept"));
}

#[test]
fn names_without_a_lock_are_left_alone() {
    let server = RedisServer::start();
    let run = redhold(&["--url", &server.url(), "force-unlock", "free", "--yes"]);
    run.expect_code(0);
    assert!(run.stdout.contains("not locked"), "{}", run.stdout);

    server.cmd::<()>(&["SET", "greeting", "hello"]);
    let run = redhold(&["--url", &server.url(), "force-unlock", "greeting", "--yes"]);
    run.expect_code(1).expect_one_line_error();
    assert!(run.stderr.contains("is not a lock"), "{}", run.stderr);
    assert!(server.exists("greeting"));
}

/// On a terminal it asks, naming the holders as `show` does
/// (`name@host:pid (uuid:thread)`), and only a yes removes the lock.
/// util-linux's `script` gives the binary a pseudo-terminal and types the
/// answer.
#[cfg(target_os = "linux")]
#[test]
fn on_a_terminal_it_asks_first() {
    use std::io::Write;
    use std::process::{Command, Stdio};

    let server = RedisServer::start();
    let holder = server.builder().name("nightly-report").build().unwrap();
    let me = holder.identity().clone();
    let who = format!("nightly-report@{}:{} ({}:", me.host, me.pid, holder.id());
    let _guard = holder.lock("asked").lock().unwrap();
    let command = format!(
        "'{}' --url '{}' force-unlock asked",
        env!("CARGO_BIN_EXE_redhold"),
        server.url()
    );
    for (answer, code, kept) in [("n\n", 5, true), ("\n", 5, true), ("y\n", 0, false)] {
        let mut child = Command::new("script")
            .args(["-qec", &command, "/dev/null"])
            .env_remove("REDIS_URL")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("util-linux `script` on PATH");
        child
            .stdin
            .take()
            .expect("piped stdin")
            .write_all(answer.as_bytes())
            .unwrap();
        let done = bounded::spawn("script", move || child.wait_with_output());
        let output = done.join_within(PROMPTLY).unwrap();
        let printed = String::from_utf8_lossy(&output.stdout);
        assert!(printed.contains("[y/N]"), "{printed}");
        assert!(printed.contains(&who), "held by {who}…: {printed}");
        assert_eq!(output.status.code(), Some(code), "{answer:?}: {printed}");
        assert_eq!(server.exists("asked"), kept, "{answer:?}: {printed}");
    }
}
