//! A distributed semaphore (Redisson's `RSemaphore`): six workers, in two
//! "processes" (two clients), share three permits; at most three run at
//! once, and a worker that waits is woken by the release, not by polling.
//!
//! Run it with `cargo run --example semaphore`. It uses `REDIS_URL` when
//! set, else `redis://127.0.0.1:6379/`; when nothing answers there it
//! starts a throwaway `redis-server` from PATH and stops it at the end.

use std::error::Error;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

mod support;

use redhold::Client;

fn main() {
    if let Err(e) = run() {
        eprintln!("\nsemaphore example failed: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), Box<dyn Error>> {
    let (url, _server) = support::pick_server("semaphore")?;
    // Two clients stand for two processes: permits are shared through Redis.
    let clients = [Client::open(&url)?, Client::open(&url)?];
    let name = format!("redhold-example:downloads:{}", std::process::id());
    let downloads = clients[0].semaphore(name.as_str());
    // Whoever comes first sets the permits; later calls change nothing.
    downloads.try_set_permits(3)?;
    println!("{name}: {} permits", downloads.available_permits()?);

    let start = Instant::now();
    let running = Arc::new(AtomicUsize::new(0));
    let workers: Vec<_> = (0..6)
        .map(|i| {
            let semaphore = clients[i % 2].semaphore(name.as_str());
            let running = Arc::clone(&running);
            thread::spawn(move || -> redhold::Result<()> {
                let permit = semaphore.acquire()?;
                let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                println!("[{:>5.0} ms] worker {i} runs ({now} running)", ms(start));
                thread::sleep(Duration::from_millis(200));
                running.fetch_sub(1, Ordering::SeqCst);
                drop(permit); // back to the pool: a waiter is woken
                Ok(())
            })
        })
        .collect();
    for worker in workers {
        worker.join().map_err(|_| "a worker panicked")??;
    }
    println!(
        "[{:>5.0} ms] all done: two rounds of three, {} permits back",
        ms(start),
        downloads.available_permits()?
    );

    // A permit outlives its guard with `forget`; anyone may release it.
    downloads.acquire()?.forget();
    println!("forgotten: {} available", downloads.available_permits()?);
    downloads.release(1)?;
    println!(
        "released by name: {} available",
        downloads.available_permits()?
    );
    // Waiting with a limit.
    let all = downloads.try_acquire_many_for(3, Duration::from_millis(100))?;
    println!("took all three at once: {}", all.is_some());
    let none = downloads.try_acquire_for(Duration::from_millis(100))?;
    println!("a fourth within 100 ms: {}", none.is_some());
    drop(all);
    downloads.drain_permits()?;
    Ok(())
}

fn ms(start: Instant) -> f64 {
    start.elapsed().as_secs_f64() * 1000.0
}
