//! The Java driver process (compat/redisson): started with the real Redisson
//! client, fed one command a line, its answers routed back by id.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use crate::side::{Op, Outcome, Pending, Reply, Side};

/// How long the JVM and Redisson may take to connect (about 2 s here).
const START_TIMEOUT: Duration = Duration::from_secs(60);

type Routes = Arc<Mutex<HashMap<u64, Sender<Outcome>>>>;

/// Where the driver connects.
pub enum Target<'a> {
    Single(&'a str),
    Cluster(&'a [String]),
    /// The sentinels, and the name they know the master by.
    Sentinel(&'a str, &'a str),
}

/// A running Java driver; dropping it kills the JVM.
pub struct JavaDriver {
    child: Mutex<Child>,
    stdin: Mutex<ChildStdin>,
    routes: Routes,
    next_id: AtomicU64,
    /// Redisson's client id, the first half of its holder fields.
    pub id: String,
    /// Whether this Redisson release has `RFencedLock` (3.19 and later).
    pub fenced: bool,
    log: PathBuf,
}

impl JavaDriver {
    /// Starts `java -jar jar` against `target` with `watchdog` as Redisson's
    /// lock watchdog timeout, its stderr going to `log`, and waits for it to
    /// report that it is connected.
    pub fn start(
        jar: &Path,
        target: Target<'_>,
        watchdog: Duration,
        log: PathBuf,
    ) -> Result<JavaDriver, String> {
        let java = std::env::var("JAVA").unwrap_or_else(|_| "java".into());
        let stderr = File::create(&log).map_err(|e| format!("create {}: {e}", log.display()))?;
        let mut command = Command::new(&java);
        // C1 only and the serial collector: a short-lived test driver on a
        // 2-core machine should not spend its CPU compiling and collecting.
        command.args([
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-Xss512k",
            "-Xmx256m",
            "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
            "-jar",
        ]);
        command.arg(jar);
        match target {
            Target::Single(url) => command.args(["--single", url]),
            Target::Cluster(urls) => command.args(["--cluster", &urls.join(",")]),
            Target::Sentinel(url, master) => command.args(["--sentinel", url, "--master", master]),
        };
        command.args(["--watchdog", &watchdog.as_millis().to_string()]);
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .map_err(|e| format!("cannot start {java}: {e} (is a JDK installed?)"))?;
        let stdin = child.stdin.take().ok_or("no stdin")?;
        let stdout = child.stdout.take().ok_or("no stdout")?;

        // The first line says the driver is connected; read it off-thread so
        // a JVM that hangs cannot hang the suite.
        let (ready_tx, ready_rx) = mpsc::channel();
        let routes: Routes = Arc::default();
        let reader_routes = Arc::clone(&routes);
        thread::Builder::new()
            .name("java-replies".into())
            .spawn(move || {
                let mut lines = BufReader::new(stdout).lines();
                let first = lines.next().and_then(|l| l.ok());
                let _ = ready_tx.send(first);
                for line in lines.map_while(Result::ok) {
                    route(&reader_routes, &line);
                }
                // The driver is gone: every waiting command fails at once.
                if let Ok(mut routes) = reader_routes.lock() {
                    routes.clear();
                }
            })
            .map_err(|e| format!("spawn a thread: {e}"))?;
        let first = ready_rx.recv_timeout(START_TIMEOUT).ok().flatten();
        let driver_log = || std::fs::read_to_string(&log).unwrap_or_default();
        // `ready ID fenced=true|false`
        let ready = first.as_deref().and_then(|l| l.strip_prefix("ready "));
        let (id, fenced) = match ready.and_then(|r| r.split_once(" fenced=")) {
            Some((id, fenced)) => (id.to_owned(), fenced == "true"),
            None => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "the Java driver did not start: first line {first:?}\n--- its log ---\n{}",
                    driver_log()
                ));
            }
        };
        Ok(JavaDriver {
            child: Mutex::new(child),
            stdin: Mutex::new(stdin),
            routes,
            next_id: AtomicU64::new(1),
            id,
            fenced,
            log,
        })
    }

    /// Kills the JVM at once (SIGKILL: no shutdown hooks, no unlocks).
    pub fn kill(&self) {
        if let Ok(mut child) = self.child.lock() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// The driver's stderr so far, for failure reports.
    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }
}

/// Hands one answer line, `ID ok START END [DATA]` or `ID err MESSAGE`, to
/// whoever waits for that id.
fn route(routes: &Routes, line: &str) {
    let mut words = line.splitn(3, ' ');
    let (Some(id), Some(status)) = (words.next(), words.next()) else {
        return;
    };
    let Ok(id) = id.parse::<u64>() else { return };
    let rest = words.next().unwrap_or("");
    let outcome = if status == "ok" {
        let mut parts = rest.splitn(3, ' ');
        let start_us = parts.next().and_then(|w| w.parse().ok()).unwrap_or(0);
        let end_us = parts.next().and_then(|w| w.parse().ok()).unwrap_or(0);
        let data = parts.next().unwrap_or("").to_owned();
        Ok(Reply {
            start_us,
            end_us,
            data,
        })
    } else {
        Err(format!("Redisson: {rest}"))
    };
    let sender = routes.lock().ok().and_then(|mut r| r.remove(&id));
    if let Some(sender) = sender {
        let _ = sender.send(outcome);
    }
}

impl Side for JavaDriver {
    fn label(&self) -> &'static str {
        "java"
    }

    fn call(&self, slot: &str, op: Op) -> Pending {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let line = format!("{id} {slot} {}\n", op.words().join(" "));
        let (tx, rx) = mpsc::channel();
        let what = format!("java {slot}: {}", line.trim_end());
        if let Ok(mut routes) = self.routes.lock() {
            routes.insert(id, tx);
        }
        let written = self
            .stdin
            .lock()
            .map_err(|_| "poisoned".to_owned())
            .and_then(|mut s| s.write_all(line.as_bytes()).map_err(|e| e.to_string()));
        if let Err(e) = written {
            // Dropping the route's sender makes the wait fail at once.
            if let Ok(mut routes) = self.routes.lock() {
                routes.remove(&id);
            }
            return Pending::new(format!("{what} (not sent: {e})"), rx);
        }
        Pending::new(what, rx)
    }
}

impl Drop for JavaDriver {
    fn drop(&mut self) {
        self.kill();
        // Its tail was printed if a check failed.
        let _ = std::fs::remove_file(&self.log);
    }
}
