//! What a client leaves in Redis when it shuts down, looked at right after
//! `shutdown()` returned rather than at the end of the run, when every TTL
//! has hidden it.
//!
//! A lock a shut-down client still holds in Redis must belong to a hold
//! whose loss the user can learn of: a guard alive at the shutdown (its
//! later release reports an error), a leaked hold, a release whose outcome
//! was unknown. A hold nobody knows of (a hand-over that reached a thread
//! whose call then failed with `Shutdown`) blocks everyone for a watchdog
//! timeout. Holder fields are `<client uuid>:<thread number>`, and the
//! thread number is the library's own, so each actor learns its number
//! once, from Redis, while it holds a lock alone (see [`learn_tid`]); the
//! oracle then matches every field the scan finds to the holds of that
//! thread (`oracle::left_by_shutdown`).

use std::cell::Cell;
use std::collections::BTreeMap;
use std::time::Duration;

use redis::Connection;

use crate::history::{ActorId, Event, Recorder};
use crate::targets::{short_name, ClientSet};

fn connect(url: &str) -> redis::RedisResult<Connection> {
    let conn = redis::Client::open(url)?.get_connection_with_timeout(Duration::from_secs(1))?;
    conn.set_read_timeout(Some(Duration::from_secs(2)))?;
    Ok(conn)
}

/// The thread-number part of a holder field of client `uuid`
/// (`<uuid>:<tid>` or `<uuid>:<tid>:write`), if the field is one.
fn tid_of(field: &str, uuid: &str) -> Option<u64> {
    let rest = field.strip_prefix(uuid)?.strip_prefix(':')?;
    rest.split(':').next()?.parse().ok()
}

thread_local! {
    /// Whether this thread's number is already in the history.
    static LEARNED: Cell<bool> = const { Cell::new(false) };
}

/// Learns the calling thread's library thread number from the hash of
/// `key` (a lock it holds exclusively with a live guard, just taken with
/// `set`): the one field of the set's main client there is its own. Asks
/// `still_held` afterwards, so that a loss in between teaches nothing
/// wrong. Records it as [`Event::Tid`] once per thread; quietly does
/// nothing when the answer is not clear.
pub(crate) fn learn_tid(
    set: &ClientSet,
    url: &str,
    key: &str,
    actor: ActorId,
    recorder: &Recorder,
    still_held: impl Fn() -> bool,
) {
    if LEARNED.with(Cell::get) {
        return;
    }
    let uuid = set.clients[0].id().to_string();
    let Ok(mut conn) = connect(url) else { return };
    let Ok(fields) = redis::cmd("HKEYS").arg(key).query::<Vec<String>>(&mut conn) else {
        return;
    };
    let mut tids: Vec<u64> = fields.iter().filter_map(|f| tid_of(f, &uuid)).collect();
    tids.dedup();
    if let ([tid], true) = (tids.as_slice(), still_held()) {
        LEARNED.with(|l| l.set(true));
        recorder.record(Event::Tid { actor, tid: *tid });
    }
}

/// Scans every server (`urls[i]` is where `set.clients[i]` lives) for lock
/// hashes of the run (`prefix`) with fields of the set's clients, right
/// after the set's `shutdown()` returned: records [`Event::ClientGone`]
/// first (the scan's start), then one [`Event::Remains`] per hash found.
pub(crate) fn scan_after_shutdown(
    set: &ClientSet,
    urls: &[String],
    prefix: &str,
    recorder: &Recorder,
) {
    recorder.record(Event::ClientGone {
        client: set.tag.clone(),
    });
    for (server, (client, url)) in set.clients.iter().zip(urls).enumerate() {
        let uuid = client.id().to_string();
        match scan(url, prefix, &uuid) {
            Ok(found) => {
                for (name, tids) in found {
                    recorder.record(Event::Remains {
                        client: set.tag.clone(),
                        server: server as u8,
                        name,
                        tids: tids
                            .iter()
                            .map(u64::to_string)
                            .collect::<Vec<_>>()
                            .join(","),
                    });
                }
            }
            // A server away (a restart fault): nothing to judge there.
            Err(e) => recorder.record(Event::Note {
                text: format!(
                    "the scan after the shutdown of {} could not look at server {server}: {e}",
                    set.tag
                ),
            }),
        }
    }
}

/// Short lock name → thread numbers of client `uuid`'s fields in its hash.
fn scan(url: &str, prefix: &str, uuid: &str) -> redis::RedisResult<BTreeMap<String, Vec<u64>>> {
    let mut conn = connect(url)?;
    let mut found = BTreeMap::new();
    let pattern = format!("*{prefix}:*");
    let mut cursor: u64 = 0;
    loop {
        let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(&pattern)
            .arg("COUNT")
            .arg(1000)
            .arg("TYPE")
            .arg("hash")
            .query(&mut conn)?;
        for key in keys {
            let Some(name) = short_name(prefix, &key) else {
                continue;
            };
            let fields: Vec<String> = redis::cmd("HKEYS").arg(&key).query(&mut conn)?;
            let mut tids: Vec<u64> = fields.iter().filter_map(|f| tid_of(f, uuid)).collect();
            tids.sort_unstable();
            tids.dedup();
            if !tids.is_empty() {
                found.insert(name.into_owned(), tids);
            }
        }
        if next == 0 {
            break;
        }
        cursor = next;
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_name_their_thread() {
        let uuid = "9f0c1c8e-0000-4000-8000-000000000001";
        assert_eq!(tid_of(&format!("{uuid}:17"), uuid), Some(17));
        assert_eq!(tid_of(&format!("{uuid}:17:write"), uuid), Some(17));
        assert_eq!(tid_of("mode", uuid), None);
        assert_eq!(tid_of("other-uuid:17", uuid), None);
    }
}
