//! One schedule: three fresh servers, the client slots and their actors
//! (some in child processes), the fault thread, a clean wind-down, the
//! oracle's verdict, and the end-state check, which runs in the background
//! while the next schedule starts.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::actors::{self, ActorSpec, ClientSlot, Interrupter};
use crate::child::ChildTest;
use crate::children::{ChildSpec, CHILD_ENV, DONE_MARKER};
use crate::config::{
    Spec, CHILDREN, LATCH_TTL, LOCAL_CLIENTS, LOCAL_CLIENTS_WITH_CHILDREN, THREADS_PER_CLIENT,
    WATCHDOG,
};
use crate::fault_proxy::FaultProxy;
use crate::faults;
use crate::history::{ActorId, Event, History, Recorder, Stamped};
use crate::joins;
use crate::leftovers;
use crate::model::Model;
use crate::oracle::{self, Class, Violation};
use crate::owners;
use crate::report;
use crate::rng::Rng;
use crate::support::{server_version, RedisServer};

/// `1`: print every violation in full.
const VERBOSE_ENV: &str = "REDHOLD_MODEL_VERBOSE";
/// A directory: write each schedule's whole history there, one event a line.
const DUMP_ENV: &str = "REDHOLD_MODEL_DUMP";

/// Servers per schedule: the main one, and two more for red locks.
const SERVERS: usize = 3;

/// The owner driven by tasks, on client slot `p0.a0` of its own.
const TASKS_LABEL: &str = "p0.a0.o0";

