//! A client used in a `fork()`ed child must not act as its parent: the
//! child would share the parent's holder fields (UUID and thread ids), re-
//! enter its holds and release them.
#![allow(unsafe_code)] // std has no fork(); libc's needs `unsafe`.

mod support;

use redhold::{Error, Lock, LockGuard};
use support::RedisServer;

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
