//! Test support: running one test of the current test executable in a child
//! process, for tests that need a whole process to die (SIGKILL) or several
//! processes to contend for a lock.
//!
//! The child test is an ordinary `#[test]` that does its work only when an
//! environment variable set by the parent is present, and returns at once
//! otherwise, so it passes in a normal run. Binaries pull this file in with
//! `#[path = "../support/child.rs"] mod child;` (or the path from their own
//! folder).
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::thread;
use std::time::{Duration, Instant};

/// A child process running exactly one test of this executable. Dropping it
/// kills the process (SIGKILL) if it still runs.
#[derive(Debug)]
pub(crate) struct ChildTest {
    test: String,
    child: Child,
    lines: Receiver<String>,
}

impl ChildTest {
    /// Runs the test whose full name is `test` (e.g. `holder_killed::child`)
    /// in a new process of this executable, with `env` added to its
    /// environment. Its stdout is read line by line; its stderr goes to ours.
    ///
    /// # Panics
    ///
    /// If the executable cannot be run.
    pub(crate) fn spawn(test: &str, env: &[(&str, &str)]) -> ChildTest {
        let exe = std::env::current_exe().expect("cannot find the test executable");
        let mut command = Command::new(exe);
        command
            .args(["--exact", test, "--nocapture", "--test-threads", "1"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        for (key, value) in env {
            command.env(key, value);
        }
        let mut child = command
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run child test {test}: {e}"));
        let stdout = child.stdout.take().expect("child stdout is piped");
        let (tx, lines) = mpsc::channel();
        thread::Builder::new()
            .name(format!("stdout of {test}"))
            .spawn(move || {
                for line in BufReader::new(stdout).lines() {
                    let Ok(line) = line else { break };
                    if tx.send(line).is_err() {
                        break;
                    }
                }
            })
            .expect("cannot spawn a stdout reader thread");
        ChildTest {
            test: test.to_owned(),
            child,
            lines,
        }
    }

    /// The process id of the child.
    pub(crate) fn id(&self) -> u32 {
        self.child.id()
    }

    /// Waits at most `limit` for a line of the child's stdout that contains
    /// `marker`, skipping others, and returns the line from the marker on;
    /// `None` when none came in time or the child closed its stdout first.
    ///
    /// (The test harness prints `test <name> ... ` without a line break
    /// before running the test, so the marker may not start its line.)
    pub(crate) fn wait_for_line(&self, marker: &str, limit: Duration) -> Option<String> {
        let deadline = Instant::now() + limit;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    if let Some(at) = line.find(marker) {
                        return Some(line[at..].to_owned());
                    }
                }
                Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => return None,
            }
        }
    }

    /// Kills the child with SIGKILL and waits until it is gone.
    pub(crate) fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Waits at most `limit` for the child to exit by itself; `None` when
    /// it is still running (it is left running: dropping it kills it).
    pub(crate) fn exited_within(&mut self, limit: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + limit;
        loop {
            match self.child.try_wait() {
                Ok(Some(status)) => return Some(status),
                Ok(None) if Instant::now() < deadline => thread::sleep(Duration::from_millis(20)),
                Ok(None) | Err(_) => return None,
            }
        }
    }

    /// Waits at most `limit` for the child to exit by itself.
    ///
    /// # Panics
    ///
    /// If it is still running after `limit` (it is killed first).
    pub(crate) fn wait_within(&mut self, limit: Duration) -> ExitStatus {
        let deadline = Instant::now() + limit;
        loop {
            match self.child.try_wait() {
                Ok(Some(status)) => return status,
                Ok(None) if Instant::now() < deadline => thread::sleep(Duration::from_millis(20)),
                Ok(None) => {
                    self.kill();
                    panic!("child test {} still running after {limit:?}", self.test);
                }
                Err(e) => panic!("cannot wait for child test {}: {e}", self.test),
            }
        }
    }
}

impl Drop for ChildTest {
    fn drop(&mut self) {
        self.kill();
    }
}
