//! `fork()` with a client in use: the forked process inherits the client,
//! its guards and its sockets, and must neither act as its parent (every
//! call fails with `Error::ForkedProcess`) nor disturb it (no panic, no
//! socket of the parent's closed or written to).
//!
//! Only child processes fork (see `children.rs`): the test process is the
//! harness's. The forked process runs one check, records nothing (the
//! recorder's socket is the parent's) and leaves with `_exit`, its finding
//! in its exit code.
#![allow(unsafe_code)] // std has no fork(); libc's needs `unsafe`.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::thread;
use std::time::{Duration, Instant};

/// The first flag word of a fork that went wrong (the oracle's rule).
pub(crate) const FORK: &str = "[fork]";

/// The first flag word of a parent whose pub/sub connection was
/// reconnected after a forked process dropped the client it inherited.
pub(crate) const FORK_PUBSUB: &str = "[fork] [pub/sub]";

/// How long the forked process may take before it counts as hung.
pub(crate) const LIMIT: Duration = Duration::from_secs(3);

/// Exit codes of the forked process besides 0.
const FAILED: i32 = 3;
const PANICKED: i32 = 4;

/// Forks; the forked process runs `check` and exits. Waits for it (at most
/// [`LIMIT`], then kills it); `Err` describes what went wrong.
pub(crate) fn fork_and_wait(check: impl FnOnce() -> Result<(), String>) -> Result<(), String> {
    // SAFETY: the forked process runs only `check`, which calls the
    // library's public API on inherited handles (the library promises that
    // a forked process's calls fail before touching shared state) and
    // leaves with `_exit`, never returning into the harness.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Ok(()); // No fork to check (out of processes): not the library's fault.
    }
    if pid == 0 {
        let code = match catch_unwind(AssertUnwindSafe(check)) {
            Ok(Ok(())) => 0,
            Ok(Err(text)) => {
                eprintln!("model fork: {text}");
                FAILED
            }
            Err(_) => PANICKED,
        };
        // SAFETY: ends the forked process at once, running no destructor
        // or atexit handler of the parent's.
        unsafe { libc::_exit(code) };
    }
    let deadline = Instant::now() + LIMIT;
    let mut status = 0;
    loop {
        // SAFETY: polls the process just forked; `status` outlives the call.
        let waited = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        if waited == pid {
            break;
        }
        if waited < 0 || Instant::now() >= deadline {
            // SAFETY: kills and reaps our own forked process.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
                libc::waitpid(pid, &mut status, 0);
            }
            return Err(format!("it did not exit within {LIMIT:?} (killed)"));
        }
        thread::sleep(Duration::from_millis(5));
    }
    if libc::WIFEXITED(status) {
        match libc::WEXITSTATUS(status) {
            0 => Ok(()),
            PANICKED => Err("it panicked".into()),
            FAILED => Err("a call did not fail with ForkedProcess (see its stderr)".into()),
            code => Err(format!("it exited with {code}")),
        }
    } else {
        Err(format!("it ended with wait status {status}"))
    }
}
