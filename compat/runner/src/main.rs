//! redhold's compat suite: the real Java Redisson client (compat/redisson)
//! and redhold share locks on a throwaway `redis-server` and on a
//! three-master cluster, and every check prints one line.
//!
//! Usage: `redhold-compat --jar compat/redisson/target/redhold-compat-driver.jar
//! [--only TEXT] [--no-cluster]`. Normally run by `compat/redisson/run.sh`.

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
use rust_side::RustSide;
use servers::{Cluster, Server};

/// Both sides' lock watchdog timeout: short, so the watchdog checks take
/// seconds, and long enough that a busy 2-core machine renews in time.
const WATCHDOG: Duration = Duration::from_secs(2);

struct Args {
    jar: PathBuf,
    only: Option<String>,
    cluster: bool,
}

fn args() -> Result<Args, String> {
    let mut jar = None;
    let mut only = None;
    let mut cluster = true;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--jar" => jar = args.next().map(PathBuf::from),
            "--only" => only = args.next(),
            "--no-cluster" => cluster = false,
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    let jar = jar.ok_or("usage: redhold-compat --jar DRIVER.jar [--only TEXT] [--no-cluster]")?;
    Ok(Args { jar, only, cluster })
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
    let only = args.only.as_deref().unwrap_or("");
    if !only.starts_with("cluster") {
        if let Err(e) = single(&args, &mut report) {
            report.record("single setup", Err(e), Duration::ZERO);
        }
    }
    if args.cluster && !only.starts_with("single") {
        if let Err(e) = cluster(&args, &mut report) {
            report.record("cluster setup", Err(e), Duration::ZERO);
        }
    }
    println!("compat suite took {:.1} s", started.elapsed().as_secs_f64());
    println!("{} passed, {} failed", report.passed, report.failed);
    if report.failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn log_path(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("redhold-compat-{}-{name}.log", std::process::id()))
}

/// Every check on one `redis-server`.
fn single(args: &Args, report: &mut Report) -> Result<(), String> {
    let server = Server::start(&[])?;
    let url = server.url();
    let client = redhold::Client::builder()
        .url(&url)
        .watchdog_timeout(WATCHDOG)
        .build()
        .map_err(|e| e.to_string())?;
    let counters = redis::Client::open(url.as_str()).map_err(|e| e.to_string())?;
    let rust = RustSide::new(client, Some(counters));
    let redis = Inspector::single(&url)?;
    let java = JavaDriver::start(
        &args.jar,
        Target::Single(&url),
        WATCHDOG,
        log_path("single"),
    )?;
    println!(
        "# single server on port {}; Redisson client {}; redhold client {}",
        server.port,
        java.id,
        rust.client().id()
    );
    let ctx = Ctx {
        java: &java,
        rust: &rust,
        redis: &redis,
        topo: "single",
        watchdog: WATCHDOG,
    };
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
    checks::differences::run(&ctx, report);
    checks::synchronizers::run(&ctx, report);
    checks::expirable::run(&ctx, report);
    checks::watchdog::run(&ctx, report);
    checks::watchdog::killed_driver(&ctx, report);
    if report.failed > failed_before {
        println!(
            "# last lines of the Java driver's log:\n{}",
            java.log_tail()
        );
    }
    let _ = rust.client().shutdown();
    Ok(())
}

/// Wake-ups across both sides on a 3-master cluster, where Redis 7 makes
/// both clients use sharded pub/sub by default.
fn cluster(args: &Args, report: &mut Report) -> Result<(), String> {
    let cluster = Cluster::start()?;
    let urls = cluster.urls();
    let client = redhold::Client::builder()
        .cluster(urls.clone())
        .watchdog_timeout(WATCHDOG)
        .build()
        .map_err(|e| e.to_string())?;
    let redis = Inspector::cluster(&urls)?;
    // The hammer's counters all carry one hash tag: one node holds them.
    let counters_url = &urls[redis.node_for(checks::COUNTERS_TAG)?];
    let counters = redis::Client::open(counters_url.as_str()).map_err(|e| e.to_string())?;
    let rust = RustSide::new(client, Some(counters));
    let java = JavaDriver::start(
        &args.jar,
        Target::Cluster(&urls),
        WATCHDOG,
        log_path("cluster"),
    )?;
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
    let ctx = Ctx {
        java: &java,
        rust: &rust,
        redis: &redis,
        topo: "cluster",
        watchdog: WATCHDOG,
    };
    let failed_before = report.failed;
    checks::wake::run_each_master(&ctx, report);
    checks::wake::run(&ctx, report);
    checks::wake::run_force(&ctx, report);
    checks::liveness::run(&ctx, report);
    checks::synchronizers::run(&ctx, report);
    checks::expirable::run(&ctx, report);
    if report.failed > failed_before {
        println!(
            "# last lines of the Java driver's log:\n{}",
            java.log_tail()
        );
    }
    let _ = rust.client().shutdown();
    Ok(())
}
