//! RedLock over five independent servers: a majority suffices, a minority
//! does not, a failed attempt leaves nothing behind, nor does a released
//! guard on a server whose reply came too late, and the validity follows
//! the watchdog's renewals.

mod bounded;
mod support;

use std::thread;
use std::time::Duration;

use redhold::{Client, RedLock};
use support::RedisServer;

fn servers(n: usize) -> Vec<RedisServer> {
    (0..n).map(|_| RedisServer::start()).collect()
}

/// One client per server, built to fail fast when its server is gone.
fn clients(servers: &[RedisServer]) -> Vec<Client> {
    servers
        .iter()
        .map(|s| {
            s.builder()
                .retry_attempts(0)
                .response_timeout(Duration::from_secs(1))
                .build()
                .unwrap()
        })
        .collect()
}

fn red_lock(clients: &[Client], name: &str) -> RedLock {
    RedLock::new(clients.iter().map(|c| c.lock(name)).collect())
}

fn locked_on(servers: &[RedisServer], name: &str) -> usize {
    servers
        .iter()
        .filter(|s| s.try_cmd::<u32>(&["EXISTS", name]).unwrap_or(0) == 1)
        .count()
}

#[test]
fn acquirable_with_two_of_five_servers_dead_not_with_three() {
    let mut servers = servers(5);
    let clients = clients(&servers);
    let red = red_lock(&clients, "report");
    assert_eq!(red.quorum(), 3);

    servers[0].stop();
    servers[1].stop();
    let lease = Duration::from_secs(10);
    let guard = red
        .try_lock_for_with_lease(Duration::from_secs(2), lease)
        .unwrap()
        .expect("three of five servers are a majority");
    assert_eq!(guard.servers_held(), 3);
    assert!(guard.validity() > Duration::ZERO && guard.validity() < lease);
    assert_eq!(locked_on(&servers[2..], "report"), 3);
    guard.unlock().unwrap();
    assert_eq!(locked_on(&servers[2..], "report"), 0);

    servers[2].stop();
    let outcome = red
        .try_lock_for_with_lease(Duration::from_millis(500), lease)
        .unwrap();
    assert!(outcome.is_none(), "two of five servers are no majority");
    assert_eq!(
        locked_on(&servers[3..], "report"),
        0,
        "a failed attempt left locks behind"
    );
}

#[test]
fn a_minority_held_elsewhere_does_not_stop_a_majority_and_nothing_leaks() {
    let servers = servers(5);
    let mine = clients(&servers);
    let theirs = clients(&servers);
    // Someone else holds the lock on two servers.
    let _g0 = theirs[0].lock("job").lock().unwrap();
    let _g1 = theirs[1].lock("job").lock().unwrap();
    let guard = red_lock(&mine, "job")
        .try_lock()
        .unwrap()
        .expect("majority of three free servers");
    assert_eq!(guard.servers_held(), 3);
    drop(guard);
    // On three servers: no majority left, and the two free ones stay free.
    let _g2 = theirs[2].lock("job").lock().unwrap();
    assert!(red_lock(&mine, "job").try_lock().unwrap().is_none());
    assert_eq!(locked_on(&servers[3..], "job"), 0);
}

#[test]
fn redlock_holders_exclude_each_other() {
    let servers = servers(3);
    let url = servers[0].url();
    let mut workers = Vec::new();
    for t in 0..4 {
        let red = red_lock(&clients(&servers), "counter-lock");
        let url = url.clone();
        workers.push(bounded::spawn(&format!("w{t}"), move || {
            let mut conn = redis::Client::open(url).unwrap().get_connection().unwrap();
            for _ in 0..20 {
                let _g = red.lock_with_lease(Duration::from_secs(10)).unwrap();
                let n: Option<i64> = redis::cmd("GET").arg("counter").query(&mut conn).unwrap();
                redis::cmd("SET")
                    .arg("counter")
                    .arg(n.unwrap_or(0) + 1)
                    .query::<()>(&mut conn)
                    .unwrap();
            }
        }));
    }
    for w in workers {
        w.join_within(Duration::from_secs(90));
    }
    assert_eq!(servers[0].cmd::<i64>(&["GET", "counter"]), 80);
}

