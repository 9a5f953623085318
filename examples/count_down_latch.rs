//! A distributed count-down latch (Redisson's `RCountDownLatch`): a
//! coordinator waits until three workers, in another "process" (another
//! client), have each counted down once; one count-down opens it for every
//! waiter at once.
//!
//! Run it with `cargo run --example count_down_latch`. It uses `REDIS_URL`
//! when set, else `redis://127.0.0.1:6379/`; when nothing answers there it
//! starts a throwaway `redis-server` from PATH and stops it at the end.

use std::error::Error;
use std::thread;
use std::time::{Duration, Instant};

mod support;

use redhold::Client;

fn main() {
    if let Err(e) = run() {
        eprintln!("\ncount_down_latch example failed: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), Box<dyn Error>> {
    let (url, _server) = support::pick_server("count_down_latch")?;
    let (coordinator, workers) = (Client::open(&url)?, Client::open(&url)?);
    let name = format!("redhold-example:ready:{}", std::process::id());
    let ready = coordinator.count_down_latch(name.as_str());
    ready.try_set_count(3)?;
    println!("{name}: waiting for {} workers", ready.count()?);

    let start = Instant::now();
    // A second waiter: one count-down to zero opens the latch for both.
    let observer = {
        let latch = workers.count_down_latch(name.as_str());
        thread::spawn(move || latch.wait().map(|()| start.elapsed()))
    };
    let handles: Vec<_> = (1..=3u64)
        .map(|i| {
            let latch = workers.count_down_latch(name.as_str());
            thread::spawn(move || -> redhold::Result<()> {
                thread::sleep(Duration::from_millis(150 * i));
                let left = latch.count_down()?;
                println!("[{:>5.0} ms] worker {i} ready, {left} to go", ms(start));
                Ok(())
            })
        })
        .collect();
    let in_time = ready.wait_for(Duration::from_secs(10))?;
    println!("[{:>5.0} ms] coordinator: all ready ({in_time})", ms(start));
    for handle in handles {
        handle.join().map_err(|_| "a worker panicked")??;
    }
    let seen = observer.join().map_err(|_| "the observer panicked")??;
    println!(
        "the observer went on too, at {:.0} ms",
        seen.as_secs_f64() * 1000.0
    );
    println!(
        "open latches leave no key behind: count = {}",
        ready.count()?
    );
    Ok(())
}

fn ms(start: Instant) -> f64 {
    start.elapsed().as_secs_f64() * 1000.0
}
