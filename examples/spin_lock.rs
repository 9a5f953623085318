//! A spin lock: no pub/sub, waiters try again after an exponential backoff.
//! Useful where pub/sub is unavailable (some proxies) or too costly.
//!
//! Run it with `cargo run --example spin_lock`. It uses `REDIS_URL` when
//! set, else `redis://127.0.0.1:6379/`.

use std::thread;
use std::time::{Duration, Instant};

fn main() -> redhold::Result<()> {
    let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379/".into());
    let client = redhold::Client::open(&url)?;
    let name = format!("redhold-example:spin:{}", std::process::id());
    let lock = client
        .spin_lock(name.as_str())
        .with_backoff(Duration::from_millis(1), Duration::from_millis(32));
    let start = Instant::now();

    let guard = lock.lock()?;
    println!("[{:>5.0} ms] main   holds {name}", ms(start));
    let waiter = {
        let lock = lock.clone();
        thread::spawn(move || -> redhold::Result<()> {
            println!(
                "[{:>5.0} ms] waiter polls with backoff 1 ms → 32 ms",
                ms(start)
            );
            let _guard = lock.lock()?;
            println!("[{:>5.0} ms] waiter got it", ms(start));
            Ok(())
        })
    };
    thread::sleep(Duration::from_millis(300));
    println!("[{:>5.0} ms] main   releases", ms(start));
    drop(guard);
    match waiter.join() {
        Ok(outcome) => outcome?,
        Err(_) => eprintln!("the waiter panicked"),
    }
    println!("the waiter noticed within one backoff step (at most 32 ms here)");
    Ok(())
}

fn ms(start: Instant) -> f64 {
    start.elapsed().as_secs_f64() * 1000.0
}