#[test]
fn a_server_that_answered_too_late_is_released_with_the_guard() {
    let servers = servers(5);
    let clients = clients(&servers);
    let red = red_lock(&clients, "late");
    // Every server knows the script now: a late EVALSHA will not fail with
    // NOSCRIPT.
    red.lock().unwrap().unlock().unwrap();

    // The first server tried stalls: its acquire times out (1 s), the other
    // four make the majority.
    servers[0].cmd::<String>(&["CONFIG", "RESETSTAT"]);
    servers[0].freeze();
    let guard = red.lock().expect("four of five servers answer");
    assert_eq!(guard.servers_held(), 4);
    // It resumes and runs the acquire it had received, and right behind it
    // the undo the failed member call wrote on the same connection: the
    // late hold does not stay until the guard's release.
    servers[0].thaw();
    let scripts_run = || {
        let stats: String = servers[0].cmd(&["INFO", "commandstats"]);
        stats
            .split("cmdstat_evalsha:calls=")
            .nth(1)
            .and_then(|rest| rest.split(',').next()?.parse::<u64>().ok())
            .unwrap_or(0)
    };
    // The late acquire, then its undo.
    bounded::wait_until(Duration::from_secs(5), || scripts_run() >= 2)
        .expect("the stalled server ran the late acquire and its undo once resumed");
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        !servers[0].exists("late"),
        "the late acquire's hold stayed on the resumed server"
    );

    drop(guard);
    assert_eq!(
        locked_on(&servers, "late"),
        0,
        "a released RedLock left the lock on a server"
    );
}

#[test]
fn validity_follows_the_watchdog_renewals() {
    let servers = servers(3);
    let timeout = Duration::from_secs(3);
    let clients: Vec<_> = servers
        .iter()
        .map(|s| s.client_with_watchdog(timeout))
        .collect();
    let guard = red_lock(&clients, "renewed").lock().unwrap();
    let validity = guard.validity();
    assert!(
        validity > Duration::ZERO && validity < timeout,
        "validity {validity:?} at first"
    );

    // Past the watchdog timeout: the locks were renewed, so is the validity.
    thread::sleep(timeout + timeout / 2);
    assert!(guard.is_held());
    assert_eq!(locked_on(&servers, "renewed"), 3);
    let validity = guard.validity();
    assert!(
        validity > Duration::ZERO && validity < timeout,
        "validity {validity:?} after {:?} of renewals",
        timeout + timeout / 2
    );
    guard.unlock().unwrap();
}

/// A waiting `lock()` whose clients are shut down (too many of them for a
/// majority) ends with `Shutdown` instead of trying forever; with enough
/// clients left it still gets the lock.
#[test]
fn lock_ends_when_too_few_clients_are_left() {
    let servers = servers(3);
    let clients = clients(&servers);
    clients[0].shutdown().unwrap();
    let two_left = red_lock(&clients, "few-left");
    drop(
        two_left
            .lock()
            .expect("two of three servers are a majority"),
    );

    clients[1].shutdown().unwrap();
    let one_left = red_lock(&clients, "few-left");
    let waiter = bounded::spawn("red lock", move || one_left.lock().map(drop));
    assert!(matches!(
        waiter.join_within(Duration::from_secs(10)),
        Err(redhold::Error::Shutdown)
    ));
    assert_eq!(locked_on(&servers, "few-left"), 0);
}

/// Issue 33, defect 4: a RedLock's unlock while one member's server is
/// stalled reports that member unconfirmed, and the release still runs
/// when the server resumes: the member's key does not stay for its lease.
#[test]
fn a_release_on_a_stalled_member_runs_when_it_resumes() {
    let servers = servers(3);
    let clients = clients(&servers);
    let red = red_lock(&clients, "stalled-unlock");
    // Every server knows the scripts: a late EVALSHA will not fail with
    // NOSCRIPT.
    red.lock().unwrap().unlock().unwrap();

    let guard = red
        .lock_with_lease(Duration::from_secs(600))
        .expect("every server answers");
    assert_eq!(guard.servers_held(), 3);
    servers[0].freeze();
    let unlocked = guard.unlock();
    assert!(
        unlocked.is_err(),
        "a stalled member's release cannot be confirmed: {unlocked:?}"
    );
    servers[0].thaw();
    bounded::wait_until(Duration::from_secs(5), || {
        !servers[0].exists("stalled-unlock")
    })
    .expect("the stalled member's key stayed after it resumed");
    assert_eq!(locked_on(&servers, "stalled-unlock"), 0);
}
