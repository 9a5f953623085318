//! RedLock: a lock held on a majority of independent Redis servers, with
//! the remaining validity on the guard.
//!
//! Run it with `cargo run --example red_lock`. Give the servers as a
//! comma-separated `REDLOCK_URLS`; by default it uses three databases of
//! the server at `REDIS_URL` (or 127.0.0.1:6379), which shows the API but
//! not the safety: in production the servers must be independent.

use std::time::Duration;

use redhold::{Client, RedLock};

fn main() -> redhold::Result<()> {
    let urls: Vec<String> = match std::env::var("REDLOCK_URLS") {
        Ok(list) => list.split(',').map(|u| u.trim().to_owned()).collect(),
        Err(_) => {
            let base =
                std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
            let base = base.trim_end_matches('/').to_owned();
            (1..=3).map(|db| format!("{base}/{db}")).collect()
        }
    };
    let mut locks = Vec::new();
    for url in &urls {
        // Few retries: a dead server should cost little time, the majority
        // decides.
        let client = Client::builder()
            .url(url.as_str())
            .retry_attempts(0)
            .build()?;
        locks.push(client.lock(format!("redhold-example:report:{}", std::process::id())));
    }
    let red = RedLock::new(locks);
    println!("{} servers, a majority is {}", urls.len(), red.quorum());

    let lease = Duration::from_secs(5);
    match red.try_lock_for_with_lease(Duration::from_secs(1), lease)? {
        Some(guard) => {
            println!(
                "held on {} servers; valid for {:?} more (lease {lease:?} minus acquiring time and drift)",
                guard.servers_held(),
                guard.validity()
            );
            guard.unlock()?;
            println!("released on every server");
        }
        None => println!("no majority within 1 s"),
    }
    Ok(())
}
