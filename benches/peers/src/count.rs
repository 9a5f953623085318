//! `peers --count <redis-url>`: the commands each library sends per lock
//! operation, for benches/count_commands.py (which starts the server, keeps
//! a `MONITOR` connection on it and prints the table).
//!
//! Every scenario runs a few unmeasured operations first (scripts loaded,
//! subscriptions made), then brackets its measured part on a control
//! connection of its own: `ECHO count:begin:<library>:<scenario>:<ops>` and
//! `CONFIG RESETSTAT` before, `INFO commandstats` and `ECHO count:end` after.
//! The MONITOR log between the two ECHOs tells the commands the library sent
//! from those its scripts ran; the JSON line printed here carries
//! commandstats (every command executed, a script's inner ones included, the
//! control connection's left out) as a cross-check.

use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use crate::count_peers::{Peer, PeerClient, Redhold, RedisLock, Rlock, Rslock};

/// Measured operations per scenario (hand-over rounds; herd sections per client).
const PAIRS: usize = 100;
const ROUNDS: usize = 20;
const HERD_CLIENTS: usize = 8;
const HERD_ROUNDS: usize = 10;
/// How long a holder keeps the lock once its waiter has started.
const HOLD_FOR_WAITER: Duration = Duration::from_millis(50);
/// Each herd section's time inside the lock.
const HERD_HOLD: Duration = Duration::from_millis(1);
const IDLE_SETTLE: Duration = Duration::from_secs(2);
const IDLE_WINDOW: Duration = Duration::from_secs(10);

/// Runs every scenario for every library against `url`; one JSON line each.
pub(crate) fn run(url: &str, only: Option<&str>) {
    let peers: Vec<Box<dyn Peer>> = vec![
        Box::new(Redhold(url.to_owned())),
        Box::new(Rslock(url.to_owned())),
        Box::new(Rlock(url.to_owned())),
        Box::new(RedisLock(url.to_owned())),
    ];
    let mut control = redis::Client::open(url)
        .and_then(|c| c.get_connection())
        .unwrap_or_else(|e| panic!("count: cannot connect to Redis: {e}"));
    for peer in peers.iter().filter(|p| only.is_none_or(|o| o == p.key())) {
        let peer = peer.as_ref();
        let mut meter = Meter {
            control: &mut control,
            library: peer.key(),
        };
        eprintln!("count: {}", peer.key());
        uncontended(peer, &mut meter);
        reentrant(peer, &mut meter);
        let (a, b) = (peer.client(), peer.client());
        hand_over(&mut meter, "clients", a, b);
        if let Some((a, b)) = peer.one_client_twice() {
            hand_over(&mut meter, "threads", a, b);
        }
        herd(peer, &mut meter);
        idle(peer, &mut meter);
    }
}

/// The control connection: brackets a measured part and reports it.
struct Meter<'a> {
    control: &'a mut redis::Connection,
    library: &'static str,
}

impl Meter<'_> {
    fn measure(&mut self, scenario: &str, ops: usize, part: impl FnOnce()) {
        let tag = format!("count:begin:{}:{scenario}:{ops}", self.library);
        let _: String = redis::cmd("ECHO")
            .arg(&tag)
            .query(self.control)
            .expect("ECHO");
        let () = redis::cmd("CONFIG")
            .arg("RESETSTAT")
            .query(self.control)
            .expect("CONFIG RESETSTAT");
        part();
        let stats: String = redis::cmd("INFO")
            .arg("commandstats")
            .query(self.control)
            .expect("INFO commandstats");
        let _: String = redis::cmd("ECHO")
            .arg("count:end")
            .query(self.control)
            .expect("ECHO");
        let executed: Vec<String> = parse_commandstats(&stats)
            .into_iter()
            .filter(|(name, _)| !name.starts_with("config") && name != "info")
            .map(|(name, calls)| format!("\"{name}\":{calls}"))
            .collect();
        println!(
            "{{\"library\":\"{}\",\"scenario\":\"{scenario}\",\"ops\":{ops},\"executed\":{{{}}}}}",
            self.library,
            executed.join(",")
        );
    }
}

/// `cmdstat_evalsha:calls=3,usec=...` lines as (name, calls).
fn parse_commandstats(info: &str) -> Vec<(String, u64)> {
    info.lines()
        .filter_map(|line| {
            let (name, rest) = line.strip_prefix("cmdstat_")?.split_once(':')?;
            let calls = rest
                .strip_prefix("calls=")?
                .split(',')
                .next()?
                .parse()
                .ok()?;
            Some((name.to_owned(), calls))
        })
        .collect()
}

