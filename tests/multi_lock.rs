//! MultiLock: all or nothing over several plain locks on several servers.

mod bounded;
mod support;

use std::thread;
use std::time::{Duration, Instant};

use redhold::{Error, MultiLock};
use support::RedisServer;

#[test]
fn takes_locks_on_two_servers_and_releases_them_all() {
    let (a, b) = (RedisServer::start(), RedisServer::start());
    let (ca, cb) = (a.client(), b.client());
    let multi = MultiLock::new(vec![ca.lock("m:1"), ca.lock("m:2"), cb.lock("m:3")]);
    let guard = multi.lock().unwrap();
    assert!(guard.is_held());
    assert_eq!(a.cmd::<u32>(&["EXISTS", "m:1", "m:2"]), 2);
    assert_eq!(b.cmd::<u32>(&["EXISTS", "m:3"]), 1);
    guard.unlock().unwrap();
    assert_eq!(a.cmd::<u32>(&["EXISTS", "m:1", "m:2"]), 0);
    assert_eq!(b.cmd::<u32>(&["EXISTS", "m:3"]), 0);
}

#[test]
fn a_failed_try_leaves_nothing_locked() {
    let server = RedisServer::start();
    let (mine, theirs) = (server.client(), server.client());
    // Held elsewhere: the last lock of the set.
    let other = bounded::spawn("holder", move || {
        let guard = theirs.lock("f:3").lock().unwrap();
        thread::sleep(Duration::from_secs(2));
        drop(guard);
    });
    while server.cmd::<u32>(&["EXISTS", "f:3"]) == 0 {
        thread::sleep(Duration::from_millis(5));
    }
    let multi = MultiLock::new(vec![mine.lock("f:1"), mine.lock("f:2"), mine.lock("f:3")]);
    assert!(multi.try_lock().unwrap().is_none());
    assert_eq!(
        server.cmd::<u32>(&["EXISTS", "f:1", "f:2"]),
        0,
        "try_lock left locks behind"
    );

    let started = Instant::now();
    let outcome = multi.try_lock_for(Duration::from_millis(300)).unwrap();
    assert!(outcome.is_none());
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "waited {:?}",
        started.elapsed()
    );
    assert_eq!(
        server.cmd::<u32>(&["EXISTS", "f:1", "f:2"]),
        0,
        "try_lock_for left locks behind"
    );

    // Once the holder lets go, the whole set can be had.
    let guard = multi
        .try_lock_for(Duration::from_secs(10))
        .unwrap()
        .expect("free after release");
    assert_eq!(server.cmd::<u32>(&["EXISTS", "f:1", "f:2", "f:3"]), 3);
    drop(guard);
    other.join_within(Duration::from_secs(10));
}

#[test]
fn overlapping_sets_in_opposite_orders_do_not_deadlock_and_exclude_each_other() {
    let server = RedisServer::start();
    let counter_url = server.url();
    let mut workers = Vec::new();
    for t in 0..4 {
        let client = server.client();
        let url = counter_url.clone();
        workers.push(bounded::spawn(&format!("w{t}"), move || {
            let names = if t % 2 == 0 { ["x", "y"] } else { ["y", "x"] };
            let multi = MultiLock::new(names.iter().map(|n| client.lock(*n)).collect());
            let mut conn = redis::Client::open(url).unwrap().get_connection().unwrap();
            for _ in 0..25 {
                let _both = multi.lock().unwrap();
                let n: i64 = redis::cmd("GET")
                    .arg("counter")
                    .query::<Option<i64>>(&mut conn)
                    .unwrap()
                    .unwrap_or(0);
                redis::cmd("SET")
                    .arg("counter")
                    .arg(n + 1)
                    .query::<()>(&mut conn)
                    .unwrap();
            }
        }));
    }
    for w in workers {
        w.join_within(Duration::from_secs(60));
    }
    assert_eq!(server.cmd::<i64>(&["GET", "counter"]), 100);
}

#[test]
fn an_empty_set_is_refused() {
    let server = RedisServer::start();
    let _client = server.client();
    assert!(matches!(
        MultiLock::new(vec![]).try_lock(),
        Err(Error::InvalidArgument { .. })
    ));
}

/// One server of three stalls (SIGSTOP) while the set is taken: the call
/// waits the stall out on that lock, whichever lock of the set it is, and
/// whatever the stalled server ran late is re-entered and given back, so
/// that the guard's release leaves nothing locked anywhere.
#[test]
fn a_stalled_member_is_waited_out_and_leaves_nothing_locked() {
    let servers = [
        RedisServer::start(),
        RedisServer::start(),
        RedisServer::start(),
    ];
    let clients: Vec<_> = servers
        .iter()
        .map(|s| {
            s.builder()
                .connect_timeout(Duration::from_millis(200))
                .response_timeout(Duration::from_millis(200))
                .retry_attempts(1)
                .retry_delay(Duration::from_millis(20))
                .watchdog_timeout(Duration::from_secs(5))
                .build()
                .expect("client")
        })
        .collect();
    let names = ["st:1", "st:2", "st:3"];
    let multi = MultiLock::new(
        clients
            .iter()
            .zip(names)
            .map(|(c, name)| c.lock(name))
            .collect(),
    );
    for stalled in [1, 2] {
        servers[stalled].freeze();
        let guard = thread::scope(|scope| {
            let thaw = scope.spawn(|| {
                thread::sleep(Duration::from_millis(1200));
                servers[stalled].thaw();
            });
            let guard = multi.lock();
            thaw.join().expect("thaw");
            guard.expect("the stall is waited out")
        });
        for (server, name) in servers.iter().zip(names) {
            let counts: Vec<i64> = server.cmd(&["HVALS", name]);
            assert_eq!(counts, [1], "{name} with server {stalled} stalled");
        }
        drop(guard);
        for (server, name) in servers.iter().zip(names) {
            assert!(
                !server.exists(name),
                "{name} left held (server {stalled} stalled)"
            );
        }
    }
}

/// Issue 33, defect 4: a MultiLock whose member's server is stalled fails,
/// the server resumes and runs the acquire that timed out, and the undo
/// written behind it gives that member back at once: nothing stays locked
/// after the error (before: held for the whole 5 s lease).
#[test]
fn a_member_acquired_late_by_a_stalled_server_is_given_back_when_it_resumes() {
    let servers: Vec<RedisServer> = (0..3).map(|_| RedisServer::start()).collect();
    let clients: Vec<redhold::Client> = servers
        .iter()
        .map(|s| {
            s.builder()
                .retry_attempts(0)
                .response_timeout(Duration::from_millis(500))
                .build()
                .unwrap()
        })
        .collect();
    let multi = MultiLock::new(clients.iter().map(|c| c.lock("m-late")).collect());
    // Every server knows the scripts: a late EVALSHA will not say NOSCRIPT.
    multi.lock().unwrap().unlock().unwrap();

    servers[1].freeze();
    let got = multi.try_lock_for_with_lease(Duration::from_secs(1), Duration::from_secs(5));
    assert!(got.is_err(), "a stalled member cannot be taken: {got:?}");
    servers[1].thaw();
    let free = bounded::wait_until(Duration::from_secs(3), || {
        servers
            .iter()
            .all(|s| s.try_cmd::<u32>(&["EXISTS", "m-late"]).unwrap_or(1) == 0)
    });
    assert!(
        free.is_some(),
        "a member stayed locked after the MultiLock failed (PTTL {} ms on the resumed server)",
        servers[1].cmd::<i64>(&["PTTL", "m-late"])
    );
}
