//! Every Lua script redhold runs, each compiled in from `lua/<name>.lua` and
//! run with EVALSHA (the redis crate loads a script again when the server
//! answers NOSCRIPT). One script is one atomic change; `docs/wire-format.md`
//! describes each one's keys, arguments and replies.

use once_cell::sync::Lazy;
use redis::Script;

/// Declares one script per `lua/` file, with its doc line.
macro_rules! scripts {
    ($($(#[doc = $doc:literal])* $name:ident => $file:literal;)*) => {
        $(
            $(#[doc = $doc])*
            pub(crate) static $name: Lazy<Script> =
                Lazy::new(|| Script::new(include_str!(concat!("../lua/", $file))));
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
    /// Gives back permits an acquire call took without returning them.
    SEMAPHORE_GIVE_BACK => "semaphore_give_back.lua";
    /// Gives permits to a semaphore and announces how many are available.
    SEMAPHORE_RELEASE => "semaphore_release.lua";
    /// Sets, takes away or drains a semaphore's permits.
    SEMAPHORE_SET => "semaphore_set.lua";
    /// Takes permits of an expirable semaphore, with their ids and lease.
    EXPIRABLE_ACQUIRE => "expirable_acquire.lua";
    /// Gives back the permits an expirable acquire took without returning them.
    EXPIRABLE_GIVE_BACK => "expirable_give_back.lua";
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
        declared.sort();
        assert_eq!(declared, on_disk);
        let mut hashes: Vec<&str> = all().iter().map(|(_, s)| s.get_hash()).collect();
        hashes.sort_unstable();
        hashes.dedup();
        assert_eq!(hashes.len(), all().len(), "two files hold the same script");
    }
}
