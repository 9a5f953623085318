//! Actors in other processes: the test executable run again as the test
//! `model_child`, with one client slot and a few actor threads, reporting
//! every event to the parent's collector (see `wire`).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use crate::actors::{self, ActorSpec, ClientSlot, Interrupter};
use crate::config::WATCHDOG;
use crate::history::{ActorId, Event, Recorder};
use crate::joins;
use crate::wire::Link;

/// The variable that carries a [`ChildSpec`] to the child.
pub(crate) const CHILD_ENV: &str = "REDHOLD_MODEL_CHILD";
/// The line a child prints when it is done.
pub(crate) const DONE_MARKER: &str = "MODEL-CHILD-DONE";

/// What one child process runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ChildSpec {
    /// The parent's collector.
    pub(crate) addr: SocketAddr,
    /// The schedule's seed.
    pub(crate) seed: u64,
    /// Process number (the parent is 0).
    pub(crate) process: u32,
    /// Actor id of the first thread.
    pub(crate) first_actor: ActorId,
    pub(crate) threads: u32,
    pub(crate) prefix: String,
    /// How long the actors run, from the child's start.
    pub(crate) run_for: Duration,
    /// Every server's URL, the main server's first.
    pub(crate) urls: Vec<String>,
}

impl ChildSpec {
    /// The spec as one environment value.
    pub(crate) fn encode(&self) -> String {
        format!(
            "{};{};{};{};{};{};{};{}",
            self.addr,
            self.seed,
            self.process,
            self.first_actor,
            self.threads,
            self.prefix,
            self.run_for.as_millis(),
            self.urls.join(",")
        )
    }

    /// The spec an environment value stands for.
    pub(crate) fn decode(text: &str) -> Option<ChildSpec> {
        let mut parts = text.split(';');
        Some(ChildSpec {
            addr: parts.next()?.parse().ok()?,
            seed: parts.next()?.parse().ok()?,
            process: parts.next()?.parse().ok()?,
            first_actor: parts.next()?.parse().ok()?,
            threads: parts.next()?.parse().ok()?,
            prefix: parts.next()?.to_owned(),
            run_for: Duration::from_millis(parts.next()?.parse().ok()?),
            urls: parts.next()?.split(',').map(str::to_owned).collect(),
        })
    }
}

/// The child's whole life: actors until the run ends, a clean wind-down,
/// the client shut down, then the done marker on stdout.
pub(crate) fn child_main(spec: ChildSpec) {
    let started = Instant::now();
    let recorder = Recorder::Remote(Arc::new(Link::connect(spec.addr)));
    let prefix: Arc<str> = Arc::from(spec.prefix.as_str());
    let base = format!("p{}.c0", spec.process);
    let slot = match ClientSlot::open(&base, &spec.urls, &prefix, &recorder) {
        Ok(slot) => slot,
        Err(e) => {
            recorder.record(Event::Note {
                text: format!("child {}: cannot build its clients: {e}", spec.process),
            });
            return;
        }
    };
    let stop = Arc::new(AtomicBool::new(false));
    let interrupts = Arc::new(Interrupter::default());
    let interrupter = interrupts.start();
    let crew: Vec<_> = (0..spec.threads)
        .map(|t| {
            actors::spawn(ActorSpec {
                id: spec.first_actor + t,
                label: format!("{base}.t{t}"),
                seed: spec.seed,
                slot: Arc::clone(&slot),
                recorder: recorder.fork(),
                interrupts: Arc::clone(&interrupts),
                stop: Arc::clone(&stop),
                stops_at: Instant::now() + spec.run_for,
                proxy: None,
                may_fork: true,
            })
        })
        .collect();
    thread::sleep(spec.run_for.saturating_sub(started.elapsed()));
    stop.store(true, Ordering::SeqCst);
    interrupts.stop();
    let mut unfinished = joins::wait_for(crew, 2 * WATCHDOG + Duration::from_secs(2));
    if !unfinished.is_empty() {
        // Waiters still blocked: a shutdown wakes them with `Shutdown`.
        slot.shutdown(&recorder);
        unfinished = joins::wait_for(unfinished, Duration::from_secs(5));
        if !unfinished.is_empty() {
            let names: Vec<&str> = unfinished
                .iter()
                .map(|t| t.thread().name().unwrap_or("?"))
                .collect();
            recorder.record(Event::Flag {
                actor: spec.first_actor,
                text: format!(
                    "actor thread(s) {} of child {} still running 5 s after their client \
                     was shut down (a call that never returns)",
                    names.join(", "),
                    spec.process
                ),
            });
        }
    }
    slot.shutdown(&recorder);
    let _ = interrupter.join();
    println!("{DONE_MARKER}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spec_survives_the_environment() {
        let spec = ChildSpec {
            addr: "127.0.0.1:4242".parse().unwrap(),
            seed: u64::MAX,
            process: 2,
            first_actor: 9,
            threads: 3,
            prefix: "model-ab".into(),
            run_for: Duration::from_millis(9500),
            urls: vec!["redis://127.0.0.1:1/".into(), "redis://127.0.0.1:2/".into()],
        };
        assert_eq!(ChildSpec::decode(&spec.encode()), Some(spec));
    }
}
