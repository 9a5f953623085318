//! redhold's compat suite: the real Java Redisson client (compat/redisson)
//! and redhold share locks on a throwaway `redis-server` and on a
//! three-master cluster, and every check prints one line.
//!
//! Usage: `redhold-compat --jar DRIVER.jar --redisson-version V
//! [--only TEXT] [--no-cluster]`. Normally run by `compat/redisson/run.sh`,
//! which builds the driver for Redisson V. Before 3.22, Redisson listens
//! with classic pub/sub on a cluster, so redhold is built with the one
//! setting such a fleet needs there, `sharded_pubsub(false)`; checks of
//! what the release lacks (`RFencedLock` before 3.19) print `n/a`.

mod checks;
mod inspect;
mod java;
mod rust_side;
mod servers;
mod side;
mod sync_side;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use checks::{Ctx, Report};
use inspect::Inspector;
use java::{JavaDriver, Target};
use rust_side::{LostLog, RustSide};
use servers::{Cluster, Server, SENTINEL_MASTER};

/// Both sides' lock watchdog timeout: short, so the watchdog checks take
/// seconds, and long enough that a busy 2-core machine renews in time.
const WATCHDOG: Duration = Duration::from_secs(2);

struct Args {
    jar: PathBuf,
    /// `(major, minor, patch)` of the Redisson release the driver was built with.
    redisson: (u32, u32, u32),
    redisson_label: String,
    only: Option<String>,
    cluster: bool,
    sentinel: bool,
}

/// The first Redisson release whose locks and synchronizers listen with
/// sharded pub/sub on a Redis 7 cluster.
const REDISSON_SHARDED_SINCE: (u32, u32, u32) = (3, 22, 0);
/// The first Redisson release with `RFencedLock`.
const REDISSON_FENCED_SINCE: (u32, u32, u32) = (3, 19, 0);

/// `(major, minor, patch)` of a version like `3.17.7`.
fn parse_version(version: &str) -> Option<(u32, u32, u32)> {
    let mut parts = version.split('.').map(|p| p.parse::<u32>().ok());
    let parsed = (parts.next()??, parts.next()??, parts.next()??);
    parts.next().is_none().then_some(parsed)
}

fn args() -> Result<Args, String> {
    let mut jar = None;
    let mut version = None;
    let mut only = None;
    let mut cluster = true;
    let mut sentinel = true;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--jar" => jar = args.next().map(PathBuf::from),
            "--redisson-version" => version = args.next(),
            "--only" => only = args.next(),
            "--no-cluster" => cluster = false,
            "--no-sentinel" => sentinel = false,
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    const USAGE: &str =
        "usage: redhold-compat --jar DRIVER.jar --redisson-version V [--only TEXT] [--no-cluster] [--no-sentinel]";
    let jar = jar.ok_or(USAGE)?;
    let redisson_label = version.ok_or(USAGE)?;
    let redisson = parse_version(&redisson_label)
        .ok_or_else(|| format!("not a Redisson version: {redisson_label:?}"))?;
    Ok(Args {
        jar,
        redisson,
        redisson_label,
        only,
        cluster,
        sentinel,
    })
}

fn main() -> ExitCode {
    let args = match args() {
        Ok(args) => args,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let started = Instant::now();
    let mut report = Report {
        only: args.only.clone(),
        ..Report::default()
    };
    if args.redisson < REDISSON_FENCED_SINCE {
        report.lacking.push((
            "fenced".into(),
            format!(
                "Redisson {} has no RFencedLock (3.19 and later)",
                args.redisson_label
            ),
        ));
    }
    println!("# Redisson {}", args.redisson_label);
    let only = args.only.as_deref().unwrap_or("");
    if !only.starts_with("cluster") && !only.starts_with("sentinel") {
        if let Err(e) = single(&args, &mut report) {
            report.record("single setup", Err(e), Duration::ZERO);
        }
    }
    if args.cluster && !only.starts_with("single") && !only.starts_with("sentinel") {
        if let Err(e) = cluster(&args, &mut report) {
            report.record("cluster setup", Err(e), Duration::ZERO);
        }
    }
    if args.sentinel && !only.starts_with("single") && !only.starts_with("cluster") {
        if let Err(e) = sentinel(&args, &mut report) {
            report.record("sentinel setup", Err(e), Duration::ZERO);
        }
    }
    println!("compat suite took {:.1} s", started.elapsed().as_secs_f64());
    println!(
        "{} passed, {} failed, {} not in Redisson {}",
        report.passed, report.failed, report.absent, args.redisson_label
    );
    if report.failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn log_path(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("redhold-compat-{}-{name}.log", std::process::id()))
}

/// The two sides on one master at `url`: redhold's client from `builder`
/// (recording the holds it finds lost, for checks::owner; its counters and
/// the inspector on `url`) and the Java driver on `target`.
fn sides(
    args: &Args,
    builder: redhold::ClientBuilder,
    url: &str,
    target: Target<'_>,
    topo: &str,
) -> Result<(JavaDriver, RustSide, Inspector), String> {
    let lost = LostLog::default();
    let client = lost
        .record(builder)
        .watchdog_timeout(WATCHDOG)
        .build()
        .map_err(|e| e.to_string())?;
    let counters = redis::Client::open(url).map_err(|e| e.to_string())?;
    let rust = RustSide::new(client, Some(counters), lost);
    let redis = Inspector::single(url)?;
    let java = JavaDriver::start(&args.jar, target, WATCHDOG, log_path(topo))?;
    Ok((java, rust, redis))
}

/// The checks' context for one topology.
fn ctx<'a>(
    args: &Args,
    (java, rust, redis): (&'a JavaDriver, &'a RustSide, &'a Inspector),
    topo: &'static str,
    sharded: bool,
) -> Ctx<'a> {
    Ctx {
        java,
        rust,
        redis,
        topo,
        watchdog: WATCHDOG,
        redisson: args.redisson,
        java_fenced: java.fenced,
        sharded,
    }
}

