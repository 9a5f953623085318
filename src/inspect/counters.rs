//! Semaphores and count-down latches from the outside: what a name holds,
//! and which names hold one. Redisson keeps both as a string holding a
//! number (the permits available, or the count), so the layout cannot tell
//! a semaphore from a latch; a permit-expirable semaphore also keeps its
//! permits out, with their lease ends, in a sorted set beside it (see
//! `docs/wire-format.md`).

use std::collections::BTreeSet;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::client::Client;
use crate::error::{Error, Result};
use crate::names;
use crate::scripts;

/// The sorted set of a permit-expirable semaphore's permits out.
const PERMITS_SUFFIX: &str = "timeout";
/// Redisson scores a permit taken without a lease with this (ms since the
/// epoch, far in the future): it never ends.
const NEVER_ENDS_FROM_MS: f64 = 9.0e14;

/// What a name holding a semaphore or a count-down latch shows.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct CounterInfo {
    /// The name.
    pub name: String,
    /// The number stored: a semaphore's permits available or a latch's
    /// count. Absent reads 0 (a semaphore without permits, an open latch).
    pub value: i64,
    /// The permits out of a permit-expirable semaphore, soonest lease end
    /// first; empty for other semaphores and for latches.
    pub permits_out: Vec<PermitOut>,
}

impl CounterInfo {
    /// Whether the name holds a permit-expirable semaphore (it has permits
    /// out).
    pub fn is_expirable_semaphore(&self) -> bool {
        !self.permits_out.is_empty()
    }
}

/// One permit out of a permit-expirable semaphore.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PermitOut {
    /// Its id as users see it: 32 lowercase hex digits.
    pub id: String,
    /// When its lease ends (on the clock of the client that took or renewed
    /// it); `None` for a permit taken without a lease. A lease that has
    /// ended is given back by the semaphore's next change.
    pub lease_ends: Option<SystemTime>,
}

impl PermitOut {
    /// How long its lease still runs, from now on this machine's clock;
    /// zero once ended, `None` without a lease.
    pub fn lease_left(&self) -> Option<Duration> {
        self.lease_ends.map(|end| {
            end.duration_since(SystemTime::now())
                .unwrap_or(Duration::ZERO)
        })
    }
}

impl Client {
    /// Reads the semaphore or count-down latch called `name` (either kind:
    /// both are a number in Redis), with the permits out when it is a
    /// permit-expirable semaphore. `None` when the name holds nothing.
    ///
    /// # Errors
    ///
    /// [`Error::WrongKind`] when the name holds something else (a lock, a
    /// string that is not a number, another type); [`Error::InvalidName`],
    /// [`Error::Shutdown`], [`Error::Redis`].
    pub fn inspect_counter(&self, name: &str) -> Result<Option<CounterInfo>> {
        names::validate(name)?;
        let permits_key = names::suffixed(name, PERMITS_SUFFIX);
        let (key_type, value, permits): (String, Option<Vec<u8>>, Vec<Vec<u8>>) =
            self.engine().server().run(|conn| {
                scripts::INSPECT_COUNTER
                    .key(name)
                    .key(&permits_key)
                    .invoke(conn)
            })?;
        interpret(name, &key_type, value.as_deref(), &permits)
    }

