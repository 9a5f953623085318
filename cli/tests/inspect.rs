//! `redhold list`, `show` and `watch` on a real redis-server holding locks
//! of every kind, taken by redhold clients in this process.

mod binary;
#[path = "../../tests/bounded/mod.rs"]
mod bounded;
#[path = "../../tests/support/mod.rs"]
mod support;

use std::collections::BTreeSet;
use std::time::Duration;

use binary::{redhold, Running};
use bounded::wait_until;
use serde_json::{json, Value};
use support::RedisServer;

/// Generous bound for anything that should take milliseconds.
const PROMPTLY: Duration = Duration::from_secs(10);

fn show(url: &str, name: &str) -> Value {
    redhold(&["--url", url, "show", name, "--json"])
        .expect_code(0)
        .json()
}

/// `holders` of a `show --json` object, without the thread numbers.
fn holder_clients(info: &Value) -> Vec<(String, u64, bool)> {
    info["holders"]
        .as_array()
        .expect("holders is a list")
        .iter()
        .map(|h| {
            assert!(h["thread"].as_u64().is_some(), "thread is a number: {h}");
            (
                h["client"].as_str().expect("client").to_owned(),
                h["count"].as_u64().expect("count"),
                h["write"].as_bool().expect("write"),
            )
        })
        .collect()
}