/// Prints the Java driver's log when a check of this topology failed, and
/// shuts redhold's client down.
fn finish(java: &JavaDriver, rust: &RustSide, report: &Report, failed_before: usize) {
    if report.failed > failed_before {
        println!(
            "# last lines of the Java driver's log:\n{}",
            java.log_tail()
        );
    }
    let _ = rust.client().shutdown();
}

/// Wake-ups, what each side sees, exclusion and the synchronizers on a
/// master found through a sentinel: both clients ask the sentinel where the
/// master is and use classic pub/sub there (Redisson told to read and
/// subscribe on the master, as there is no replica).
fn sentinel(args: &Args, report: &mut Report) -> Result<(), String> {
    let master = Server::start(&[])?;
    let sentinel = Server::start_sentinel(master.port)?;
    let sentinel_url = sentinel.url();
    let builder = redhold::Client::builder().sentinel([sentinel_url.as_str()], SENTINEL_MASTER);
    let target = Target::Sentinel(&sentinel_url, SENTINEL_MASTER);
    let (java, rust, redis) = sides(args, builder, &master.url(), target, "sentinel")?;
    println!(
        "# master on port {} behind a sentinel on port {}; Redisson client {}; redhold client {}",
        master.port,
        sentinel.port,
        java.id,
        rust.client().id()
    );
    let ctx = ctx(args, (&java, &rust, &redis), "sentinel", false);
    let failed_before = report.failed;
    checks::status::run(&ctx, report);
    checks::exclusion::run(&ctx, report);
    checks::wake::run(&ctx, report);
    checks::wake::run_force(&ctx, report);
    checks::owner::run(&ctx, report);
    checks::synchronizers::run(&ctx, report);
    checks::expirable::run(&ctx, report);
    finish(&java, &rust, report, failed_before);
    Ok(())
}

/// Every check on one `redis-server`.
fn single(args: &Args, report: &mut Report) -> Result<(), String> {
    let server = Server::start(&[])?;
    let url = server.url();
    let builder = redhold::Client::builder().url(&url);
    let (java, rust, redis) = sides(args, builder, &url, Target::Single(&url), "single")?;
    println!(
        "# single server on port {}; Redisson client {}; redhold client {}",
        server.port,
        java.id,
        rust.client().id()
    );
    let ctx = ctx(args, (&java, &rust, &redis), "single", false);
    let failed_before = report.failed;
    checks::layout::run(&ctx, report);
    checks::status::run(&ctx, report);
    checks::exclusion::run(&ctx, report);
    checks::liveness::run(&ctx, report);
    checks::wake::run(&ctx, report);
    checks::fair::run(&ctx, report);
    checks::read_write::run(&ctx, report);
    checks::fenced::run(&ctx, report);
    checks::wake::run_force(&ctx, report);
    checks::owner::run(&ctx, report);
    checks::differences::run(&ctx, report);
    checks::synchronizers::run(&ctx, report);
    checks::expirable::run(&ctx, report);
    checks::watchdog::run(&ctx, report);
    checks::watchdog::killed_driver(&ctx, report);
    finish(&java, &rust, report, failed_before);
    Ok(())
}

