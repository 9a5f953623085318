//! `redhold show` and `redhold list --counters` on semaphores and
//! count-down latches (issue 24), taken by redhold clients in this process.

mod binary;
#[path = "../../tests/support/mod.rs"]
mod support;

use std::time::Duration;

use binary::redhold;
use serde_json::Value;
use support::RedisServer;

#[test]
fn show_prints_a_semaphore_or_latch_and_an_expirable_semaphore() {
    let server = RedisServer::start();
    let url = server.url();
    let client = server.client();
    let semaphore = client.semaphore("pool");
    semaphore.try_set_permits(4).unwrap();
    let _permit = semaphore.acquire().unwrap();
    let expirable = client.permit_expirable_semaphore("leases");
    expirable.try_set_permits(2).unwrap();
    let permit = expirable.acquire(Duration::from_secs(60)).unwrap();

    let text = redhold(&["--url", &url, "show", "pool"])
        .expect_code(0)
        .stdout
        .clone();
    assert!(text.contains("kind:        semaphore or latch"), "{text}");
    assert!(text.contains("value:       3"), "{text}");

    let text = redhold(&["--url", &url, "show", "leases"])
        .expect_code(0)
        .stdout
        .clone();
    assert!(text.contains("kind:        expirable semaphore"), "{text}");
    assert!(text.contains("available:   1"), "{text}");
    assert!(
        text.contains(&format!("{}  lease ends in", permit.id())),
        "{text}"
    );

    let doc: Value = redhold(&["--url", &url, "show", "leases", "--json"])
        .expect_code(0)
        .json();
    assert_eq!(doc["kind"], "expirable semaphore");
    assert_eq!(doc["value"], 1);
    assert_eq!(doc["permits_out"][0]["id"], permit.id());
    let left = doc["permits_out"][0]["lease_left_ms"].as_u64().expect("ms");
    assert!(left > 30_000 && left <= 60_000, "{doc}");
}

#[test]
fn show_of_a_word_still_says_it_is_not_a_lock() {
    let server = RedisServer::start();
    let url = server.url();
    let () = server.cmd(&["SET", "word", "hello"]);
    let run = redhold(&["--url", &url, "show", "word"]);
    run.expect_one_line_error();
    assert_ne!(run.code, 0);
    assert!(run.stderr.contains("word"), "{}", run.stderr);
}

#[test]
fn list_counters_prints_a_table_or_one_json_array() {
    let server = RedisServer::start();
    let url = server.url();
    let client = server.client();
    client.semaphore("app:pool").try_set_permits(2).unwrap();
    client
        .count_down_latch("app:start")
        .try_set_count(3)
        .unwrap();
    let _held = client.lock("app:lock").lock().unwrap();

    let table = redhold(&["--url", &url, "list", "--counters", "app:*"])
        .expect_code(0)
        .stdout
        .clone();
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), 3, "{table}");
    assert!(lines[0].starts_with("NAME"), "{table}");
    assert!(
        lines[1].starts_with("app:pool") && lines[1].contains(" 2"),
        "{table}"
    );
    assert!(
        lines[2].starts_with("app:start") && lines[2].contains(" 3"),
        "{table}"
    );

    let all: Value = redhold(&["--url", &url, "list", "--counters", "--json"])
        .expect_code(0)
        .json();
    let names: Vec<&str> = all
        .as_array()
        .expect("one array")
        .iter()
        .map(|c| c["name"].as_str().expect("name"))
        .collect();
    assert_eq!(names, ["app:pool", "app:start"]);

    let none: Value = redhold(&["--url", &url, "list", "--counters", "--json", "nothing:*"])
        .expect_code(0)
        .json();
    assert_eq!(none, Value::Array(vec![]));
}
