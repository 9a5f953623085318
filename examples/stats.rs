//! `Client::stats`: six threads contend for two locks for three seconds
//! while the main thread prints the client's snapshot every half second, one
//! table row each.
//!
//! Run it with `cargo run --example stats`. It uses `REDIS_URL` when set,
//! else `redis://127.0.0.1:6379/`; when nothing answers there it starts a
//! throwaway `redis-server` from PATH on a free port and stops it at the end.

mod support;

use std::error::Error;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use redhold::{Client, Stats};

fn main() {
    if let Err(e) = run() {
        eprintln!("\nstats failed: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), Box<dyn Error>> {
    // Declared first so that it is dropped last, after the client is gone.
    let (url, _server) = support::pick_server("stats")?;
    // A short watchdog timeout, so that renewal passes show up quickly.
    let client = Client::builder()
        .url(&url)
        .watchdog_timeout(Duration::from_secs(3))
        .build()?;
    // Names unique to this run, so a lock left by a killed run cannot interfere.
    let names: Vec<String> = (0..2)
        .map(|i| format!("redhold-example:stats:{}:{i}", std::process::id()))
        .collect();

    let stop = Arc::new(AtomicBool::new(false));
    let workers: Vec<_> = (0..6)
        .map(|i| {
            let lock = client.lock(names[i % 2].as_str());
            let stop = Arc::clone(&stop);
            thread::spawn(move || -> redhold::Result<u32> {
                let mut sections = 0;
                while !stop.load(Ordering::Relaxed) {
                    let _guard = lock.lock()?;
                    thread::sleep(Duration::from_millis(20));
                    sections += 1;
                }
                Ok(sections)
            })
        })
        .collect();

    let started = Instant::now();
    println!("\n{HEADER}");
    for _ in 0..6 {
        thread::sleep(Duration::from_millis(500));
        println!("{}", row(started.elapsed(), &client.stats()));
    }
    stop.store(true, Ordering::Relaxed);
    let mut sections = 0;
    for worker in workers {
        sections += worker.join().map_err(|_| "a worker panicked")??;
    }
    println!("{}", row(started.elapsed(), &client.stats()));
    println!("\n{sections} critical sections in all.\n\n{LEGEND}");
    client.shutdown()?;
    Ok(())
}

const HEADER: &str =
    "  time  held  parked  channels  renewals  lost  reconnects  handoffs  direct  courtesy";

const LEGEND: &str = "\
held        locks held now (one per lock and thread)
parked      threads waiting now
channels    wake-up channels subscribed to now
renewals    watchdog passes so far
lost        holds found lost so far
reconnects  pub/sub connections replaced so far
handoffs    locks taken by a thread woken by a release's message
direct      locks a release handed straight to a parked thread of this client
courtesy    times a woken thread stood back so another process could go first";

/// One line of the table, aligned under [`HEADER`].
fn row(at: Duration, s: &Stats) -> String {
    format!(
        "{:>5.1}s {:>5} {:>7} {:>9} {:>9} {:>5} {:>11} {:>9} {:>7} {:>9}",
        at.as_secs_f64(),
        s.held_locks,
        s.parked_waiters,
        s.subscribed_channels,
        s.renewal_passes,
        s.locks_lost,
        s.pubsub_reconnects,
        s.local_handoffs,
        s.direct_handoffs,
        s.courtesy_pauses,
    )
}
