//! Passwords kept off the command line (environment, `--password-file`)
//! and never printed; names that would break a terminal printed escaped.
//! The real binary against real servers with `requirepass`.

mod binary;
#[path = "../../tests/support/mod.rs"]
mod support;

use std::fs;

use binary::{redhold, redhold_with_env};
use support::cluster::RedisCluster;
use support::sentinel::{SentinelSetup, MASTER_NAME};
use support::RedisServer;

const PASSWORD: &str = "s3cret/PW@x";

/// The exit code `--help` documents for "Redis refused access".
const ACCESS_DENIED: i32 = 4;

fn server_with_password() -> RedisServer {
    RedisServer::start_with_args(&["--requirepass", PASSWORD])
}

#[test]
fn help_says_argv_is_visible_and_names_the_other_ways() {
    let help = redhold(&["--help"]).expect_code(0).stdout.clone();
    for words in [
        "visible to every user",
        "REDHOLD_PASSWORD",
        "REDISCLI_AUTH",
        "--password-file",
    ] {
        assert!(help.contains(words), "--help lacks {words:?}:\n{help}");
    }
}

#[test]
fn the_password_comes_from_the_environment() {
    let server = server_with_password();
    let url = server.url_without_password();
    redhold(&["--url", &url, "list"])
        .expect_code(ACCESS_DENIED)
        .expect_one_line_error();
    for variable in ["REDHOLD_PASSWORD", "REDISCLI_AUTH"] {
        let run = redhold_with_env(&["--url", &url, "list"], &[(variable, PASSWORD)]);
        run.expect_code(0);
    }
    // REDIS_URL without a password takes it from the environment too.
    let run = redhold_with_env(
        &["list"],
        &[("REDIS_URL", &url), ("REDHOLD_PASSWORD", PASSWORD)],
    );
    run.expect_code(0);
}

#[test]
fn the_password_comes_from_a_file() {
    let server = server_with_password();
    let url = server.url_without_password();
    let file = server.dir().join("password");
    fs::write(&file, format!("{PASSWORD}\n")).unwrap();
    let path = file.to_str().unwrap();
    redhold(&["--url", &url, "--password-file", path, "list"]).expect_code(0);

    let run = redhold(&["--url", &url, "--password-file", "/nonexistent/pw", "list"]);
    run.expect_code(2).expect_one_line_error();
    fs::write(&file, "wrong-password\n").unwrap();
    let run = redhold(&["--url", &url, "--password-file", path, "list"]);
    run.expect_code(ACCESS_DENIED).expect_one_line_error();
    assert!(!run.stderr.contains("wrong-password"), "{}", run.stderr);
}

#[test]
fn the_password_reaches_every_cluster_node() {
    let cluster = RedisCluster::start(3);
    let nodes: Vec<String> = (0..cluster.len())
        .map(|i| format!("127.0.0.1:{}", cluster.node(i).port()))
        .collect();
    for i in 0..cluster.len() {
        cluster
            .node(i)
            .cmd::<()>(&["CONFIG", "SET", "requirepass", PASSWORD]);
    }
    let nodes = nodes.join(",");
    let run = redhold(&["--cluster", &nodes, "list"]);
    run.expect_code(ACCESS_DENIED).expect_one_line_error();
    // `list` asks every master: each one needs the password.
    let run = redhold_with_env(
        &["--cluster", &nodes, "list", "--json"],
        &[("REDISCLI_AUTH", PASSWORD)],
    );
    run.expect_code(0);
}

#[test]
fn the_password_reaches_every_sentinel_and_the_master() {
    let setup = SentinelSetup::start();
    setup.require_password(PASSWORD);
    let nodes: Vec<String> = setup
        .sentinel_urls()
        .iter()
        .map(|u| {
            u.trim_start_matches("redis://")
                .trim_end_matches('/')
                .to_owned()
        })
        .collect();
    let nodes = nodes.join(",");
    let args = ["--sentinel", &nodes, "--master", MASTER_NAME, "list"];
    redhold(&args)
        .expect_code(ACCESS_DENIED)
        .expect_one_line_error();
    redhold_with_env(&args, &[("REDHOLD_PASSWORD", PASSWORD)]).expect_code(0);
}

#[test]
fn no_form_of_url_password_reaches_stderr() {
    for url in [
        "redis+unix:///nonexistent/x.sock?pass=s3cretPW",
        "redis://:s3cret/PW@127.0.0.1:1/",
        "redis://user:s3cretPW@127.0.0.1:1/",
    ] {
        let run = redhold(&["--url", url, "--connect-timeout", "1", "list"]);
        run.expect_one_line_error();
        assert!(
            !run.stderr.contains("s3cret") && !run.stdout.contains("s3cret"),
            "{url}: {}",
            run.stderr
        );
        let run = redhold(&["--cluster", url, "--connect-timeout", "1", "list"]);
        assert!(!run.stderr.contains("s3cret"), "{url}: {}", run.stderr);
    }
}

#[test]
fn names_with_control_characters_are_printed_escaped() {
    let server = RedisServer::start();
    let client = server.client();
    let name = "evil\x1b[2J\rname\nsplit";
    let lock = client.lock(name);
    let _guard = lock.lock().unwrap();
    let url = server.url();
    for args in [vec!["list"], vec!["show", name]] {
        let mut full = vec!["--url", &url[..]];
        full.extend(args.iter().copied());
        let run = redhold(&full);
        run.expect_code(0);
        assert!(
            !run.stdout.contains('\x1b') && !run.stdout.contains('\r'),
            "{args:?} printed raw controls: {:?}",
            run.stdout
        );
        assert!(
            run.stdout.contains(r#""evil\x1b[2J\rname\nsplit""#),
            "{args:?}: {:?}",
            run.stdout
        );
    }
}
