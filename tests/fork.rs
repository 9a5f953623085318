//! A client used in a `fork()`ed child must not act as its parent: the
//! child would share the parent's holder fields (UUID and thread ids), re-
//! enter its holds and release them, and its sockets: a child that closes
//! a connection for both processes (or writes to it) breaks the parent's.
#![allow(unsafe_code)] // std has no fork(); libc's needs `unsafe`.

mod bounded;
mod support;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::thread;
use std::time::{Duration, Instant};

use redhold::{Client, Error, Lock, LockGuard};
use support::RedisServer;

/// Far below the 30 s watchdog timeout: a waiter woken within it was woken
/// by pub/sub; and long enough for any child of these tests to end.
const PROMPTLY: Duration = Duration::from_secs(5);

/// How a forked child ended.
#[derive(Debug, PartialEq, Eq)]
enum ChildEnd {
    /// It exited with this code (101: it panicked).
    Exited(i32),
    /// A signal ended it (an abort, say).
    Signaled(i32),
    /// It still ran after [`PROMPTLY`] and was killed.
    Hung,
}

/// Forks; the child runs `child` and exits with the code it returns (101
/// if it panicked), never returning into the test harness. Returns how the
/// child ended.
fn in_a_child(child: impl FnOnce() -> i32) -> ChildEnd {
    // SAFETY: the child runs only `child` and leaves with `_exit`, running
    // no destructor or atexit handler of the parent's.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let code = catch_unwind(AssertUnwindSafe(child)).unwrap_or(101);
        // SAFETY: ends the child at once.
        unsafe { libc::_exit(code) };
    }
    let deadline = Instant::now() + PROMPTLY;
    let mut status = 0;
    loop {
        // SAFETY: polls the child just forked; `status` outlives the call.
        let waited = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        assert!(waited >= 0, "waitpid failed");
        if waited == pid {
            break;
        }
        if Instant::now() >= deadline {
            // SAFETY: kills and reaps our own child.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
                libc::waitpid(pid, &mut status, 0);
            }
            return ChildEnd::Hung;
        }
        thread::sleep(Duration::from_millis(10));
    }
    if libc::WIFEXITED(status) {
        ChildEnd::Exited(libc::WEXITSTATUS(status))
    } else {
        ChildEnd::Signaled(libc::WTERMSIG(status))
    }
}

/// The ids of the pub/sub connections in a `CLIENT LIST TYPE pubsub` reply.
fn pubsub_ids(client_list: &str) -> Vec<String> {
    client_list
        .lines()
        .filter_map(|line| line.split(' ').find_map(|kv| kv.strip_prefix("id=")))
        .map(str::to_owned)
        .collect()
}

/// What the child checks, as its exit code: 0 when all is well.
fn in_the_child(lock: &Lock, parents_guard: LockGuard) -> i32 {
    // Taking the lock would re-enter the parent's hold.
    if !matches!(lock.try_lock(), Err(Error::ForkedProcess { .. })) {
        return 1;
    }
    // Releasing would release the parent's hold.
    if !matches!(lock.unlock(), Err(Error::ForkedProcess { .. })) {
        return 2;
    }
    // Dropping the copy of the parent's guard sends nothing.
    drop(parents_guard);
    0
}

#[test]
fn a_forked_child_cannot_use_its_parents_client() {
    let server = RedisServer::start();
    let client = server.client();
    let lock = client.lock("forked");
    let guard = lock.lock().unwrap();

    // SAFETY: the child runs only `in_the_child`, which takes no lock that
    // another thread of the parent may have held at the fork (the checks
    // fail before any shared state is touched), and leaves with `_exit`,
    // never returning into the test harness.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let code = in_the_child(&lock, guard);
        // SAFETY: ends the child at once, running no destructor or atexit
        // handler of the parent's.
        unsafe { libc::_exit(code) };
    }

    let mut status = 0;
    // SAFETY: waits for the child just forked; `status` outlives the call.
    let waited = unsafe { libc::waitpid(pid, &mut status, 0) };
    assert_eq!(waited, pid, "waitpid failed");
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "the child's check {} failed (see in_the_child)",
        libc::WEXITSTATUS(status)
    );
    assert_eq!(lock.hold_count().unwrap(), 1, "the child released our hold");
    guard.unlock().unwrap();
    assert!(!server.exists("forked"));
}

#[test]
fn shutdown_in_a_forked_child_fails_without_touching_the_parent() {
    let server = RedisServer::start();
    let client = server.client();
    let guard = client.lock("kept").lock().unwrap();

    let end = in_a_child(|| match client.shutdown() {
        Err(Error::ForkedProcess { .. }) => 0,
        _ => 1,
    });
    assert_eq!(
        end,
        ChildEnd::Exited(0),
        "the child's shutdown() returns ForkedProcess (1: it returned something else)"
    );
    assert!(!client.is_shut_down());
    assert_eq!(guard.lock().hold_count().unwrap(), 1);
    guard.unlock().unwrap();
    assert!(!server.exists("kept"));
}

/// Everything of a client a forked child inherits: the client, a clone, a
/// lock handle and guards.
type Inherited = (Client, Client, Lock, LockGuard, LockGuard);

