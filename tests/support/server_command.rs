//! `redis-server` started so that it dies with the process that started it.
//!
//! Shared by the tests (`tests/support`), the benches (`benches/common`) and
//! the compat runner (`compat/runner`), each of which pulls this file in
//! with `#[path]`: a test, bench or suite killed mid-run runs no `Drop`, and
//! its servers would otherwise outlive it.

use std::process::Command;

/// A command that runs `redis-server` (arguments to be added) so that it
/// dies with this process. `sh` first starts a watcher that kills the
/// server once this process is gone, then `exec`s the server in its own
/// place, so the child's pid is the server's. The watcher looks once a
/// second and ends by itself when the server does.
///
/// A missing `redis-server` shows as `sh` exiting with status 127, not as
/// a spawn error: callers check for it first (`redis-server --version`).
pub(crate) fn redis_server_command() -> Command {
    // `$$` stays the shell's pid in the subshell: the server's after `exec`.
    const DIES_WITH_PARENT: &str = r#"parent=$1; shift
(while kill -0 "$parent" && kill -0 $$; do sleep 1; done
 kill -0 "$parent" || kill -9 $$) </dev/null >/dev/null 2>&1 &
exec redis-server "$@""#;
    let mut command = Command::new("sh");
    command.args([
        "-c",
        DIES_WITH_PARENT,
        "sh",
        &std::process::id().to_string(),
    ]);
    command
}