    /// Every semaphore and count-down latch whose name matches `pattern`
    /// (Redis glob syntax), sorted by name: the strings holding a number,
    /// and the names whose permit-expirable semaphore has permits out.
    /// Found with `SCAN` like [`list_locks`](Self::list_locks): each page's
    /// strings are read in one pipelined round trip and only those holding
    /// a number are read in full; the library's own helper keys (latches,
    /// token counters, read holds) are left out. Any other number stored under a matching name is listed
    /// too: Redis cannot tell it from a semaphore.
    ///
    /// # Errors
    ///
    /// As [`list_locks`](Self::list_locks).
    pub fn list_counters(&self, pattern: &str) -> Result<Vec<CounterInfo>> {
        let server = self.engine().server();
        let candidates: BTreeSet<String> = super::scan::counter_names(server, pattern)?;
        let mut found = Vec::new();
        for name in candidates {
            if names::validate(&name).is_err() {
                continue;
            }
            match self.inspect_counter(&name) {
                Ok(Some(info)) => found.push(info),
                // Gone meanwhile, or not a number after all.
                Ok(None) | Err(Error::WrongKind { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(found)
    }
}

/// What the script's reply says `name` holds.
fn interpret(
    name: &str,
    key_type: &str,
    value: Option<&[u8]>,
    permits: &[Vec<u8>],
) -> Result<Option<CounterInfo>> {
    let wrong = |found: &str| Error::WrongKind {
        lock: names::shorten(name),
        expected: "semaphore or count-down latch",
        found: found.to_owned(),
    };
    let value = match (key_type, value) {
        ("none", _) if permits.is_empty() => return Ok(None),
        ("none", _) => 0,
        ("string", Some(bytes)) => std::str::from_utf8(bytes)
            .ok()
            .and_then(|text| text.parse::<i64>().ok())
            .ok_or_else(|| wrong("a string that is not a number"))?,
        ("hash", _) => return Err(wrong("a hash (a lock?)")),
        (other, _) => return Err(wrong(other)),
    };
    let mut permits_out: Vec<PermitOut> = permits
        .chunks_exact(2)
        .map(|pair| PermitOut {
            id: hex(&pair[0]),
            lease_ends: lease_end(&pair[1]),
        })
        .collect();
    // Soonest end first; the permits that never end last.
    permits_out.sort_by_key(|p| (p.lease_ends.is_none(), p.lease_ends));
    Ok(Some(CounterInfo {
        name: name.to_owned(),
        value,
        permits_out,
    }))
}

/// A permit's id in hex, as Redisson's `acquire()` returns it.
fn hex(raw: &[u8]) -> String {
    raw.iter().map(|b| format!("{b:02x}")).collect()
}

/// A permit's score (ms since the epoch) as a lease end; `None` for
/// Redisson's "never".
fn lease_end(score: &[u8]) -> Option<SystemTime> {
    let ms: f64 = std::str::from_utf8(score).ok()?.parse().ok()?;
    if !(0.0..NEVER_ENDS_FROM_MS).contains(&ms) {
        return None;
    }
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let ms = ms as u64; // checked above: 0 <= ms < 9e14
    UNIX_EPOCH.checked_add(Duration::from_millis(ms))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_number_is_a_counter_and_other_values_are_not() {
        let info = interpret("s", "string", Some(b"3"), &[]).unwrap().unwrap();
        assert_eq!(info.value, 3);
        assert!(!info.is_expirable_semaphore());
        assert_eq!(interpret("s", "none", None, &[]).unwrap(), None);
        assert!(matches!(
            interpret("s", "string", Some(b"abc"), &[]),
            Err(Error::WrongKind { .. })
        ));
        assert!(matches!(
            interpret("s", "hash", None, &[]),
            Err(Error::WrongKind { .. })
        ));
    }

    #[test]
    fn permits_out_are_read_with_their_lease_ends() {
        let raw = vec![
            vec![0xab; 16],
            b"922337203685477".to_vec(),
            vec![0x01; 16],
            b"1700000000000".to_vec(),
        ];
        let info = interpret("e", "string", Some(b"0"), &raw).unwrap().unwrap();
        assert!(info.is_expirable_semaphore());
        assert_eq!(info.permits_out[0].id, "01".repeat(16));
        assert_eq!(
            info.permits_out[0].lease_ends,
            UNIX_EPOCH.checked_add(Duration::from_millis(1_700_000_000_000))
        );
        assert_eq!(info.permits_out[0].lease_left(), Some(Duration::ZERO));
        assert_eq!(info.permits_out[1].id, "ab".repeat(16));
        assert_eq!(info.permits_out[1].lease_ends, None, "never ends");
    }
}
