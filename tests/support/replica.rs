//! A master and one replica of it, each a [`RedisServer`] of its own.

use std::thread;
use std::time::{Duration, Instant};

use super::RedisServer;

/// How long the replica may take to be in sync with a fresh master (well
/// under a second with diskless sync and no delay).
const SYNC_TIMEOUT: Duration = Duration::from_secs(10);

/// Starts a master and a replica of it, both with diskless sync and no
/// delay (otherwise the first sync waits ~5 s), and `DEBUG` enabled for
/// tests that stall one (see [`super::version`]); returns once the replica
/// is in sync and acknowledges writes on request (see [`wait_for_acks`]).
///
/// # Panics
///
/// If either does not start, or the replica is not in sync within 10 s.
pub(crate) fn start_pair() -> (RedisServer, RedisServer) {
    start_pair_with_master_args(&[])
}

/// As [`start_pair`], with `master_args` added to the master's arguments.
///
/// # Panics
///
/// As [`start_pair`] does.
pub(crate) fn start_pair_with_master_args(master_args: &[&str]) -> (RedisServer, RedisServer) {
    let mut common = vec!["--repl-diskless-sync-delay", "0"];
    common.extend_from_slice(super::server_version().debug_command_args());
    let mut args = common.clone();
    args.extend_from_slice(master_args);
    let master = RedisServer::start_with_args(&args);
    let master_port = master.port().to_string();
    let mut args = vec!["--replicaof", "127.0.0.1", &master_port];
    args.extend_from_slice(&common);
    let replica = RedisServer::start_with_args(&args);
    wait_for_replica(&master, &replica, SYNC_TIMEOUT);
    wait_for_acks(&master, SYNC_TIMEOUT);
    (master, replica)
}

/// Waits until a write on `master` followed by `WAIT 1 100` is acknowledged.
///
/// Redis 7.0 reports a fresh replica online (`state=online`,
/// `master_link_status:up`) up to ~0.5 s before the replica answers the
/// master's `REPLCONF GETACK`; on a busy machine a `WAIT` in that window
/// times out with 0 replicas. Tests of `sync_replicas` must start after it.
///
/// # Panics
///
/// If no write is acknowledged within `limit`.
pub(crate) fn wait_for_acks(master: &RedisServer, limit: Duration) {
    let deadline = Instant::now() + limit;
    let mut con = master.connection();
    let key = "redhold-test:replication-probe";
    for step in ["SET", "DEL"] {
        loop {
            let mut cmd = redis::cmd(step);
            cmd.arg(key);
            if step == "SET" {
                cmd.arg("1");
            }
            let _: () = cmd.query(&mut con).expect("probe write");
            let acked: i64 = redis::cmd("WAIT")
                .arg(1)
                .arg(100)
                .query(&mut con)
                .expect("WAIT");
            if acked >= 1 {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the replica of :{} acknowledged no write within {limit:?}",
                master.port()
            );
        }
    }
}

/// Waits until `replica` reports its link to `master` up and `master` sees
/// it online.
///
/// # Panics
///
/// If that does not happen within `limit` (the message has both views).
pub(crate) fn wait_for_replica(master: &RedisServer, replica: &RedisServer, limit: Duration) {
    let deadline = Instant::now() + limit;
    loop {
        let replica_view = replica
            .try_cmd::<String>(&["INFO", "replication"])
            .unwrap_or_default();
        let master_view = master
            .try_cmd::<String>(&["INFO", "replication"])
            .unwrap_or_default();
        let online = format!("port={},state=online", replica.port());
        if replica_view.contains("master_link_status:up") && master_view.contains(&online) {
            return;
        }
        if Instant::now() >= deadline {
            panic!(
                "replica :{} not in sync with master :{} within {limit:?}\n\
                 --- replica ---\n{replica_view}\n--- master ---\n{master_view}",
                replica.port(),
                master.port()
            );
        }
        thread::sleep(Duration::from_millis(20));
    }
}