/// Wake-ups across both sides on a 3-master cluster. Redis 7 makes both
/// clients use sharded pub/sub by default, but not every Redisson: before
/// 3.22 it listens classically on any cluster, and 3.22 to 3.27 decide at
/// start by one `SPUBLISH` to one node, which answers MOVED (classic, then)
/// unless it owns slot 0. So the runner first sees how this Redisson
/// listens and gives redhold's client the setting that matches.
fn cluster(args: &Args, report: &mut Report) -> Result<(), String> {
    let cluster = Cluster::start()?;
    let urls = cluster.urls();
    let redis = Inspector::cluster(&urls)?;
    let java = JavaDriver::start(
        &args.jar,
        Target::Cluster(&urls),
        WATCHDOG,
        log_path("cluster"),
    )?;
    let sharded = redisson_listens_sharded(&java, &redis)?;
    let expected = args.redisson >= REDISSON_SHARDED_SINCE;
    println!(
        "# Redisson {} listens with {} on this cluster{}",
        args.redisson_label,
        if sharded { "SSUBSCRIBE" } else { "SUBSCRIBE" },
        if sharded {
            String::new()
        } else {
            format!(
                "{}: redhold runs with sharded_pubsub(false)",
                if expected {
                    " (its start-up probe SPUBLISH went to a node without slot 0)"
                } else {
                    ""
                }
            )
        }
    );
    if sharded && !expected {
        return Err(format!(
            "Redisson {} listens with SSUBSCRIBE; releases before 3.22 have no sharded pub/sub",
            args.redisson_label
        ));
    }
    let builder = |sharded: bool, hear_classic: bool| {
        redhold::Client::builder()
            .cluster(urls.clone())
            .watchdog_timeout(WATCHDOG)
            .sharded_pubsub(sharded)
            .hear_classic_releases(hear_classic)
    };
    let build = |builder: redhold::ClientBuilder| builder.build().map_err(|e| e.to_string());
    let lost = LostLog::default();
    let client = build(lost.record(builder(sharded, false)))?;
    // A second redhold client listening the other way: it must still wake
    // Redisson's waiters, and hear a classic Redisson's releases through
    // hear_classic_releases (checks::wake::run_other_way; the setting
    // changes nothing for a client that listens classically).
    let other_way = build(builder(!sharded, true))?;
    // The hammer's counters all carry one hash tag: one node holds them.
    let counters_url = &urls[redis.node_for(checks::COUNTERS_TAG)?];
    let counters = redis::Client::open(counters_url.as_str()).map_err(|e| e.to_string())?;
    let rust = RustSide::new(client, Some(counters), lost);
    println!(
        "# cluster of {} masters on ports {}; Redisson client {}; redhold client {}",
        redis.node_count(),
        cluster
            .nodes
            .iter()
            .map(|n| n.port.to_string())
            .collect::<Vec<_>>()
            .join(", "),
        java.id,
        rust.client().id()
    );
    let ctx = ctx(args, (&java, &rust, &redis), "cluster", sharded);
    let failed_before = report.failed;
    checks::wake::run_each_master(&ctx, report);
    checks::wake::run(&ctx, report);
    checks::wake::run_force(&ctx, report);
    let other_way = RustSide::new(other_way, None, LostLog::default());
    checks::wake::run_other_way(&ctx, &other_way, report);
    checks::owner::run(&ctx, report);
    checks::liveness::run(&ctx, report);
    checks::synchronizers::run(&ctx, report);
    checks::expirable::run(&ctx, report);
    finish(&java, &rust, report, failed_before);
    Ok(())
}

/// Whether `java` listens with sharded pub/sub: a Java waiter parked on a
/// lock Java holds, and the kind of its subscription.
fn redisson_listens_sharded(java: &JavaDriver, redis: &Inspector) -> Result<bool, String> {
    use side::{Kind, Side};
    let name = "compat:cluster:probe-pubsub";
    let channel = checks::prefixed("redisson_lock__channel", name);
    java.lock("probe/h", Kind::Plain, name, Some(checks::LONG_LEASE))
        .wait(checks::T)?;
    let waiter = java.lock("probe/w", Kind::Plain, name, None);
    let deadline = Instant::now() + checks::T;
    let counts = loop {
        let counts = redis.subscribers(&channel)?;
        if counts.0 + counts.1 > 0 {
            break counts;
        }
        if Instant::now() > deadline {
            return Err(format!("the probe waiter never subscribed to {channel}"));
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    java.unlock("probe/h", Kind::Plain, name).wait(checks::T)?;
    waiter.wait(checks::T)?;
    java.unlock("probe/w", Kind::Plain, name).wait(checks::T)?;
    Ok(counts.1 > 0)
}
