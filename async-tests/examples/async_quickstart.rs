//! redhold from async code, on tokio: request handlers that take a lock
//! with `lock_async().await`, hold it across an `.await` (a call to some
//! other service) and release it; a handler that waits a bounded time and
//! gives up; and a job whose hold belongs to an `Owner`, taken in one task
//! and released in another.
//!
//! Run it with `cargo run -p redhold-async-tests --example async_quickstart`.
//! It uses `REDIS_URL` when set, else `redis://127.0.0.1:6379/`; when
//! nothing answers there it starts a throwaway `redis-server` from PATH on
//! a free port and stops it at the end.
//!
//! Nothing here blocks the runtime: the lock's Redis calls run on the
//! client's own threads, and a waiting handler is a parked task, not a
//! thread. Only building the client (it connects) and the throwaway
//! server's start and stop block, once, before and after the handlers.

use std::error::Error;
use std::fmt::Display;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

#[path = "../../examples/support/mod.rs"]
mod support;

use redhold::{Client, Owner};

type BoxResult<T> = Result<T, Box<dyn Error + Send + Sync>>;

#[tokio::main]
async fn main() {
    if let Err(e) = run().await {
        eprintln!("\nasync_quickstart failed: {e}");
        std::process::exit(1);
    }
}

async fn run() -> BoxResult<()> {
    start();
    // Dropped last, after the client: it stops a throwaway server.
    let (url, _server) = support::pick_server("async_quickstart").map_err(|e| e.to_string())?;
    say("main", format_args!("connecting to {url}"));
    let client = Client::open(&url)?;
    // Names unique to this run, so that a lock left behind by a killed
    // earlier run (it expires within 30 s) cannot get in the way.
    let order = format!("async_quickstart:{}:order-42", std::process::id());

    heading(&format!("1. Three handlers, one order ({order})"));
    let handlers: Vec<_> = ["alice", "bob"]
        .into_iter()
        .map(|who| tokio::spawn(handle_order(client.clone(), order.clone(), who)))
        .collect();
    // A third that will not wait longer than 200 ms.
    tokio::time::sleep(Duration::from_millis(50)).await;
    let lock = client.lock(order.as_str());
    match lock.try_lock_for_async(Duration::from_millis(200)).await? {
        Some(_guard) => say("carol", "got it within 200 ms?!"),
        None => say(
            "carol",
            "busy for 200 ms: gave up (the future just ends with None)",
        ),
    }
    for handler in handlers {
        handler.await??;
    }

    heading("2. A job's hold, taken in one task, released in another");
    let job = client.lock(format!("{order}:job")).for_owner(Owner::new());
    let guard = job.lock_async().await?;
    // The same owner re-enters from another task: its holds, not a task's.
    let again = tokio::spawn({
        let job = job.clone();
        async move { job.try_lock_async().await }
    })
    .await??
    .ok_or("the owner could not re-enter its own lock")?;
    say("job", format_args!("holds: {}", hold_count(&job).await?));
    again.unlock_async().await?;
    // The guard moves into another task, which releases it there.
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        say("job", "finishing on another task");
        guard.unlock_async().await
    })
    .await??;
    say(
        "job",
        format_args!("holds after both releases: {}", hold_count(&job).await?),
    );

    tokio::task::spawn_blocking(move || client.shutdown()).await??;
    println!("\nDone.");
    Ok(())
}

/// A request handler: takes the order's lock, holds it across a call to
/// another service, releases it.
async fn handle_order(client: Client, order: String, who: &'static str) -> BoxResult<()> {
    let asked = Instant::now();
    let guard = client.lock(order.as_str()).lock_async().await?;
    say(
        who,
        format_args!("got the lock after {:.0} ms", ms(asked.elapsed())),
    );
    say(who, "calling the payment service while holding it");
    // Held across an await: the guard is Send, the runtime may move this
    // task between its threads meanwhile.
    tokio::time::sleep(Duration::from_millis(400)).await;
    let released = Instant::now();
    guard.unlock_async().await?;
    say(
        who,
        format_args!("released it ({:.1} ms)", ms(released.elapsed())),
    );
    Ok(())
}

/// A query is a blocking call: run it off the runtime's threads.
async fn hold_count(job: &redhold::Lock<redhold::Reentrant, Owner>) -> BoxResult<u32> {
    let job = job.clone();
    Ok(tokio::task::spawn_blocking(move || job.hold_count()).await??)
}

// --- output -----------------------------------------------------------------

fn start() -> Instant {
    static START: OnceLock<Instant> = OnceLock::new();
    *START.get_or_init(Instant::now)
}

fn heading(title: &str) {
    println!("\n{title}");
}

/// Prints one line of the timeline: seconds since start, who, what.
fn say(who: &str, what: impl Display) {
    println!(
        "  [{:>6.3} s] {who:<5} {what}",
        start().elapsed().as_secs_f64()
    );
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
