//! Every Lua script redhold runs, each compiled in from `lua/<name>.lua` and
//! run with EVALSHA (the redis crate loads a script again when the server
//! answers NOSCRIPT). One script is one atomic change; `docs/wire-format.md`
//! describes each one's keys, arguments and replies.
//!
//! Every script that publishes runs behind [`PRELUDE`], which lets its
//! publish-command argument be [`PUBLISH_BOTH`]: the scripts themselves
//! call `redis.call(ARGV[n], channel, message)` and need not know.

use once_cell::sync::Lazy;
use redis::Script;

/// Declares one script per `lua/` file, with its doc line.
macro_rules! scripts {
    ($($(#[doc = $doc:literal])* $name:ident => $file:literal;)*) => {
        $(
            $(#[doc = $doc])*
            pub(crate) static $name: Lazy<Script> =
                Lazy::new(|| with_prelude(include_str!(concat!("../lua/", $file))));
        )*

        /// Every script with its file name, for tests that check them all.
        #[cfg(test)]
        pub(crate) fn all() -> Vec<(&'static str, &'static Script)> {
            vec![$(($file, &*$name)),*]
        }
    };
}

scripts! {
    /// Takes or re-enters a plain (or spin) lock.
    ACQUIRE => "acquire.lua";
    /// Takes or re-enters a fenced lock and hands out the next token.
    FENCED_ACQUIRE => "fenced_acquire.lua";
    /// Releases one hold of a plain lock, once per request id.
    RELEASE => "release.lua";
    /// Deletes a plain lock whoever holds it and wakes one waiter.
    FORCE_RELEASE => "force_release.lua";
    /// Renews a batch of held locks, of any kind.
    RENEW => "renew.lua";
    /// Takes a fair lock, or queues the caller and tells it when to look again.
    FAIR_ACQUIRE => "fair_acquire.lua";
    /// Releases one hold of a fair lock and wakes the queue's head.
    FAIR_RELEASE => "fair_release.lua";
    /// Takes a waiter out of a fair lock's queue.
    FAIR_GIVE_UP => "fair_give_up.lua";
    /// Deletes a fair lock whoever holds it and wakes the queue's head.
    FAIR_FORCE_RELEASE => "fair_force_release.lua";
    /// Takes or re-enters a read hold.
    READ_ACQUIRE => "read_acquire.lua";
    /// Releases one read hold.
    READ_RELEASE => "read_release.lua";
    /// Takes or re-enters the write hold.
    WRITE_ACQUIRE => "write_acquire.lua";
    /// Releases one write hold.
    WRITE_RELEASE => "write_release.lua";
    /// Deletes a read-write lock in the given mode and wakes its waiters.
    RW_FORCE_RELEASE => "rw_force_release.lua";
    /// Reads one lock of any kind in full, changing nothing.
    INSPECT => "inspect.lua";
    /// Reads a semaphore's or a latch's keys, changing nothing.
    INSPECT_COUNTER => "inspect_counter.lua";
    /// Takes permits from a semaphore, once per acquire call.
    SEMAPHORE_ACQUIRE => "semaphore_acquire.lua";
    /// Gives permits to a semaphore and announces how many are available.
    SEMAPHORE_RELEASE => "semaphore_release.lua";
    /// Sets, takes away or drains a semaphore's permits.
    SEMAPHORE_SET => "semaphore_set.lua";
    /// Takes permits of an expirable semaphore, with their ids and lease.
    EXPIRABLE_ACQUIRE => "expirable_acquire.lua";
    /// Gives back one expirable permit by its id.
    EXPIRABLE_RELEASE => "expirable_release.lua";
    /// Reads an expirable semaphore or changes a lease, after reclaiming ended leases.
    EXPIRABLE_LEASE => "expirable_lease.lua";
    /// Arms a count-down latch unless it is armed.
    LATCH_TRY_SET => "latch_try_set.lua";
    /// Counts a count-down latch down by one and opens it at zero.
    LATCH_COUNT_DOWN => "latch_count_down.lua";
    /// Deletes a count-down latch (or a semaphore: both are a count).
    LATCH_DELETE => "latch_delete.lua";
}

/// Gives back the permits an acquire call took without returning them, and
/// closes the call. An undo: sent with EVAL, its source whole, because it
/// may follow a late request on a connection of a server whose script
/// cache does not have it, where EVALSHA's NOSCRIPT would undo nothing.
pub(crate) const SEMAPHORE_GIVE_BACK_LUA: &str = include_str!("../lua/semaphore_give_back.lua");

/// Gives back the permit an expirable acquire call took without returning
/// it, and closes the call (an undo, like [`SEMAPHORE_GIVE_BACK_LUA`]).
pub(crate) const EXPIRABLE_GIVE_BACK_LUA: &str = include_str!("../lua/expirable_give_back.lua");

/// Closes a `count_down` call that failed, and gives back the count its
/// attempt took unless that count opened the latch (an undo, like
/// [`SEMAPHORE_GIVE_BACK_LUA`]).
pub(crate) const LATCH_COUNT_DOWN_UNDO_LUA: &str = include_str!("../lua/latch_count_down_undo.lua");

/// An `EVAL` of `source` (behind [`PRELUDE`] when it publishes, as the
/// declared scripts are); the caller adds the key count, keys and args.
pub(crate) fn eval(source: &str) -> redis::Cmd {
    let mut cmd = redis::cmd("EVAL");
    cmd.arg(&*as_run(source));
    cmd
}

/// The publish command (a script argument, see
/// `Server::publish_command`) that announces both ways: classic `PUBLISH`,
/// which reaches every node's `SUBSCRIBE`rs (Redisson before 3.22 on a
/// cluster, or a redhold client told `sharded_pubsub(false)`), then
/// `SPUBLISH` (Redisson 3.22 and later, redhold by default). A script's
/// publish then replies the two receiver counts added up.
pub(crate) const PUBLISH_BOTH: &str = "publish+spublish";

/// Put before every script that publishes, on the script's first line (a
/// comment), so that line numbers in Redis's error messages still match
/// the file. It shadows
/// `redis` with a table whose `call` expands [`PUBLISH_BOTH`] and passes
/// every other command through; `redis.pcall` and the rest are the real
/// ones. Nothing is created globally (Redis forbids that).
const PRELUDE: &str = "local redis = setmetatable({call = function(command, ...) \
if command == 'publish+spublish' then \
return redis.call('publish', ...) + redis.call('spublish', ...) end \
return redis.call(command, ...) end}, {__index = redis}) ";

/// How a script publishes: `redis.call(ARGV[n], channel, message)`, the
/// one command a script takes from its arguments.
const DYNAMIC_CALL: &str = "redis.call(ARGV[";

/// `source`, behind [`PRELUDE`] when it publishes (the prelude costs about
/// half a microsecond of server time per run; acquires, renewals and reads
/// do without).
fn with_prelude(source: &str) -> Script {
    Script::new(&as_run(source))
}

/// `source` as the server runs it: behind [`PRELUDE`] when it publishes.
fn as_run(source: &str) -> std::borrow::Cow<'_, str> {
    if source.contains(DYNAMIC_CALL) {
        format!("{PRELUDE}{source}").into()
    } else {
        source.into()
    }
}

/// The wake-up message that frees one waiter.
pub(crate) const WAKE_ONE: &str = "0";

/// The wake-up message that frees every waiter (a write release).
pub(crate) const WAKE_ALL: &str = "1";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_lua_file_is_declared_once() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/lua");
        let mut on_disk: Vec<String> = std::fs::read_dir(dir)
            .expect("lua/ is readable")
            .map(|entry| entry.expect("a directory entry").file_name())
            .map(|name| name.to_string_lossy().into_owned())
            .filter(|name| name.ends_with(".lua"))
            .collect();
        on_disk.sort();
        let mut declared: Vec<String> = all().iter().map(|(f, _)| (*f).to_owned()).collect();
        // The undos, sent with EVAL.
        declared.extend([
            "semaphore_give_back.lua".into(),
            "expirable_give_back.lua".into(),
            "latch_count_down_undo.lua".into(),
        ]);
        declared.sort();
        assert_eq!(declared, on_disk);
        let mut hashes: Vec<&str> = all().iter().map(|(_, s)| s.get_hash()).collect();
        hashes.sort_unstable();
        hashes.dedup();
        assert_eq!(hashes.len(), all().len(), "two files hold the same script");
    }

    #[test]
    fn the_prelude_shares_the_first_line_with_a_comment() {
        // Line numbers in Redis's errors stay the file's only if the
        // prelude is one line and every script opens with a comment.
        assert!(!PRELUDE.contains('\n'));
        assert!(PRELUDE.contains(&format!("'{PUBLISH_BOTH}'")));
        for (file, _) in all() {
            let path = format!("{}/lua/{file}", env!("CARGO_MANIFEST_DIR"));
            let text = std::fs::read_to_string(&path).expect("the script is readable");
            assert!(
                text.starts_with("--"),
                "{file} does not open with a comment"
            );
        }
    }

    #[test]
    fn exactly_the_scripts_that_publish_run_behind_the_prelude() {
        let mut behind = 0;
        for (file, script) in all() {
            let path = format!("{}/lua/{file}", env!("CARGO_MANIFEST_DIR"));
            let text = std::fs::read_to_string(&path).expect("the script is readable");
            let expected = if text.contains(DYNAMIC_CALL) {
                behind += 1;
                Script::new(&format!("{PRELUDE}{text}"))
            } else {
                Script::new(&text)
            };
            assert_eq!(script.get_hash(), expected.get_hash(), "{file}");
        }
        assert!(behind > 0, "no script publishes");
    }
}
