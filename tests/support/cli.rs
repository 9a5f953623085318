//! Running a helper program (`redis-cli`, `openssl`) with a time limit.

use std::io::Read;
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

/// What a bounded command printed.
#[derive(Debug)]
pub(crate) struct Output {
    /// Whether it exited with status 0.
    pub(crate) status_ok: bool,
    /// Its standard output.
    pub(crate) stdout: String,
    /// Its standard error.
    pub(crate) stderr: String,
}

/// Runs `command` to completion, killing it (and failing) after `limit`.
///
/// # Panics
///
/// If the program cannot be run or runs longer than `limit`.
pub(crate) fn run_bounded(mut command: Command, limit: Duration, what: &str) -> Output {
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {what}: {e} (is it installed?)"));
    // Read both pipes on threads, so a chatty child cannot block on a full pipe.
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
    let deadline = Instant::now() + limit;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < deadline => thread::sleep(Duration::from_millis(10)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("{what} still running after {limit:?}; killed");
            }
            Err(e) => panic!("cannot wait for {what}: {e}"),
        }
    };
    Output {
        status_ok: status.success(),
        stdout: out_reader.join().unwrap_or_default(),
        stderr: err_reader.join().unwrap_or_default(),
    }
}
