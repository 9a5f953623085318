//! A MultiLock: two accounts locked together for a transfer, all or
//! nothing. A second transfer in the opposite order cannot deadlock with
//! the first: when one lock of a set is busy, everything taken is released
//! before waiting.
//!
//! Run it with `cargo run --example multi_lock`. It uses `REDIS_URL` when
//! set, else `redis://127.0.0.1:6379/`.

use std::thread;
use std::time::{Duration, Instant};

use redhold::{Client, MultiLock};

fn main() -> redhold::Result<()> {
    let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379/".into());
    let client = Client::open(&url)?;
    let pid = std::process::id();
    let a = client.lock(format!("redhold-example:account:{pid}:a"));
    let b = client.lock(format!("redhold-example:account:{pid}:b"));
    let start = Instant::now();

    let transfers: Vec<_> = [("a→b", vec![a.clone(), b.clone()]), ("b→a", vec![b, a])]
        .into_iter()
        .map(|(label, locks)| {
            thread::spawn(move || -> redhold::Result<()> {
                let both = MultiLock::new(locks);
                for round in 1..=3 {
                    let guard = both.lock()?;
                    println!(
                        "[{:>5.0} ms] {label} holds both accounts (round {round})",
                        start.elapsed().as_secs_f64() * 1000.0
                    );
                    thread::sleep(Duration::from_millis(50));
                    guard.unlock()?;
                }
                Ok(())
            })
        })
        .collect();
    for transfer in transfers {
        match transfer.join() {
            Ok(outcome) => outcome?,
            Err(_) => eprintln!("a transfer thread panicked"),
        }
    }
    println!("six transfers, one at a time, no deadlock");
    Ok(())
}
