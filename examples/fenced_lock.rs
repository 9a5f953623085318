//! A fenced lock protecting a store that checks tokens: a holder that
//! stalls past its lease loses the lock, and its late write is refused
//! because a newer holder has written with a larger token meanwhile.
//!
//! Run it with `cargo run --example fenced_lock`. It uses `REDIS_URL` when
//! set, else `redis://127.0.0.1:6379/`.

use std::error::Error;
use std::fmt::Display;
use std::sync::{Arc, Mutex, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use redhold::Client;

type BoxResult<T> = Result<T, Box<dyn Error>>;

/// The protected resource: it remembers the largest token it has seen and
/// refuses writes that carry a smaller one.
#[derive(Debug, Default)]
struct Store {
    highest_token: u64,
    value: String,
}

impl Store {
    fn write(&mut self, token: u64, value: &str) -> Result<(), String> {
        if token < self.highest_token {
            return Err(format!(
                "refused: token {token} is older than {}",
                self.highest_token
            ));
        }
        self.highest_token = token;
        self.value = value.to_owned();
        Ok(())
    }
}

fn main() {
    if let Err(e) = run() {
        eprintln!("\nfenced_lock failed: {e}");
        eprintln!("(is a Redis server running? set REDIS_URL to point at one)");
        std::process::exit(1);
    }
}

fn run() -> BoxResult<()> {
    let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379/".into());
    say("main", format_args!("connecting to {url}"));
    // One client per "process".
    let (slow, fast) = (Client::open(&url)?, Client::open(&url)?);
    // A fixed name: its token counter never expires, so tokens keep growing
    // from one run to the next, as they must.
    let name = "redhold-example:ledger";
    let store = Arc::new(Mutex::new(Store::default()));

    let guard = slow
        .fenced_lock(name)
        .lock_with_lease(Duration::from_millis(300))?;
    let token = guard.token();
    say(
        "slow",
        format_args!("got the lock, token {token}; stalls for 600 ms"),
    );

    let other = {
        let store = Arc::clone(&store);
        let lock = fast.fenced_lock(name);
        thread::spawn(move || -> redhold::Result<()> {
            let guard = lock.lock()?;
            say(
                "fast",
                format_args!(
                    "got the lock after the lease ran out, token {}",
                    guard.token()
                ),
            );
            let written = store
                .lock()
                .unwrap()
                .write(guard.token(), "written by fast");
            say("fast", format_args!("write -> {written:?}"));
            guard.unlock()
        })
    };

    // A GC-like pause: the 300 ms lease runs out meanwhile.
    thread::sleep(Duration::from_millis(600));
    let written = store.lock().unwrap().write(token, "written by slow");
    say(
        "slow",
        format_args!("woke up, write with token {token} -> {written:?}"),
    );
    match guard.unlock() {
        Ok(()) => say("slow", "unlock -> Ok"),
        Err(e) => say("slow", format_args!("unlock -> {e}")),
    }
    other.join().map_err(|_| "the fast thread panicked")??;

    // Reentries get tokens too, each larger than the last.
    let lock = fast.fenced_lock(name);
    let outer = lock.lock()?;
    let inner = lock.lock()?;
    say(
        "main",
        format_args!(
            "reentry: outer token {}, inner token {}",
            outer.token(),
            inner.token()
        ),
    );
    drop(inner);
    drop(outer);

    println!("\nThe store holds {:?}.", store.lock().unwrap().value);
    slow.shutdown()?;
    fast.shutdown()?;
    Ok(())
}

/// Prints one line of the timeline: seconds since start, who, what.
fn say(who: &str, what: impl Display) {
    static START: OnceLock<Instant> = OnceLock::new();
    let start = *START.get_or_init(Instant::now);
    println!(
        "  [{:>6.3} s] {who:<4} {what}",
        start.elapsed().as_secs_f64()
    );
}
