//! The checks, and what they share: the two sides, the servers, the report.

pub mod differences;
pub mod exclusion;
pub mod expirable;
pub mod fair;
pub mod fenced;
pub mod layout;
pub mod liveness;
pub mod owner;
pub mod read_write;
pub mod status;
pub mod synchronizers;
pub mod wake;
pub mod watchdog;

use std::fmt::Display;
use std::io::Write;
use std::panic::{self, AssertUnwindSafe};
use std::thread;
use std::time::{Duration, Instant};

use crate::inspect::Inspector;
use crate::java::JavaDriver;
use crate::rust_side::RustSide;
use crate::side::{Kind, Pending, Side};

/// How long one command may take to answer when nothing should block it.
pub const T: Duration = Duration::from_secs(10);

/// A lease long enough that a waiter woken by the lock's TTL, not by the
/// release message, would be obvious.
pub const LONG_LEASE: u64 = 60_000;

/// A wake-up slower than this was not the release message.
pub const WAKE_LIMIT_US: u64 = 50_000;

/// The hash tag of every hammer counter's key: on a cluster they all live
/// on the node that serves it, which redhold's side connects to.
pub const COUNTERS_TAG: &str = "{compat-counters}";

/// Everything a check needs, for one topology.
pub struct Ctx<'a> {
    pub java: &'a JavaDriver,
    pub rust: &'a RustSide,
    pub redis: &'a Inspector,
    /// `single` or `cluster`: part of every lock name and check line.
    pub topo: &'static str,
    /// Both sides' watchdog timeout.
    pub watchdog: Duration,
    /// The Redisson release the driver runs, `(major, minor, patch)`.
    pub redisson: (u32, u32, u32),
    /// Whether this Redisson release has `RFencedLock` (3.19 and later).
    pub java_fenced: bool,
    /// On a cluster, whether both sides listen with sharded pub/sub
    /// (Redisson 3.22 and later, redhold's default) or both classically
    /// (older Redisson, and redhold told `sharded_pubsub(false)`).
    pub sharded: bool,
}

impl Ctx<'_> {
    /// `(java, rust)` and `(rust, java)`: every directional check runs twice.
    pub fn directions(&self) -> [(&dyn Side, &dyn Side); 2] {
        [(self.java, self.rust), (self.rust, self.java)]
    }

    /// A lock name of its own for `check`.
    pub fn name(&self, check: &str) -> String {
        format!("compat:{}:{check}", self.topo)
    }

    /// Waits until the waiter behind `pending` is subscribed to the channel
    /// that announces releases of `name` for `kind` and has not got the
    /// lock; then it is parked. Returns `(classic, sharded)` subscriber
    /// counts. On a cluster the waiter must listen as [`Ctx::sharded`] says.
    pub fn wait_parked(
        &self,
        kind: Kind,
        name: &str,
        pending: &mut Pending,
    ) -> Result<(i64, i64), String> {
        let deadline = Instant::now() + T;
        let channel = loop {
            if let Some(channel) = self.wait_channel(kind, name)? {
                break channel;
            }
            if pending.is_done() || Instant::now() > deadline {
                return Err(format!("the {} waiter never queued", kind.word()));
            }
            thread::sleep(Duration::from_millis(5));
        };
        let counts = loop {
            let (classic, sharded) = self.redis.subscribers(&channel)?;
            if classic + sharded > 0 {
                break (classic, sharded);
            }
            if pending.is_done() {
                return Err("the waiter got the lock while it was held".into());
            }
            if Instant::now() > deadline {
                return Err(format!("nobody subscribed to {channel} within {T:?}"));
            }
            thread::sleep(Duration::from_millis(5));
        };
        // Let it finish its attempt after subscribing and go to sleep.
        thread::sleep(Duration::from_millis(100));
        if pending.is_done() {
            return Err("the waiter got the lock while it was held".into());
        }
        self.listens_as_expected(&channel, counts)?;
        Ok(counts)
    }

    /// Fails unless, on a cluster, the `(classic, sharded)` subscribers of
    /// `channel` all listen the one way [`Ctx::sharded`] says.
    pub fn listens_as_expected(&self, channel: &str, counts: (i64, i64)) -> Result<(), String> {
        let (classic, sharded) = counts;
        let (expected, wrong) = if self.sharded {
            ("SSUBSCRIBE", sharded == 0 || classic != 0)
        } else {
            ("SUBSCRIBE", classic == 0 || sharded != 0)
        };
        if self.redis.is_cluster() && wrong {
            return Err(format!(
                "on the cluster waiters should listen with {expected} only; \
                 {channel} has {classic} classic and {sharded} sharded subscribers"
            ));
        }
        Ok(())
    }

    /// The channel a waiter for `kind` on `name` listens to; for a fair
    /// lock, the head waiter's own channel, once someone is queued.
    fn wait_channel(&self, kind: Kind, name: &str) -> Result<Option<String>, String> {
        Ok(match kind {
            Kind::Plain | Kind::Fenced => Some(prefixed("redisson_lock__channel", name)),
            Kind::Read | Kind::Write => Some(prefixed("redisson_rwlock", name)),
            Kind::Multi => {
                let first = name.split(',').next().unwrap_or(name);
                Some(prefixed("redisson_lock__channel", first))
            }
            Kind::Fair => {
                let queue = prefixed("redisson_lock_queue", name);
                let head: Option<String> = self
                    .redis
                    .at(&queue, redis::cmd("LINDEX").arg(&queue).arg(0))?;
                head.map(|h| format!("{}:{h}", prefixed("redisson_lock__channel", name)))
            }
        })
    }

    /// `PTTL name` on the node that serves it.
    pub fn pttl(&self, name: &str) -> Result<i64, String> {
        self.redis.at(name, redis::cmd("PTTL").arg(name))
    }
}

