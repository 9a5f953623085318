//! No Redis I/O inside `poll`, read from the library's source: every file
//! that implements a `poll` (a `Future`, or the `poll` a future calls:
//! `Completion::poll`, `AsyncAcquire::poll`) names no blocking or I/O
//! machinery: not the server's calls (`Server::run*`), not a thread's
//! waits (`thread::park`, `thread::sleep`, a `Condvar`, a blocking
//! receive), not a socket. The rule of `shared/notes/owners-and-async.md`.
//! The dynamic proof (a poll makes no write system call) is in
//! `never_blocked.rs` and `any_executor.rs`; this one covers the futures
//! no test drives yet, such as those added later.

use std::fs;
use std::path::{Path, PathBuf};

/// What a file that implements `poll` must not name (in its code, not its
/// comments).
const FORBIDDEN: &[&str] = &[
    "Server::run",
    ".run(",
    ".run_write",
    ".run_request",
    ".run_cleanup",
    "IoPool",
    "thread::park",
    "park_timeout",
    "thread::sleep",
    "Condvar",
    ".recv(",
    ".recv_timeout(",
    ".wait(",
    ".wait_for(",
    ".wait_until(",
    "block_on",
    "TcpStream",
    "UnixStream",
    "std::net",
];

#[test]
fn files_that_implement_poll_name_no_blocking_call() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../src");
    let mut polling = Vec::new();
    let mut offences = Vec::new();
    for file in rust_files(&src) {
        let text = fs::read_to_string(&file).expect("a source file");
        let code = code_only(&text);
        if !implements_poll(&code) {
            continue;
        }
        let shown = file
            .strip_prefix(&src)
            .unwrap_or(&file)
            .display()
            .to_string();
        offences.extend(
            forbidden_in(&code)
                .into_iter()
                .map(|(line, name)| format!("src/{shown}:{line}: {name}")),
        );
        polling.push(shown);
    }
    polling.sort();
    eprintln!("files that implement poll: {polling:?}");
    // Not vacuous: the known futures are found.
    for known in [
        "lock/futures.rs",
        "tasks/offloaded.rs",
        "tasks/completion.rs",
        "engine/async_acquire.rs",
    ] {
        assert!(
            polling.iter().any(|p| p == known),
            "{known} not found among {polling:?}"
        );
    }
    assert!(
        offences.is_empty(),
        "poll's files name blocking calls:\n{}",
        offences.join("\n")
    );
}

#[test]
fn the_rule_finds_a_blocking_call_where_there_is_one() {
    // The timer thread waits on a Condvar, and the blocking acquire parks:
    // were they futures, the rule would refuse them.
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../src");
    for (file, name) in [
        ("tasks/timers.rs", "Condvar"),
        ("server/mod.rs", ".run("),
        ("pubsub/waiter.rs", "thread::park"),
    ] {
        let code = code_only(&fs::read_to_string(src.join(file)).expect(file));
        assert!(
            forbidden_in(&code).iter().any(|(_, found)| *found == name),
            "the rule missed {name} in {file}"
        );
    }
    let commented = "// thread::sleep(a)\n/// Condvar\nlet s = \"a // b\"; // .run(x)\n";
    assert!(
        forbidden_in(&code_only(commented)).is_empty(),
        "comments are not code"
    );
    assert!(implements_poll(&code_only("impl<T> Future for X<T> {")));
    assert!(implements_poll(&code_only(
        "fn poll(&self, cx: &mut Context<'_>) -> Poll<T> {"
    )));
    assert!(!implements_poll(&code_only("// fn poll(\nfn pollute() {}")));
}

fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in fs::read_dir(dir).expect("src/").flatten() {
        let path = entry.path();
        if path.is_dir() {
            files.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
    files
}

/// Whether `code` implements `Future` or a `poll` taking a `Context`.
fn implements_poll(code: &str) -> bool {
    code.lines().any(|line| {
        let line = line.trim();
        (line.starts_with("impl") && line.contains(" Future for "))
            || (line.contains("fn poll(") && line.contains("Context"))
    })
}

/// Each forbidden name in `code`, with its line number.
fn forbidden_in(code: &str) -> Vec<(usize, &'static str)> {
    code.lines()
        .enumerate()
        .flat_map(|(n, line)| {
            FORBIDDEN
                .iter()
                .filter(move |name| line.contains(*name))
                .map(move |name| (n + 1, *name))
        })
        .collect()
}

/// `text` with its comments blanked (line numbers kept): `//` outside a
/// string literal to the end of the line. The library has no block
/// comments in code (rustfmt's style); a `/*` would be kept, and could
/// only make the rule stricter.
fn code_only(text: &str) -> String {
    text.lines()
        .map(|line| {
            let mut in_string = false;
            let mut escaped = false;
            let bytes = line.as_bytes();
            for (i, &b) in bytes.iter().enumerate() {
                match b {
                    _ if escaped => escaped = false,
                    b'\\' if in_string => escaped = true,
                    b'"' => in_string = !in_string,
                    b'/' if !in_string && bytes.get(i + 1) == Some(&b'/') => return &line[..i],
                    _ => {}
                }
            }
            line
        })
        .collect::<Vec<_>>()
        .join("\n")
}
