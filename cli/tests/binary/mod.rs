//! Running the `redhold` binary that Cargo built for these tests.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::thread;
use std::time::{Duration, Instant};

/// Longer than any command should take, even one waiting out a connect
/// timeout with retries.
const LIMIT: Duration = Duration::from_secs(60);

/// What one run of the binary did.
#[derive(Debug)]
pub(crate) struct Run {
    /// The exit code (`-1` when killed by a signal).
    pub(crate) code: i32,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

impl Run {
    /// `stdout` parsed as one JSON value.
    #[track_caller]
    pub(crate) fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("not JSON ({e}):\n{}\nstderr: {}", self.stdout, self.stderr))
    }

    /// `stdout` parsed as one JSON value per line.
    #[track_caller]
    pub(crate) fn json_lines(&self) -> Vec<serde_json::Value> {
        self.stdout
            .lines()
            .map(|line| {
                serde_json::from_str(line)
                    .unwrap_or_else(|e| panic!("not JSON ({e}): {line}\nstderr: {}", self.stderr))
            })
            .collect()
    }

    /// Fails the test unless the run exited with `code`.
    #[track_caller]
    pub(crate) fn expect_code(&self, code: i32) -> &Self {
        assert_eq!(
            self.code, code,
            "exit code\n--- stdout ---\n{}\n--- stderr ---\n{}",
            self.stdout, self.stderr
        );
        self
    }

    /// Fails the test unless stderr is one line, with no panic or backtrace.
    #[track_caller]
    pub(crate) fn expect_one_line_error(&self) -> &Self {
        assert_eq!(self.stderr.lines().count(), 1, "stderr: {:?}", self.stderr);
        assert!(
            self.stderr.starts_with("redhold: "),
            "stderr: {:?}",
            self.stderr
        );
        assert!(
            !self.stderr.contains("panicked"),
            "stderr: {:?}",
            self.stderr
        );
        assert!(
            !self.stderr.contains("backtrace"),
            "stderr: {:?}",
            self.stderr
        );
        self
    }
}

/// The binary with `args`, with no REDIS_URL from the environment.
fn command(args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_redhold"));
    command
        .args(args)
        .env_remove("REDIS_URL")
        .env_remove("REDHOLD_PASSWORD")
        .env_remove("REDISCLI_AUTH");
    command
}

/// Runs the binary to completion (stdin empty, not a terminal).
///
/// # Panics
///
/// If it cannot be started or runs longer than a minute.
pub(crate) fn redhold(args: &[&str]) -> Run {
    redhold_with_env(args, &[])
}

/// Runs the binary to completion, as [`redhold`] does, with the variables
/// `env` set.
pub(crate) fn redhold_with_env(args: &[&str], env: &[(&str, &str)]) -> Run {
    let mut child = command(args)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run redhold: {e}"));
    let mut out = child.stdout.take().expect("piped stdout");
    let mut err = child.stderr.take().expect("piped stderr");
    let out_reader = thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let err_reader = thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let deadline = Instant::now() + LIMIT;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < deadline => thread::sleep(Duration::from_millis(10)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("redhold {args:?} still running after {LIMIT:?}; killed");
            }
            Err(e) => panic!("cannot wait for redhold: {e}"),
        }
    };
    Run {
        code: status.code().unwrap_or(-1),
        stdout: out_reader.join().unwrap_or_default(),
        stderr: err_reader.join().unwrap_or_default(),
    }
}

/// A binary left running (`watch`), whose output lines arrive one by one.
/// Killed when dropped.
#[derive(Debug)]
pub(crate) struct Running {
    child: Child,
    lines: Receiver<String>,
}

impl Running {
    /// Starts the binary with `args`.
    pub(crate) fn start(args: &[&str]) -> Running {
        let mut child = command(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run redhold: {e}"));
        let out = child.stdout.take().expect("piped stdout");
        let (tx, lines) = mpsc::channel();
        thread::spawn(move || {
            for line in BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Running { child, lines }
    }

    /// The lines printed until one satisfies `wanted` (included).
    ///
    /// # Panics
    ///
    /// If no such line comes within `limit`.
    #[track_caller]
    pub(crate) fn lines_until(
        &self,
        limit: Duration,
        wanted: impl Fn(&str) -> bool,
    ) -> Vec<String> {
        let deadline = Instant::now() + limit;
        let mut seen = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    let done = wanted(&line);
                    seen.push(line);
                    if done {
                        return seen;
                    }
                }
                Err(_) => panic!("no wanted line within {limit:?}; got:\n{}", seen.join("\n")),
            }
        }
    }

    /// Every line printed within `wait` from now.
    pub(crate) fn lines_for(&self, wait: Duration) -> Vec<String> {
        let deadline = Instant::now() + wait;
        let mut seen = Vec::new();
        while let Ok(line) = self
            .lines
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
        {
            seen.push(line);
        }
        seen
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
