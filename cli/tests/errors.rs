//! What `redhold` does when it cannot do its work: one line on stderr and
//! the exit code `--help` documents, never a panic.

mod binary;
#[path = "../../tests/support/mod.rs"]
mod support;

use std::net::{Ipv4Addr, TcpListener};

use binary::redhold;
use support::RedisServer;

/// A local port nothing listens on (the OS picked it free a moment ago).
fn closed_port() -> u16 {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

#[test]
fn help_documents_the_exit_codes() {
    let run = redhold(&["--help"]);
    run.expect_code(0);
    for line in [
        "Exit codes:",
        "1  a Redis command failed",
        "2  bad command line",
        "3  Redis unreachable",
        "4  Redis refused access",
        "5  force-unlock not confirmed",
    ] {
        assert!(
            run.stdout.contains(line),
            "{line:?} missing from\n{}",
            run.stdout
        );
    }
}

#[test]
fn an_unreachable_server_is_named() {
    let url = format!("redis://127.0.0.1:{}/", closed_port());
    for command in [
        &["list"][..],
        &["show", "x"],
        &["force-unlock", "x", "--yes"],
    ] {
        let mut args = vec!["--url", &url];
        args.extend_from_slice(command);
        let run = redhold(&args);
        run.expect_code(3).expect_one_line_error();
        assert!(run.stderr.contains(&url), "{}", run.stderr);
    }
    let node = format!("127.0.0.1:{}", closed_port());
    let run = redhold(&["--cluster", &node, "list"]);
    run.expect_code(3).expect_one_line_error();
    assert!(run.stderr.contains(&node), "{}", run.stderr);
}

#[test]
fn a_server_that_does_not_answer_fails_within_the_timeouts() {
    let server = RedisServer::start();
    server.freeze();
    let run = redhold(&["--url", &server.url(), "--connect-timeout", "1", "list"]);
    server.thaw();
    run.expect_code(3).expect_one_line_error();
    assert!(run.stderr.contains(&server.url()), "{}", run.stderr);
}

#[test]
fn wrong_or_missing_credentials_are_access_errors() {
    let server = RedisServer::start_with_args(&["--requirepass", "secret"]);
    let port = server.port();
    let wrong = format!("redis://:guess@127.0.0.1:{port}/");
    let run = redhold(&["--url", &wrong, "list"]);
    run.expect_code(4).expect_one_line_error();
    assert!(
        !run.stderr.contains("guess"),
        "password shown: {}",
        run.stderr
    );
    assert!(
        run.stderr.contains(&format!("127.0.0.1:{port}")),
        "{}",
        run.stderr
    );

    let run = redhold(&["--url", &server.url_without_password(), "show", "x"]);
    run.expect_code(4).expect_one_line_error();

    // A user that may connect but not read the locks.
    server.cmd::<()>(&["ACL", "SETUSER", "viewer", "on", ">pw", "+ping", "~*"]);
    let viewer = format!("redis://viewer:pw@127.0.0.1:{port}/");
    for command in [&["list"][..], &["show", "x"]] {
        let mut args = vec!["--url", &viewer];
        args.extend_from_slice(command);
        let run = redhold(&args);
        run.expect_code(4).expect_one_line_error();
        assert!(run.stderr.contains("rights"), "{}", run.stderr);
    }
    // A user that may read but not delete.
    server.cmd::<()>(&["SET", "x", "1"]);
    server.cmd::<()>(&["DEL", "x"]);
    server.cmd::<()>(&[
        "ACL",
        "SETUSER",
        "reader",
        "on",
        ">pw",
        "+@read",
        "+@scripting",
        "+@pubsub",
        "+ping",
        "~*",
        "&*",
    ]);
    let holder = server.client();
    let _guard = holder.lock("held").lock().unwrap();
    let reader = format!("redis://reader:pw@127.0.0.1:{port}/");
    redhold(&["--url", &reader, "show", "held"]).expect_code(0);
    let run = redhold(&["--url", &reader, "force-unlock", "held", "--yes"]);
    run.expect_code(4).expect_one_line_error();
    assert!(server.exists("held"));
}

#[test]
fn bad_command_lines_are_usage_errors() {
    for args in [
        &["--url", "http://example.com/", "list"][..],
        &["--url", "redis://127.0.0.1:notaport/", "list"],
        &["--tls-root-cert", "/no/such/file.pem", "list"],
    ] {
        redhold(args).expect_code(2).expect_one_line_error();
    }
    // clap's own messages: several lines, but code 2 and no panic.
    for args in [
        &["no-such-command"][..],
        &["show"],
        &["--sentinel", "127.0.0.1:26379", "list"],
        &["--url", "redis://a/", "--cluster", "b:1", "list"],
        &["--connect-timeout", "0", "list"],
    ] {
        let run = redhold(args);
        run.expect_code(2);
        assert!(!run.stderr.contains("panicked"), "{}", run.stderr);
    }
}

#[test]
fn a_mistyped_option_shows_the_usage_of_the_command_it_was_given_to() {
    for (args, usage) in [
        (
            &["list", "--jsn"][..],
            "Usage: redhold list [OPTIONS] [PATTERN]",
        ),
        (
            &["list", "--json-line"],
            "Usage: redhold list [OPTIONS] [PATTERN]",
        ),
        (
            &["show", "x", "--jsn"],
            "Usage: redhold show [OPTIONS] <NAME>",
        ),
        (
            &["force-unlock", "x", "--ye"],
            "Usage: redhold force-unlock [OPTIONS] <NAME>",
        ),
        (
            &["watch", "x", "--intervall", "5"],
            "Usage: redhold watch [OPTIONS] <NAME>",
        ),
    ] {
        let run = redhold(args);
        run.expect_code(2);
        assert!(run.stderr.contains(usage), "{args:?}: {}", run.stderr);
        assert!(
            run.stderr.contains("unexpected argument"),
            "{args:?}: {}",
            run.stderr
        );
    }
}
