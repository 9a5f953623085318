//! A read-write lock: two readers share it, a writer waits for both to
//! leave, then downgrades (writes, starts reading, stops writing) so that
//! readers can come back while it still reads. An upgrade is refused.
//!
//! Run it with `cargo run --example read_write_lock`. It uses `REDIS_URL`
//! when set, else `redis://127.0.0.1:6379/`.

use std::error::Error;
use std::fmt::Display;
use std::sync::OnceLock;
use std::thread;
use std::time::{Duration, Instant};

use redhold::{Client, ReadWriteLock};

type BoxResult<T> = Result<T, Box<dyn Error + Send + Sync>>;

fn main() {
    if let Err(e) = run() {
        eprintln!("\nread_write_lock failed: {e}");
        eprintln!("(is a Redis server running? set REDIS_URL to point at one)");
        std::process::exit(1);
    }
}

fn run() -> BoxResult<()> {
    let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379/".into());
    say("main", format_args!("connecting to {url}"));
    let client = Client::open(&url)?;
    let name = format!("redhold-example:config:{}", std::process::id());
    let rw = client.read_write_lock(name.as_str());

    println!("\n1. Readers share the lock; the writer waits for all of them");
    let readers: Vec<_> = ["reader1", "reader2"]
        .into_iter()
        .map(|who| {
            let rw = rw.clone();
            thread::spawn(move || -> redhold::Result<()> {
                let guard = rw.read().lock()?;
                say(who, "reading (for 500 ms)");
                thread::sleep(Duration::from_millis(500));
                say(who, "done reading");
                guard.unlock()
            })
        })
        .collect();
    thread::sleep(Duration::from_millis(100));
    let writer = {
        let rw = rw.clone();
        thread::spawn(move || writer_downgrades(&rw))
    };
    for reader in readers {
        reader.join().map_err(|_| "a reader panicked")??;
    }
    writer.join().map_err(|_| "the writer panicked")??;

    client.shutdown()?;
    println!("\nDone.");
    Ok(())
}

/// Waits for the write lock, writes, then keeps reading after the write.
fn writer_downgrades(rw: &ReadWriteLock) -> BoxResult<()> {
    say("writer", "wants to write");
    let write = rw.write().lock()?;
    say("writer", "writing (no reader can be inside now)");
    thread::sleep(Duration::from_millis(200));

    println!("\n2. The downgrade: write -> read -> release the write");
    let read = rw.read().lock()?;
    write.unlock()?;
    say(
        "writer",
        format_args!(
            "released the write, still reading (read holds: {})",
            rw.read().hold_count()?
        ),
    );
    let other = rw.clone();
    thread::spawn(move || -> redhold::Result<()> {
        let reading = other.read().try_lock()?.is_some();
        let writing = other.write().try_lock()?.is_some();
        say(
            "other",
            format_args!("try read -> {reading}, try write -> {writing}"),
        );
        Ok(())
    })
    .join()
    .map_err(|_| "the other thread panicked")??;

    println!("\n3. An upgrade (read -> write) is refused at once");
    match rw.write().lock() {
        Err(e @ redhold::Error::UpgradeNotSupported { .. }) => say("writer", format_args!("{e}")),
        Err(e) => return Err(e.into()),
        Ok(_) => say("writer", "upgrade granted?!"),
    }
    read.unlock()?;
    say("writer", "released the read; the lock is free");
    Ok(())
}

/// Prints one line of the timeline: seconds since start, who, what.
fn say(who: &str, what: impl Display) {
    static START: OnceLock<Instant> = OnceLock::new();
    let start = *START.get_or_init(Instant::now);
    println!(
        "  [{:>6.3} s] {who:<7} {what}",
        start.elapsed().as_secs_f64()
    );
}