/// What a schedule found.
#[derive(Debug)]
pub(crate) struct Outcome {
    pub(crate) spec: Spec,
    /// One line: seed, mode, actors, operations, holds, faults, violations.
    pub(crate) summary: String,
    /// Every violation rendered with its details and history excerpt.
    pub(crate) report: String,
    /// `(class, rule, title)` of every violation.
    pub(crate) found: Vec<(Class, &'static str, String)>,
    /// Seconds from the schedule's start to its first violation.
    pub(crate) first_violation: Option<f64>,
    /// The first violation of each likely cause: `([cause] rule on kind,
    /// seconds into the schedule, acquire calls made before it)`.
    pub(crate) firsts: Vec<(String, f64, u64)>,
    pub(crate) ops: u64,
    /// The end-state check, still running: its problems.
    pub(crate) leftovers: Option<JoinHandle<Vec<String>>>,
}

/// Runs the schedule `spec` and judges it.
///
/// # Panics
///
/// When its servers or first clients cannot be started (the machine, not
/// the library, is broken then).
pub(crate) fn run(spec: &Spec) -> Outcome {
    let mode = spec.mode();
    let servers: Vec<Arc<Mutex<RedisServer>>> = (0..SERVERS)
        .map(|_| {
            Arc::new(Mutex::new(RedisServer::start_with_args(
                server_version().debug_command_args(),
            )))
        })
        .collect();
    // The main server is reached through a fault proxy (see
    // `fault_proxy.rs`), which actors arm to lose a release's first
    // attempt; the checker itself looks at the servers directly.
    let server_urls: Vec<String> = servers.iter().map(|s| s.lock().url()).collect();
    let proxy = FaultProxy::start(servers[0].lock().port());
    let mut urls = server_urls.clone();
    urls[0] = proxy.url();
    let prefix: Arc<str> = Arc::from(format!("model-{:08x}", spec.seed as u32).as_str());
    let history = Arc::new(History::new());
    let recorder = Recorder::Local(Arc::clone(&history));
    let stop = Arc::new(AtomicBool::new(false));
    let interrupts = Arc::new(Interrupter::default());
    let interrupter = interrupts.start();

    let local_clients = if mode.children {
        LOCAL_CLIENTS_WITH_CHILDREN
    } else {
        LOCAL_CLIENTS
    };
    let slots: Vec<Arc<ClientSlot>> = (0..local_clients)
        .map(|c| {
            ClientSlot::open(&format!("p0.c{c}"), &urls, &prefix, &recorder)
                .unwrap_or_else(|e| panic!("model: cannot build client p0.c{c}: {e}"))
        })
        .collect();
    // The owners' own client: only its task thread uses it.
    let tasks_slot = ClientSlot::open("p0.a0", &urls, &prefix, &recorder)
        .unwrap_or_else(|e| panic!("model: cannot build client p0.a0: {e}"));
    let mut crew = Vec::new();
    // Before the run phase's start below: a little early.
    let stops_at = Instant::now() + spec.run_for;
    for (c, slot) in slots.iter().enumerate() {
        for t in 0..THREADS_PER_CLIENT {
            crew.push(actors::spawn(ActorSpec {
                id: (c * THREADS_PER_CLIENT + t) as ActorId,
                label: format!("p0.c{c}.t{t}"),
                seed: spec.seed,
                slot: Arc::clone(slot),
                recorder: recorder.clone(),
                interrupts: Arc::clone(&interrupts),
                stop: Arc::clone(&stop),
                stops_at,
                proxy: Some(proxy.arming()),
                may_fork: false,
            }));
        }
    }
    // One owner driven from threads of one of the slots' clients, one
    // driven by tasks on a client of its own (`owners.rs`).
    let crew_slot = Rng::stream(spec.seed, 20_000).below(slots.len() as u64) as usize;
    let crew_label = format!("p0.c{crew_slot}.o0");
    crew.push(owners::spawn_crew(owners::CrewSpec {
        id: owners::CREW_ACTOR,
        label: crew_label.clone(),
        seed: spec.seed,
        slot: Arc::clone(&slots[crew_slot]),
        others: slots
            .iter()
            .enumerate()
            .filter(|(c, _)| *c != crew_slot)
            .map(|(_, s)| Arc::clone(s))
            .collect(),
        recorder: recorder.clone(),
        interrupts: Arc::clone(&interrupts),
        stop: Arc::clone(&stop),
        stops_at,
        proxy: Some(proxy.arming()),
        direct: server_urls[0].clone(),
    }));
    crew.push(owners::spawn_tasks(owners::TasksSpec {
        id: owners::TASKS_ACTOR,
        label: TASKS_LABEL.into(),
        seed: spec.seed,
        slot: Arc::clone(&tasks_slot),
        others: slots.clone(),
        recorder: recorder.clone(),
        interrupts: Arc::clone(&interrupts),
        stop: Arc::clone(&stop),
        stops_at,
        proxy: Some(proxy.arming()),
        direct: server_urls[0].clone(),
    }));
    let slots: Vec<Arc<ClientSlot>> = slots.into_iter().chain([tasks_slot]).collect();
    let collector = mode
        .children
        .then(|| crate::wire::Collector::start(Arc::clone(&history)));
    let mut kids: Vec<ChildTest> = Vec::new();
    if let Some(collector) = &collector {
        for p in 0..CHILDREN {
            let child = ChildSpec {
                addr: collector.addr,
                seed: spec.seed,
                process: (p + 1) as u32,
                first_actor: ((local_clients + p) * THREADS_PER_CLIENT) as ActorId,
                threads: THREADS_PER_CLIENT as u32,
                prefix: prefix.to_string(),
                run_for: spec.run_for,
                urls: urls.clone(),
            };
            kids.push(ChildTest::spawn(
                "model_child",
                &[(CHILD_ENV, child.encode().as_str())],
            ));
        }
    }
    let started = Instant::now();
    let fault_thread = mode.faults.then(|| {
        let servers = servers.clone();
        let recorder = recorder.clone();
        let rng = Rng::stream(spec.seed, 10_000);
        let until = started + spec.run_for.saturating_sub(Duration::from_millis(300));
        thread::Builder::new()
            .name("model-faults".into())
            .spawn(move || faults::run(&servers, rng, &recorder, until))
            .expect("spawn the fault thread")
    });

    thread::sleep(spec.run_for);
    stop.store(true, Ordering::SeqCst);
    interrupts.stop();

    // Wind down: actors release everything; blocked waiters are woken by
    // a shutdown if they do not get their lock in time.
    let mut robustness: Vec<String> = Vec::new();
    let mut unfinished = joins::wait_for(crew, 2 * WATCHDOG + Duration::from_secs(2));
    if !unfinished.is_empty() {
        if !shut_down(&slots, &recorder) {
            robustness.push("Client::shutdown did not return within 15 s".into());
        }
        unfinished = joins::wait_for(unfinished, Duration::from_secs(3));
        if !unfinished.is_empty() {
            let names: Vec<String> = unfinished
                .iter()
                .map(|t| t.thread().name().unwrap_or("?").to_owned())
                .collect();
            robustness.push(format!(
                "actor thread(s) {} still running 3 s after their clients were shut down \
                 (a call that never returns; see the last `call` of each in the history)",
                names.join(", ")
            ));
        }
    }
    for (p, kid) in kids.iter_mut().enumerate() {
        let limit = 2 * WATCHDOG + Duration::from_secs(12);
        if kid.wait_for_line(DONE_MARKER, limit).is_none() {
            robustness.push(format!(
                "child process {} did not finish its wind-down within {limit:?}",
                p + 1
            ));
        }
        match kid.exited_within(Duration::from_secs(5)) {
            Some(status) if status.success() => {}
            Some(status) => {
                robustness.push(format!("child process {} exited with {status}", p + 1))
            }
            None => robustness.push(format!("child process {} did not exit", p + 1)),
        }
    }
    drop(kids);
    let fault_summary =
        fault_thread.map(|t| match joins::join_within(t, Duration::from_secs(20)) {
            Some(Ok(summary)) => summary,
            Some(Err(_)) => {
                robustness.push("the fault thread panicked".into());
                "panicked".into()
            }
            None => {
                robustness.push("the fault thread did not stop within 20 s".into());
                "unfinished".into()
            }
        });
    for server in &servers {
        let mut server = server.lock();
        if !server.is_running() {
            server.start_again();
        }
    }
    if !shut_down(&slots, &recorder) {
        robustness.push("Client::shutdown did not return within 15 s".into());
    }
    if joins::join_within(interrupter, Duration::from_secs(5)).is_none() {
        robustness.push("the interrupter thread did not stop".into());
    }
    if let Some(collector) = collector {
        collector.finish(Duration::from_secs(2));
    }
    let all_down = Instant::now();
    let proxy_summary = proxy.summary();
    drop(proxy);

    let events = history.snapshot();
    let model = Model::build(&events, history.t0, &prefix);
    if let Ok(dir) = std::env::var(DUMP_ENV) {
        let path = std::path::Path::new(&dir).join(format!("history-{}.txt", spec.seed));
        let text: String = events
            .iter()
            .map(|e| report::render_event(&model, e.at, &e.event) + "\n")
            .collect();
        if let Err(e) = std::fs::write(&path, text) {
            eprintln!("model: cannot write {}: {e}", path.display());
        }
    }
    let verdict = oracle::judge(&model);
    let mut violations = verdict.violations;
    for text in robustness {
        violations.push(Violation {
            class: Class::Robustness,
            rule: "hang",
            title: text,
            details: Vec::new(),
            at: model.end,
            names: Vec::new(),
            actors: Vec::new(),
            holds: Vec::new(),
        });
    }

    for v in violations.iter_mut().filter(|v| v.rule == "hang") {
        v.details = hung_calls(&model, &events, &v.title);
    }
    let report = render_all(&model, &events, &violations);
    let first_violation = violations
        .iter()
        .map(|v| v.at.saturating_duration_since(model.t0).as_secs_f64())
        .reduce(f64::min);
    let found = violations
        .iter()
        .map(|v| (v.class, v.rule, v.title.clone()))
        .collect();
    let firsts = firsts(&model, &events, &violations);
    let excused = if verdict.excused.is_empty() {
        "none".to_owned()
    } else {
        verdict
            .excused
            .iter()
            .map(|(reason, n)| format!("{n}× {reason}"))
            .collect::<Vec<_>>()
            .join("; ")
    };
    let mut misses: Vec<String> = model
        .misses
        .iter()
        .filter(|(k, _)| k.as_str() != "busy")
        .map(|(k, n)| format!("{k} {n}"))
        .collect();
    misses.sort();
    let (direct_handoffs, courtesy_pauses) = crate::targets::take_handoff_counts();
    let summary = format!(
        "schedule {} seed={} mode={}: {} actors, {} ops, {} acquires, {} holds, acquires \
         ending otherwise [{}], probes {} checked/{} skipped, faults [{}], proxy [{}], direct hand-overs \
         in this process {}, courtesy pauses {}, shutdowns scanned {} (hashes with fields {}, \
         thread numbers known {}), long leases {}, forks dropping a client {}, partitioned \
         releases {}, stalled members {}, releases in flight {}, undos in flight {}, owner rounds {} \
         ({} holds of the owner on threads, {} faults on its requests), async rests {} ({} holds \
         of the owner on tasks, {} faults on its requests, futures dropped [{}]), {} \
         violation(s); \
         excused: {}",
        spec.index,
        spec.seed,
        mode,
        model.labels.len(),
        model.ops,
        model.calls,
        model.holds.len(),
        misses.join(", "),
        verdict.probes_checked,
        verdict.probes_skipped,
        fault_summary.unwrap_or_else(|| "none".into()),
        proxy_summary,
        direct_handoffs,
        courtesy_pauses,
        model.gone.len(),
        model.remains.len(),
        model.tids.len(),
        model
            .holds
            .iter()
            .filter(|h| h.lease.is_some_and(|l| l.as_millis() >= u128::from(crate::config::LONG_LEASE_MS.0)))
            .count(),
        model.gone.keys().filter(|c| c.contains(".f")).count(),
        events
            .iter()
            .filter(|e| matches!(&e.event, Event::Note { text } if text.contains(actors::PARTITIONED)))
            .count(),
        events
            .iter()
            .filter(|e| matches!(&e.event, Event::Note { text } if text.contains(actors::STALLED_MEMBER)))
            .count(),
        events
            .iter()
            .filter(|e| matches!(&e.event, Event::Note { text } if text.contains(actors::RELEASE_IN_FLIGHT)))
            .count(),
        events
            .iter()
            .filter(|e| matches!(&e.event, Event::Note { text } if text.contains(actors::UNDO_IN_FLIGHT)))
            .count(),
        events
            .iter()
            .filter(|e| matches!(&e.event, Event::Note { text } if text.contains(owners::OWNER_ROUND)))
            .count(),
        model.holds_of(owners::CREW_ACTOR).count(),
        owner_faults(&events, &crew_label),
        events
            .iter()
            .filter(|e| matches!(&e.event, Event::Note { text } if text.contains(owners::ASYNC_REST)))
            .count(),
        model.holds_of(owners::TASKS_ACTOR).count(),
        owner_faults(&events, TASKS_LABEL),
        dropped_futures(&events),
        violations.len(),
        excused
    );

    let clients = client_ids(&events);
    let dead_waits: Vec<leftovers::DeadWait> = model
        .waits
        .iter()
        .filter(|w| w.kind == crate::targets::Kind::Fair)
        .filter(|w| {
            // Waiting when its client was shut down, or ended by an error
            // (the give-up may have failed too).
            let cut =
                w.outcome == "shutdown" && model.downs.get(&w.client).is_some_and(|d| w.start < *d);
            cut || w.outcome == "unfinished" || w.outcome.starts_with("error")
        })
        .map(|w| {
            (
                w.client.clone(),
                w.names[0].clone(),
                format!(
                    "{} in {} on fair {} from {} to {}, which ended with {}",
                    model.label(w.actor),
                    w.method,
                    w.names[0],
                    model.time(w.start),
                    model.time(w.end),
                    w.outcome
                ),
            )
        })
        .collect();
    let leftovers = {
        let prefix = prefix.to_string();
        // A key left with the longest lease (or watchdog timeout) any
        // actor asks for lives longest (config::LONGEST_TTL).
        let deadline = all_down + LATCH_TTL + crate::config::LONGEST_TTL;
        thread::Builder::new()
            .name("model-leftovers".into())
            .spawn(move || {
                let problems =
                    leftovers::check(&server_urls, &prefix, deadline, &clients, &dead_waits);
                drop(servers);
                problems
            })
            .expect("spawn the end-state check")
    };
    Outcome {
        spec: spec.clone(),
        summary,
        report,
        found,
        first_violation,
        firsts,
        ops: model.ops,
        leftovers: Some(leftovers),
    }
}

/// Shuts every slot's clients down, from a thread of its own so that a
/// shutdown that never returns is reported instead of hanging the test;
/// false when it did not return within 15 s.
fn shut_down(slots: &[Arc<ClientSlot>], recorder: &Recorder) -> bool {
    let (slots, recorder) = (slots.to_vec(), recorder.clone());
    let closing = thread::Builder::new()
        .name("model-shutdown".into())
        .spawn(move || {
            for slot in &slots {
                slot.shutdown(&recorder);
            }
        })
        .expect("spawn the shutdown thread");
    joins::join_within(closing, Duration::from_secs(15)).is_some()
}

/// Every violation, grouped by rule; at most a few of each rule in full
/// (all with `REDHOLD_MODEL_VERBOSE=1`).
fn render_all(model: &Model, events: &[Stamped], violations: &[Violation]) -> String {
    let full_per_rule = if std::env::var(VERBOSE_ENV).is_ok_and(|v| v == "1") {
        usize::MAX
    } else {
        3
    };
    let mut shown: HashMap<&str, usize> = HashMap::new();
    let mut out = String::new();
    for v in violations {
        let n = shown.entry(v.rule).or_default();
        *n += 1;
        if *n <= full_per_rule {
            out.push_str(&report::render(model, events, v));
        } else {
            out.push_str(&format!("[{}] {}\n", v.class.as_str(), v.title));
        }
    }
    out
}

/// The first violation of each likely cause (with its rule and lock kind).
fn firsts(model: &Model, events: &[Stamped], violations: &[Violation]) -> Vec<(String, f64, u64)> {
    let mut firsts: Vec<(String, f64, u64)> = Vec::new();
    for v in violations {
        let causes = report::causes(&v.details);
        let kind = v
            .holds
            .first()
            .and_then(|id| model.by_id.get(id))
            .map(|&i| model.holds[i].kind.as_str())
            .unwrap_or("-");
        let cause = causes.first().copied().unwrap_or("no known pattern");
        if firsts
            .iter()
            .any(|(k, _, _)| k.starts_with(&format!("[{cause}]")))
        {
            continue;
        }
        let key = format!("[{cause}] {} on {kind}", v.rule);
        let calls = events
            .iter()
            .take_while(|e| e.at <= v.at)
            .filter(|e| matches!(e.event, Event::Call { .. }))
            .count() as u64;
        let secs = v.at.saturating_duration_since(model.t0).as_secs_f64();
        firsts.push((key, secs, calls));
    }
    firsts
}

/// The last acquire call of each actor named in `title` (`model-<label>`).
fn hung_calls(model: &Model, events: &[Stamped], title: &str) -> Vec<String> {
    let mut lines = Vec::new();
    for (actor, label) in &model.labels {
        if !title.contains(&format!("model-{label},"))
            && !title.contains(&format!("model-{label} "))
        {
            continue;
        }
        let last = events.iter().rev().find_map(|e| match &e.event {
            Event::Call {
                actor: a,
                kind,
                names,
                method,
                ..
            } if a == actor => Some((e.at, kind.as_str(), names.clone(), method.clone())),
            _ => None,
        });
        if let Some((at, kind, names, method)) = last {
            lines.push(format!(
                "{label}: last call {method} on {kind} {names} at {}",
                model.time(at)
            ));
        }
    }
    lines.sort();
    lines
}

/// The faults the proxy did to the requests of the owner labelled `label`.
fn owner_faults(events: &[Stamped], label: &str) -> usize {
    let start = format!("{label}: {}", owners::OWNER_FAULT);
    events
        .iter()
        .filter(|e| matches!(&e.event, Event::Note { text } if text.starts_with(&start)))
        .count()
}

/// How the task thread's dropped futures were dropped: `dropped-parked 4,
/// dropped-pending 12, …`.
fn dropped_futures(events: &[Stamped]) -> String {
    let mut counts: std::collections::BTreeMap<&str, u64> = std::collections::BTreeMap::new();
    for e in events {
        if let Event::Miss { actor, outcome, .. } = &e.event {
            if *actor == owners::TASKS_ACTOR && outcome.starts_with("dropped") {
                *counts.entry(outcome.as_str()).or_default() += 1;
            }
        }
    }
    counts
        .iter()
        .map(|(how, n)| format!("{how} {n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `client UUID → client tag`, for naming the owners of leftover keys.
fn client_ids(events: &[Stamped]) -> HashMap<String, String> {
    let mut ids = HashMap::new();
    for e in events {
        if let Event::ClientUp { client, ids: list } = &e.event {
            for (i, id) in list.split(',').enumerate() {
                let tag = if i == 0 {
                    client.clone()
                } else {
                    format!("{client}/s{i}")
                };
                ids.insert(id.to_owned(), tag);
            }
        }
    }
    ids
}