/// Redisson's `prefixName`: `prefix:{name}`, or `prefix:name` when the name
/// already has a hash tag.
pub fn prefixed(prefix: &str, name: &str) -> String {
    if name.contains('{') {
        format!("{prefix}:{name}")
    } else {
        format!("{prefix}:{{{name}}}")
    }
}

/// Milliseconds, for check lines.
pub fn ms(us: u64) -> String {
    format!("{:.1} ms", us as f64 / 1000.0)
}

/// Fails unless `reply` came `within` µs after `since` (wall clock, µs).
pub fn woken_in_time(since_us: u64, woken_us: u64) -> Result<u64, String> {
    let took = woken_us.saturating_sub(since_us);
    if took > WAKE_LIMIT_US {
        return Err(format!(
            "woken {} after the release began: that is a TTL or a poll, not the release message (limit {})",
            ms(took),
            ms(WAKE_LIMIT_US)
        ));
    }
    Ok(took)
}

/// Counts and prints check results, one line each.
#[derive(Default)]
pub struct Report {
    pub passed: usize,
    pub failed: usize,
    /// Checks of what this Redisson release does not have.
    pub absent: usize,
    /// Only checks whose line contains this run.
    pub only: Option<String>,
    /// `(word, why)`: a check whose line contains the word needs something
    /// this Redisson release lacks; it prints `n/a` and why instead of
    /// running.
    pub lacking: Vec<(String, String)>,
}

impl Report {
    /// Whether the check called `title` is selected.
    pub fn wants(&self, title: &str) -> bool {
        self.only
            .as_ref()
            .is_none_or(|o| title.contains(o.as_str()))
    }

    /// Runs `check` (unless filtered out) and prints `ok` or `FAIL` with
    /// its detail. A panic counts as a failure.
    pub fn check(&mut self, title: impl Display, check: impl FnOnce() -> Result<String, String>) {
        let title = title.to_string();
        if !self.wants(&title) {
            return;
        }
        if let Some((_, why)) = self
            .lacking
            .iter()
            .find(|(w, _)| title.contains(w.as_str()))
        {
            self.absent += 1;
            println!("n/a  {title}: {why}");
            let _ = std::io::stdout().flush();
            return;
        }
        let started = Instant::now();
        let outcome = panic::catch_unwind(AssertUnwindSafe(check))
            .unwrap_or_else(|p| Err(format!("panicked: {}", panic_text(&p))));
        self.record(&title, outcome, started.elapsed());
    }

    /// Prints a result computed elsewhere (checks run in parallel).
    pub fn record(&mut self, title: &str, outcome: Result<String, String>, took: Duration) {
        let secs = took.as_secs_f64();
        match outcome {
            Ok(detail) => {
                self.passed += 1;
                println!("ok   {title}: {detail} [{secs:.1} s]");
            }
            Err(why) => {
                self.failed += 1;
                println!("FAIL {title}: {why} [{secs:.1} s]");
            }
        }
        let _ = std::io::stdout().flush();
    }
}

pub fn panic_text(p: &Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<String>()
        .cloned()
        .or_else(|| p.downcast_ref::<&str>().map(|s| (*s).to_owned()))
        .unwrap_or_else(|| "?".into())
}

/// Waits for `pending` and fails unless its reply is `true`.
pub fn expect_true(pending: Pending, what: &str) -> Result<(), String> {
    if pending.wait(T)?.is_true() {
        Ok(())
    } else {
        Err(format!("{what}: false"))
    }
}

/// Waits for `pending` and fails unless its reply is `false`.
pub fn expect_false(pending: Pending, what: &str) -> Result<(), String> {
    if pending.wait(T)?.is_true() {
        Err(format!("{what}: true"))
    } else {
        Ok(())
    }
}