#[test]
fn every_kind_is_listed_and_shown() {
    let server = RedisServer::start();
    let url = server.url();
    let client = server.client();
    let id = client.id().hyphenated().to_string();

    let plain = client.lock("plain");
    let _plain1 = plain.lock().unwrap();
    let _plain2 = plain.lock().unwrap();
    let fenced = client.fenced_lock("fenced");
    let fenced_guard = fenced.lock().unwrap();
    // A name with its own hash tag: helpers are not wrapped again.
    let read = client.read_write_lock("{cfg}:rw");
    let _read = read.read().lock().unwrap();
    let write = client.read_write_lock("doc");
    let _write = write.write().lock().unwrap();
    let fair = client.fair_lock("fair");
    let _fair = fair.lock().unwrap();

    // Two fair waiters from two other clients, queued in a known order.
    let first = server.client();
    let second = server.client();
    let mut waiters = Vec::new();
    for (n, waiter) in [first.clone(), second.clone()].into_iter().enumerate() {
        waiters.push(bounded::spawn(&format!("fair-waiter-{n}"), move || {
            waiter.fair_lock("fair").lock().map(drop)
        }));
        let queued = wait_until(PROMPTLY, || {
            server.cmd::<usize>(&["LLEN", "redisson_lock_queue:{fair}"]) == n + 1
        });
        assert!(queued.is_some(), "waiter {n} did not queue");
    }

    // Things that are not locks: helpers, latches, other values.
    // Only a release that leaves a hold writes a latch: take two, give both.
    let gone = client.lock("released");
    let outer = gone.lock().unwrap();
    gone.lock().unwrap().unlock().unwrap();
    outer.unlock().unwrap();
    assert!(!server
        .cmd::<Vec<String>>(&["KEYS", "redisson_unlock_latch:*"])
        .is_empty());
    server.cmd::<()>(&["HSET", "user:1", "name", "Ada"]);
    server.cmd::<()>(&["SET", "greeting", "hello"]);

    // list --json: one array, exactly the locks.
    let listed = redhold(&["--url", &url, "list", "--json"])
        .expect_code(0)
        .json();
    let names: BTreeSet<&str> = listed
        .as_array()
        .expect("list --json prints one array")
        .iter()
        .map(|l| l["name"].as_str().expect("name"))
        .collect();
    assert_eq!(
        names,
        BTreeSet::from(["plain", "fenced", "{cfg}:rw", "doc", "fair"])
    );

    // list: one line per lock under a header.
    let table = redhold(&["--url", &url, "list"])
        .expect_code(0)
        .stdout
        .clone();
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), 6, "{table}");
    assert!(lines[0].starts_with("NAME"), "{table}");
    for (name, kind, mode) in [
        ("doc", "read_write", "write"),
        ("fair", "fair", "-"),
        ("fenced", "fenced", "-"),
        ("plain", "lock", "-"),
        ("{cfg}:rw", "read_write", "read"),
    ] {
        let line = lines
            .iter()
            .find(|l| l.split_whitespace().next() == Some(name))
            .unwrap_or_else(|| panic!("no line for {name} in\n{table}"));
        let cells: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(&cells[1..3], [kind, mode], "{line}");
    }
    // The fair lock's waiters column is its queue length.
    let fair_line = lines.iter().find(|l| l.starts_with("fair ")).unwrap();
    assert!(fair_line.trim_end().ends_with(" 2"), "{fair_line}");

    // A pattern narrows the list, to fair queues too (here one object per
    // line); nothing matching is an empty array.
    let narrowed = redhold(&["--url", &url, "list", "--json-lines", "f*"])
        .expect_code(0)
        .json_lines();
    let names: BTreeSet<&str> = narrowed
        .iter()
        .map(|l| l["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, BTreeSet::from(["fenced", "fair"]));
    let none = redhold(&["--url", &url, "list", "--json", "nothing*"])
        .expect_code(0)
        .json();
    assert_eq!(none, json!([]));

    // show --json, kind by kind.
    let info = show(&url, "plain");
    assert_eq!(info["kind"], "lock");
    assert_eq!(info["locked"], true);
    assert_eq!(info["mode"], Value::Null);
    assert_eq!(info["token"], Value::Null);
    assert_eq!(info["queue"], json!([]));
    assert_eq!(info["subscribers"], 0);
    let ttl = info["ttl_ms"].as_u64().expect("a TTL");
    assert!(ttl > 0 && ttl <= 30_000, "{info}");
    assert_eq!(holder_clients(&info), [(id.clone(), 2, false)]);

    let info = show(&url, "fenced");
    assert_eq!(info["kind"], "fenced");
    assert_eq!(info["token"], fenced_guard.token());
    assert_eq!(holder_clients(&info), [(id.clone(), 1, false)]);

    let info = show(&url, "{cfg}:rw");
    assert_eq!(info["kind"], "read_write");
    assert_eq!(info["mode"], "read");
    assert_eq!(holder_clients(&info), [(id.clone(), 1, false)]);

    let info = show(&url, "doc");
    assert_eq!(info["kind"], "read_write");
    assert_eq!(info["mode"], "write");
    assert_eq!(holder_clients(&info), [(id.clone(), 1, true)]);

    let info = show(&url, "fair");
    assert_eq!(info["kind"], "fair");
    assert_eq!(holder_clients(&info), [(id.clone(), 1, false)]);
    let queue = info["queue"].as_array().unwrap();
    assert_eq!(queue.len(), 2, "{info}");
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    for (entry, waiter) in queue.iter().zip([&first, &second]) {
        assert_eq!(entry["client"], waiter.id().to_string(), "{info}");
        assert!(entry["thread"].is_u64(), "{info}");
        let field = entry["field"].as_str().unwrap();
        assert!(field.starts_with(&format!("{}:", waiter.id())), "{info}");
        // The queue entry's deadline lies ahead, in Unix milliseconds.
        let deadline = entry["deadline_ms"].as_u64().expect("a deadline");
        assert!(deadline > now_ms - 60_000, "{info}");
    }
    // Each waiter listens on its own channel, on its client's connection.
    assert_eq!(info["subscribers"], 2, "{info}");

    // show, as text.
    let text = redhold(&["--url", &url, "show", "fair"])
        .expect_code(0)
        .stdout
        .clone();
    assert!(text.contains("kind:        fair"), "{text}");
    assert!(text.contains("queue:       2"), "{text}");
    // First in line: its client's name@host:pid, then its holder id.
    let line = text
        .lines()
        .find(|l| l.starts_with("  1. "))
        .expect("a first waiter");
    assert!(
        line.contains(&format!("@{}:", first.identity().host)),
        "{text}"
    );
    assert!(line.contains(&format!("({}:", first.id())), "{text}");

    // A name with no lock, and names that hold something else.
    let info = show(&url, "nothing-here");
    assert_eq!(info["locked"], false);
    assert_eq!(info["holders"], json!([]));
    assert_eq!(info["ttl_ms"], Value::Null);
    for other in ["user:1", "greeting"] {
        let run = redhold(&["--url", &url, "show", other]);
        run.expect_code(1).expect_one_line_error();
        assert!(run.stderr.contains("is not a lock"), "{}", run.stderr);
    }

    // Let the fair waiters through and finish.
    drop(_fair);
    for waiter in waiters {
        waiter.join_within(PROMPTLY).unwrap();
    }
}

#[test]
fn watch_redraws_when_the_holders_change() {
    let server = RedisServer::start();
    let url = server.url();
    let client = server.client_with_watchdog(Duration::from_millis(300));
    let watch = Running::start(&["--url", &url, "watch", "watched", "--interval", "50"]);
    let is = |want: &'static str| move |line: &str| line == format!("locked:      {want}");

    watch.lines_until(PROMPTLY, is("no"));
    let guard = client.lock("watched").lock().unwrap();
    let drawn = watch.lines_until(PROMPTLY, is("yes"));
    assert!(
        drawn.iter().any(|l| l.starts_with("watched at ")),
        "{drawn:?}"
    );
    // The rest of that screen, up to the blank line that ends it.
    watch.lines_until(PROMPTLY, str::is_empty);
    // The watchdog renews the lock every 100 ms: a new TTL alone is not
    // worth a redraw.
    let idle = watch.lines_for(Duration::from_millis(700));
    assert!(idle.is_empty(), "redrawn without a change: {idle:?}");
    guard.unlock().unwrap();
    watch.lines_until(PROMPTLY, is("no"));
}

/// A server restart does not end `watch`: it says it is reconnecting, and
/// draws the lock again once the server is back.
#[test]
fn watch_rides_out_a_server_restart() {
    let mut server = RedisServer::start();
    let url = server.url();
    let watch = Running::start(&["--url", &url, "watch", "restarted", "--interval", "50"]);
    watch.lines_until(PROMPTLY, |line| line == "locked:      no");

    server.stop();
    watch.lines_until(PROMPTLY, |line| line.contains("reconnecting"));
    server.start_again();
    watch.lines_until(PROMPTLY, |line| line.contains("reconnected after"));
    watch.lines_until(PROMPTLY, |line| line == "locked:      no");

    // And it still follows the lock.
    let client = server.client();
    let _guard = client.lock("restarted").lock().unwrap();
    watch.lines_until(PROMPTLY, |line| line == "locked:      yes");
}

/// `show` and `list` say who holds a lock: `name@host:pid (uuid:thread)`,
/// and in JSON `client_name`, `host` and `pid`.
#[test]
fn holders_are_shown_by_name_host_and_pid() {
    let server = RedisServer::start();
    let url = server.url();
    let client = server.builder().name("nightly-report").build().unwrap();
    let me = client.identity().clone();
    let _guard = client.lock("named").lock().unwrap();

    let text = redhold(&["--url", &url, "show", "named"])
        .expect_code(0)
        .stdout
        .clone();
    let who = format!("nightly-report@{}:{} ({}:", me.host, me.pid, client.id());
    assert!(text.contains(&who), "{text}");

    let info = show(&url, "named");
    let holder = &info["holders"][0];
    assert_eq!(holder["client_name"], "nightly-report", "{info}");
    assert_eq!(holder["host"], me.host.as_str(), "{info}");
    assert_eq!(holder["pid"], me.pid, "{info}");

    let table = redhold(&["--url", &url, "list"])
        .expect_code(0)
        .stdout
        .clone();
    assert!(table.contains("nightly-report@"), "{table}");
}

/// `list` pads its columns by display width: a name of wide characters
/// (two terminal columns each) still lines up with the others.
#[test]
fn list_columns_line_up_by_display_width() {
    let server = RedisServer::start();
    let client = server.client();
    let _wide = client.lock("注文:42").lock().unwrap();
    let _plain = client.lock("orders:4242").lock().unwrap();
    let table = redhold(&["--url", &server.url(), "list"])
        .expect_code(0)
        .stdout
        .clone();
    // The display column where KIND starts, on every row.
    let kind_column = |line: &str| {
        let at = line
            .find("lock")
            .unwrap_or_else(|| panic!("no kind in {line:?}"));
        line[..at]
            .chars()
            .map(|c| if c.is_ascii() { 1 } else { 2 })
            .sum::<usize>()
    };
    let rows: Vec<&str> = table.lines().skip(1).collect();
    assert_eq!(rows.len(), 2, "{table}");
    assert_eq!(kind_column(rows[0]), kind_column(rows[1]), "{table}");
    assert_eq!(
        table.lines().next().unwrap().find("KIND"),
        Some(kind_column(rows[0])),
        "{table}"
    );
}
