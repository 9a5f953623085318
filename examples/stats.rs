//! `Client::stats`: six threads contend for two locks for three seconds
//! while the main thread prints the client's snapshot every half second.
//!
//! Run it with `cargo run --example stats`. It uses `REDIS_URL` when set,
//! else `redis://127.0.0.1:6379/`.

use std::error::Error;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use redhold::Client;

fn main() {
    if let Err(e) = run() {
        eprintln!("\nstats failed: {e}");
        eprintln!("(is a Redis server running? set REDIS_URL to point at one)");
        std::process::exit(1);
    }
}

fn run() -> Result<(), Box<dyn Error>> {
    let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379/".into());
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

    for _ in 0..6 {
        thread::sleep(Duration::from_millis(500));
        println!("{:?}", client.stats());
    }
    stop.store(true, Ordering::Relaxed);
    let mut sections = 0;
    for worker in workers {
        sections += worker.join().map_err(|_| "a worker panicked")??;
    }
    println!(
        "{sections} critical sections; at the end: {:?}",
        client.stats()
    );
    client.shutdown()?;
    Ok(())
}
