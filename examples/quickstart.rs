//! A short tour of redhold: two threads contending for one lock, reentrancy,
//! a lease, and the watchdog keeping a lock alive past its timeout.
//!
//! Run it with `cargo run --example quickstart`. It uses `REDIS_URL` when set,
//! else `redis://127.0.0.1:6379/`; when nothing answers there it starts a
//! throwaway `redis-server` from PATH on a free port and stops it at the end.

use std::error::Error;
use std::fmt::Display;
use std::sync::mpsc;
use std::sync::OnceLock;
use std::thread;
use std::time::{Duration, Instant};

mod support;

use redhold::Client;

type BoxResult<T> = Result<T, Box<dyn Error>>;

fn main() {
    if let Err(e) = run() {
        eprintln!("\nquickstart failed: {e}");
        std::process::exit(1);
    }
}

fn run() -> BoxResult<()> {
    // Declared first so that it is dropped last, after every client is gone,
    // on the error paths as well.
    start();
    let (url, _server) = support::pick_server("quickstart")?;
    say("main", format_args!("connecting to {url}"));
    let client = Client::open(&url)?;
    // Names unique to this run, so a lock left behind by a killed earlier
    // run (it expires within 30 s) cannot get in the way.
    let prefix = format!("quickstart:{}", std::process::id());

    contention(&client, &format!("{prefix}:report"))?;
    reentrancy(&client, &format!("{prefix}:reentrant"))?;
    lease(&client, &format!("{prefix}:lease"))?;
    watchdog(&url, &format!("{prefix}:watchdog"))?;

    client.shutdown()?;
    println!("\nDone.");
    Ok(())
}

/// Two threads want the same lock: the second waits until the first releases
/// and is woken by Redis pub/sub right away, not by polling.
fn contention(client: &Client, name: &str) -> BoxResult<()> {
    heading(&format!("1. Two threads, one lock ({name})"));
    let lock = client.lock(name);
    let (held_tx, held_rx) = mpsc::channel::<()>();
    let (released_tx, released_rx) = mpsc::channel::<Instant>();

    let alice_lock = lock.clone();
    let alice =
        thread::Builder::new()
            .name("alice".into())
            .spawn(move || -> redhold::Result<()> {
                let guard = alice_lock.lock()?;
                say("alice", "got the lock; working for 1 s");
                let _ = held_tx.send(());
                thread::sleep(Duration::from_secs(1));
                say("alice", "done, releasing");
                let released = Instant::now();
                guard.unlock()?;
                let _ = released_tx.send(released);
                Ok(())
            })?;

    let bob_lock = lock;
    let bob = thread::Builder::new()
        .name("bob".into())
        .spawn(move || -> redhold::Result<()> {
            // Start only once alice holds it, so that bob has to wait.
            if held_rx.recv().is_err() {
                return Ok(()); // alice failed; her error is reported below
            }
            let busy = bob_lock.try_lock()?.is_none();
            say(
                "bob",
                format_args!("try_lock() -> {}", if busy { "busy" } else { "free?!" }),
            );
            say("bob", "calling lock(), which waits");
            let asked = Instant::now();
            let guard = bob_lock.lock()?;
            let got = Instant::now();
            say(
                "bob",
                format_args!("got the lock after waiting {}", secs(got - asked)),
            );
            if let Ok(released) = released_rx.recv() {
                say(
                    "bob",
                    format_args!(
                        "that is {:.1} ms after alice started to release it",
                        got.saturating_duration_since(released).as_secs_f64() * 1000.0
                    ),
                );
            }
            guard.unlock()
        })?;

    alice.join().map_err(|_| "alice panicked")??;
    bob.join().map_err(|_| "bob panicked")??;
    Ok(())
}

/// The thread that holds a lock may take it again; each guard adds one hold,
/// and the count lives in Redis.
fn reentrancy(client: &Client, name: &str) -> BoxResult<()> {
    heading(&format!("2. Reentrancy ({name})"));
    let lock = client.lock(name);
    let outer = lock.lock()?;
    say(
        "main",
        format_args!("lock()          -> hold_count = {}", lock.hold_count()?),
    );
    let inner = lock.lock()?;
    say(
        "main",
        format_args!("lock() again    -> hold_count = {}", lock.hold_count()?),
    );
    inner.unlock()?;
    say(
        "main",
        format_args!(
            "inner unlock()  -> hold_count = {}, is_locked = {}",
            lock.hold_count()?,
            lock.is_locked()?
        ),
    );
    outer.unlock()?;
    say(
        "main",
        format_args!(
            "outer unlock()  -> hold_count = {}, is_locked = {}",
            lock.hold_count()?,
            lock.is_locked()?
        ),
    );
    Ok(())
}

/// A lease lock has no watchdog: it expires on its own after the lease.
fn lease(client: &Client, name: &str) -> BoxResult<()> {
    heading(&format!("3. A lease of 1 s, no watchdog ({name})"));
    let lock = client.lock(name);
    let guard = lock.lock_with_lease(Duration::from_secs(1))?;
    say(
        "main",
        format_args!(
            "lock_with_lease(1 s) -> remaining_lease = {}",
            lease_text(lock.remaining_lease()?)
        ),
    );
    say("main", "holding it for 1.2 s without renewing");
    thread::sleep(Duration::from_millis(1200));
    say(
        "main",
        format_args!(
            "is_locked = {}, guard.is_held() = {}",
            lock.is_locked()?,
            guard.is_held()
        ),
    );
    match guard.unlock() {
        Ok(()) => say("main", "unlock() -> Ok (unexpected: the lease had run out)"),
        Err(e) => say("main", format_args!("unlock() -> Err: {e}")),
    }
    Ok(())
}

/// With no lease, the client's watchdog renews the lock every third of its
/// timeout for as long as the guard lives.
fn watchdog(url: &str, name: &str) -> BoxResult<()> {
    heading(&format!("4. The watchdog, with a 2 s timeout ({name})"));
    let client = Client::builder()
        .url(url)
        .watchdog_timeout(Duration::from_secs(2))
        .build()?;
    let lock = client.lock(name);
    let guard = lock.lock()?;
    say("main", "lock() with no lease; holding it for 5 s");
    for _ in 0..5 {
        thread::sleep(Duration::from_secs(1));
        say(
            "main",
            format_args!(
                "remaining_lease = {}, guard.is_held() = {}",
                lease_text(lock.remaining_lease()?),
                guard.is_held()
            ),
        );
    }
    guard.unlock()?;
    say(
        "main",
        format_args!(
            "unlocked after 5 s, well past the 2 s timeout; is_locked = {}",
            lock.is_locked()?
        ),
    );
    client.shutdown()?;
    Ok(())
}

// --- output -----------------------------------------------------------------

fn start() -> Instant {
    static START: OnceLock<Instant> = OnceLock::new();
    *START.get_or_init(Instant::now)
}

fn heading(title: &str) {
    println!("\n{title}");
}

/// Prints one line of the timeline: seconds since start, who, what.
fn say(who: &str, what: impl Display) {
    println!(
        "  [{:>6.3} s] {who:<5} {what}",
        start().elapsed().as_secs_f64()
    );
}

fn secs(d: Duration) -> String {
    format!("{:.3} s", d.as_secs_f64())
}

fn lease_text(lease: Option<Duration>) -> String {
    lease.map_or_else(|| "none (not locked)".to_string(), secs)
}