fn uncontended(peer: &dyn Peer, meter: &mut Meter<'_>) {
    let mut client = peer.client();
    let name = format!("count:{}:pair", peer.key());
    for _ in 0..5 {
        client.section(&name, &mut || {});
    }
    meter.measure("uncontended", PAIRS, || {
        for _ in 0..PAIRS {
            client.section(&name, &mut || {});
        }
    });
}

fn reentrant(peer: &dyn Peer, meter: &mut Meter<'_>) {
    let mut client = peer.client();
    let name = format!("count:{}:reentrant", peer.key());
    if !client.reentrant_pair(&name) {
        return;
    }
    meter.measure("reentrant", PAIRS, || {
        for _ in 0..PAIRS {
            client.reentrant_pair(&name);
        }
    });
}

/// One round: `holder` takes the lock; `waiter` starts waiting for it; the
/// holder releases `HOLD_FOR_WAITER` later; the waiter takes and releases
/// it. A round costs two acquires, two releases and the waiting; the script
/// subtracts the uncontended pair to get the hand-over's own cost.
fn hand_over(
    meter: &mut Meter<'_>,
    scenario: &str,
    mut holder: Box<dyn PeerClient>,
    mut waiter: Box<dyn PeerClient>,
) {
    let name = format!("count:{}:{scenario}", meter.library);
    let round = |holder: &mut dyn PeerClient, waiter: &mut dyn PeerClient| {
        while_a_waiter_is_blocked(holder, waiter, &name, || thread::sleep(HOLD_FOR_WAITER));
    };
    for _ in 0..2 {
        round(holder.as_mut(), waiter.as_mut());
    }
    meter.measure(scenario, ROUNDS, || {
        for _ in 0..ROUNDS {
            round(holder.as_mut(), waiter.as_mut());
        }
    });
}

/// `HERD_CLIENTS` clients, a thread each, taking the lock `HERD_ROUNDS`
/// times in a loop (`HERD_HOLD` inside): commands per critical section.
fn herd(peer: &dyn Peer, meter: &mut Meter<'_>) {
    let name = format!("count:{}:herd", peer.key());
    let mut clients: Vec<_> = (0..HERD_CLIENTS).map(|_| peer.client()).collect();
    for client in &mut clients {
        client.section(&name, &mut || {});
    }
    meter.measure("herd", HERD_CLIENTS * HERD_ROUNDS, || {
        thread::scope(|s| {
            for client in &mut clients {
                let name = &name;
                s.spawn(move || {
                    for _ in 0..HERD_ROUNDS {
                        client.section(name, &mut || thread::sleep(HERD_HOLD));
                    }
                });
            }
        });
    });
}

/// A waiter blocked for `IDLE_WINDOW` on a lock another client holds:
/// commands per second (ops = seconds).
fn idle(peer: &dyn Peer, meter: &mut Meter<'_>) {
    let name = format!("count:{}:idle", peer.key());
    let (mut holder, mut waiter) = (peer.client(), peer.client());
    waiter.section(&name, &mut || {});
    while_a_waiter_is_blocked(holder.as_mut(), waiter.as_mut(), &name, || {
        thread::sleep(IDLE_SETTLE);
        meter.measure("idle", IDLE_WINDOW.as_secs() as usize, || {
            thread::sleep(IDLE_WINDOW)
        });
    });
}

/// `holder` takes `name` and keeps it while `waiter` waits for it and
/// `while_blocked` runs; then the holder releases, and the waiter takes
/// and releases the lock.
fn while_a_waiter_is_blocked(
    holder: &mut dyn PeerClient,
    waiter: &mut dyn PeerClient,
    name: &str,
    while_blocked: impl FnOnce(),
) {
    thread::scope(|s| {
        let (held_tx, held_rx) = mpsc::channel();
        let (release_tx, release_rx) = mpsc::channel::<()>();
        s.spawn(move || {
            holder.section(name, &mut || {
                held_tx.send(()).expect("held");
                let _ = release_rx.recv();
            })
        });
        held_rx.recv().expect("the holder took the lock");
        let waiting = s.spawn(move || waiter.section(name, &mut || {}));
        while_blocked();
        release_tx.send(()).expect("release");
        waiting.join().expect("the waiter panicked");
    });
}
