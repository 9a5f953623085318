//! A fair lock: four workers on two clients queue up one after another while
//! the lock is held, then get it in exactly their arrival order.
//!
//! Run it with `cargo run --example fair_lock`. It uses `REDIS_URL` when set,
//! else `redis://127.0.0.1:6379/`.

use std::error::Error;
use std::fmt::Display;
use std::sync::OnceLock;
use std::thread;
use std::time::{Duration, Instant};

use redhold::Client;

type BoxResult<T> = Result<T, Box<dyn Error>>;

fn main() {
    if let Err(e) = run() {
        eprintln!("\nfair_lock failed: {e}");
        eprintln!("(is a Redis server running? set REDIS_URL to point at one)");
        std::process::exit(1);
    }
}

fn run() -> BoxResult<()> {
    let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379/".into());
    say("main", format_args!("connecting to {url}"));
    // Two clients stand for two processes sharing the lock.
    let clients = [Client::open(&url)?, Client::open(&url)?];
    // A name unique to this run, so a lock left by a killed run cannot interfere.
    let name = format!("redhold-example:fair:{}", std::process::id());

    let holder = clients[0].fair_lock(name.as_str()).lock()?;
    say("main", format_args!("holds {name}; four workers queue up"));

    let mut workers = Vec::new();
    for i in 0..4 {
        let who = format!("w{i}@c{}", i % 2);
        let lock = clients[i % 2].fair_lock(name.as_str());
        workers.push(thread::spawn(move || -> redhold::Result<()> {
            say(&who, "queues");
            let guard = lock.lock()?;
            say(&who, "got the lock");
            thread::sleep(Duration::from_millis(100));
            guard.unlock()
        }));
        // Arrive one after another (a plain lock would hand it out in any order).
        thread::sleep(Duration::from_millis(100));
    }

    say("main", "releases");
    holder.unlock()?;
    for worker in workers {
        worker.join().map_err(|_| "a worker panicked")??;
    }
    for client in &clients {
        client.shutdown()?;
    }
    println!("\nThe workers got the lock in the order they queued: w0, w1, w2, w3.");
    Ok(())
}

/// Prints one line of the timeline: seconds since start, who, what.
fn say(who: &str, what: impl Display) {
    static START: OnceLock<Instant> = OnceLock::new();
    let start = *START.get_or_init(Instant::now);
    println!(
        "  [{:>6.3} s] {who:<6} {what}",
        start.elapsed().as_secs_f64()
    );
}