/// A child drops every copy of its parent's client it inherited, then
/// exits; the parent's pub/sub connection is the same one after (no
/// reconnect), still wakes a waiter at once, and the parent's holds are
/// all there. `client_list` runs `CLIENT LIST TYPE pubsub` on the server;
/// `other` is a second client of the same server.
fn a_child_dropping_everything_leaves_the_parent_alone(
    client: Client,
    other: &Client,
    client_list: impl Fn() -> String,
) {
    let lock = client.lock("held");
    let outer = lock.lock().unwrap();
    let inner = lock.lock().unwrap();
    // The parent waited for a lock another client holds: its pub/sub
    // connection stays subscribed for the linger. (A thread still waiting
    // at the fork would keep a clone of the client that the child cannot
    // drop.)
    let busy = other.lock("busy").lock().unwrap();
    let waited = client.lock("busy").try_lock_for(Duration::from_millis(50));
    assert!(matches!(waited, Ok(None)), "{waited:?}");
    let before = pubsub_ids(&client_list());
    // Only a connection with a subscription counts as pub/sub: the waiter's.
    assert_eq!(
        before.len(),
        1,
        "the parent's pub/sub connection: {before:?}"
    );

    let mut inherited: Option<Inherited> = Some((client.clone(), client, lock, outer, inner));
    let end = in_a_child(|| {
        drop(inherited.take());
        0
    });
    assert_eq!(
        end,
        ChildEnd::Exited(0),
        "the child dropped its copies and exited"
    );
    let (client, _clone, lock, outer, inner) = inherited.take().expect("the parent's own");

    // A reconnect takes milliseconds: give one the time to show.
    thread::sleep(Duration::from_millis(300));
    let after = pubsub_ids(&client_list());
    assert_eq!(
        after, before,
        "the parent's pub/sub connection was closed by the child (a new id is a reconnect)"
    );
    assert_eq!(client.stats().pubsub_reconnects, 0);
    assert_eq!(
        lock.hold_count().unwrap(),
        2,
        "the parent's holds are all there"
    );
    let waiter = {
        let lock = client.lock("busy");
        bounded::spawn("parked-waiter", move || lock.lock().map(|g| g.is_held()))
    };
    waiter.assert_running_for(Duration::from_millis(300));
    drop(busy);
    let woken = waiter.join_within(PROMPTLY);
    assert!(matches!(woken, Ok(true)), "{woken:?}");
    inner.unlock().unwrap();
    outer.unlock().unwrap();
    assert!(!lock.is_locked().unwrap());
}

#[test]
fn a_forked_child_dropping_its_copies_leaves_the_parent_alone() {
    let server = RedisServer::start();
    let other = server.client();
    a_child_dropping_everything_leaves_the_parent_alone(server.client(), &other, || {
        server.cmd(&["CLIENT", "LIST", "TYPE", "pubsub"])
    });
}

/// Over TLS the child must not write either: a close_notify (or any
/// record) sent on the parent's session would end it.
#[cfg(feature = "tls")]
#[test]
fn a_forked_child_dropping_its_copies_leaves_the_parents_tls_alone() {
    let server = support::tls::TlsServer::start();
    let client = || {
        Client::builder()
            .url(server.server.url())
            .tls_root_cert(server.ca_pem())
            .connect_timeout(Duration::from_secs(2))
            .build()
            .unwrap_or_else(|e| panic!("client over TLS: {e}"))
    };
    let other = client();
    a_child_dropping_everything_leaves_the_parent_alone(client(), &other, || {
        server.cmd(&["CLIENT", "LIST", "TYPE", "pubsub"])
    });
}

/// A child forked while a release of the parent's is pending (its server
/// frozen): the child's calls fail with `ForkedProcess` at once, without
/// touching the parent's worker or its queue, and its copies drop quietly;
/// the parent's release runs once the server resumes.
#[test]
fn a_child_forked_with_a_release_pending_leaves_it_to_the_parent() {
    let server = RedisServer::start();
    let client = server
        .builder()
        .connect_timeout(Duration::from_millis(300))
        .response_timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    let lock = client.lock("forked-pending");
    let guard = lock.lock().unwrap();
    server.freeze();
    drop(guard);
    assert_eq!(client.stats().pending_releases, 1);
    let end = in_a_child(|| {
        if !matches!(lock.try_lock(), Err(Error::ForkedProcess { .. })) {
            return 1;
        }
        if !matches!(lock.lock(), Err(Error::ForkedProcess { .. })) {
            return 2;
        }
        drop(lock.clone());
        0
    });
    server.thaw();
    assert_eq!(end, ChildEnd::Exited(0));
    let other = server.client();
    let taken = other.lock("forked-pending").try_lock_for(PROMPTLY).unwrap();
    assert!(taken.is_some(), "the parent's pending release never ran");
    // The release ran in Redis; its worker learns so at its next look.
    let settled = bounded::wait_until(PROMPTLY, || client.stats().pending_releases == 0);
    assert!(settled.is_some(), "{:?}", client.stats());
}
