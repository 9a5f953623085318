//! An owner at rest: none of its threads or tasks is in a call, and every
//! request of its own that the fault proxy held back has run. Then Redis
//! must count exactly its live guards in its field of each lock it
//! touched, a dropped future of its must have left no fair queue entry and
//! no read-hold key, and its `hold_count()` (a probe the hold count rule
//! judges) is asked.

use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use redhold::Owner;
use redis::Connection;

use super::{OwnerHeld, OwnerLog};
use crate::actors::{LEFT_HELD, TAKEN_AWAY};
use crate::history::Event;
use crate::targets::{self, ClientSet, Kind, Target};

/// The first flag word of something a dropped future left at rest (the
/// oracle's rule "dropped future left"): its owner's field counting more
/// than the owner's guards, a fair queue entry or a read-hold key of the
/// owner's on a lock one of its futures was dropped on since the last
/// rest, or a waiter of its client still parked with no call under way.
pub(crate) const DROPPED_LEFT: &str = "[dropped future left]";

/// The first flag word of a waiter of the task thread's client still
/// parked at rest, with none of its futures in flight (the oracle's rule
/// "dropped future left"): a dropped future's call that never left its
/// line. Leaving it is the client's own business (no Redis call), so only
/// a stall or a restart of the main server, which holds up the client's
/// threads, excuses it.
pub(crate) const DROPPED_PARKED: &str = "[dropped future parked]";

/// How long after the rest began Redis is given to reach the owner's
/// guards: a release carried on by the client's worker, or a give-back
/// queued for a dropped future, runs within it.
pub(crate) const REST_BOUND: Duration = Duration::from_secs(3);

/// How often Redis is looked at meanwhile.
const LOOK_EVERY: Duration = Duration::from_millis(25);

/// One lock on the main server, and how the owner is named in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Spot {
    pub(crate) name: &'static str,
    /// A single kind (a multi-lock's member: plain).
    pub(crate) kind: Kind,
}

impl Spot {
    /// The locks `target` takes on the main server (none for a RedLock:
    /// its lock there may or may not be among those it took).
    pub(crate) fn of(target: &Target) -> Vec<Spot> {
        match target.kind {
            Kind::Red => Vec::new(),
            Kind::Multi => target
                .names
                .iter()
                .map(|&name| Spot {
                    name,
                    kind: Kind::Plain,
                })
                .collect(),
            kind => vec![Spot {
                name: target.names[0],
                kind,
            }],
        }
    }
}

/// What Redis has of the owner on one lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Seen {
    count: u32,
    /// Its field is in the fair queue or its deadlines.
    queued: bool,
    /// Read-hold keys of its field.
    read_keys: u32,
}

/// What one rest judges with.
pub(crate) struct Rest<'a> {
    pub(crate) log: &'a OwnerLog,
    pub(crate) owner: Owner,
    /// The client the owner uses now.
    pub(crate) set: &'a Arc<ClientSet>,
    /// The main server's URL, not through the proxy.
    pub(crate) direct: &'a str,
    /// Names the flags: `owner round 3`, `async rest 2`.
    pub(crate) case: String,
}

fn connect(url: &str) -> redis::RedisResult<Connection> {
    let conn = redis::Client::open(url)?.get_connection_with_timeout(Duration::from_secs(1))?;
    conn.set_read_timeout(Some(Duration::from_secs(2)))?;
    Ok(conn)
}

fn look(conn: &mut Connection, full: &str, field: &str, kind: Kind) -> redis::RedisResult<Seen> {
    let count: Option<String> = redis::cmd("HGET").arg(full).arg(field).query(conn)?;
    let count = count.and_then(|c| c.parse().ok()).unwrap_or(0);
    let mut queued = false;
    if kind == Kind::Fair {
        let at: Option<i64> = redis::cmd("LPOS")
            .arg(targets::tagged_key("redisson_lock_queue", full))
            .arg(field)
            .query(conn)?;
        let deadline: Option<f64> = redis::cmd("ZSCORE")
            .arg(targets::tagged_key("redisson_lock_timeout", full))
            .arg(field)
            .query(conn)?;
        queued = at.is_some() || deadline.is_some();
    }
    let mut read_keys = 0;
    if kind == Kind::Read {
        let pattern = format!("{}*", targets::read_hold_prefix(full, field));
        let mut cursor: u64 = 0;
        loop {
            let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
                .arg(cursor)
                .arg("MATCH")
                .arg(&pattern)
                .arg("COUNT")
                .arg(1000)
                .query(conn)?;
            read_keys += keys.len() as u32;
            if next == 0 {
                break;
            }
            cursor = next;
        }
    }
    Ok(Seen {
        count,
        queued,
        read_keys,
    })
}

impl Rest<'_> {
    /// Judges the owner's locks `touched` (and those of its `guards`)
    /// against its live `guards`; `dropped_on`: names a future of the
    /// owner's was dropped on since the last rest. Returns how many locks
    /// it judged.
    pub(crate) fn judge(
        &self,
        guards: &[&OwnerHeld],
        touched: &[Target],
        dropped_on: &[&'static str],
    ) -> usize {
        let set = self.set;
        if set.shutdown_began.get().is_some() || set.clients[0].is_shut_down() {
            return 0;
        }
        let started = Instant::now();
        let mut spots: Vec<Spot> = Vec::new();
        for target in touched.iter().chain(guards.iter().map(|g| &g.target)) {
            for spot in Spot::of(target) {
                if !spots.contains(&spot) {
                    spots.push(spot);
                }
            }
        }
        // A guard of another client (before a restart) or one whose lease
        // may end meanwhile makes its locks' counts a matter of timing.
        let until = started + REST_BOUND + Duration::from_millis(500);
        spots.retain(|spot| {
            !guards.iter().any(|g| {
                Spot::of(&g.target).contains(spot)
                    && (!Arc::ptr_eq(&g.set, set) || g.lease_ends_before(until))
            })
        });
        let field = |spot: &Spot| targets::owner_holder_id(set, spot.kind, spot.name, self.owner);
        // Guards per field: plain, fenced and spin locks (and multi-lock
        // members) of one name share the owner's field.
        let expected = |spot: &Spot| -> u32 {
            let mine = field(spot);
            guards
                .iter()
                .flat_map(|g| Spot::of(&g.target))
                .filter(|s| s.name == spot.name && field(s) == mine)
                .count() as u32
        };
        let Ok(mut conn) = connect(self.direct) else {
            return 0;
        };
        let mut open: Vec<(Spot, String, u32, Option<Seen>)> = spots
            .iter()
            .map(|s| (s.clone(), field(s), expected(s), None))
            .collect();
        let deadline = started + REST_BOUND;
        loop {
            for (spot, field, _, seen) in &mut open {
                *seen = look(&mut conn, &set.full(spot.name), field, spot.kind).ok();
            }
            open.retain(|(_, _, want, seen)| {
                !seen.is_some_and(|s| s.count == *want && !s.queued && s.read_keys <= *want)
            });
            if open.is_empty() || Instant::now() >= deadline {
                break;
            }
            thread::sleep(LOOK_EVERY);
        }
        // The probes first: the oracle reads a flag's lock off the owner's
        // last probe before it (a force-unlock of that lock excuses a count
        // below the guards).
        for spot in spots.iter().filter(|s| !open.iter().any(|(o, ..)| o == *s)) {
            self.probe(spot);
        }
        // Asked again at once: a client shut down meanwhile judges nothing.
        let alive = set.shutdown_began.get().is_none() && !set.clients[0].is_shut_down();
        for (spot, field, want, seen) in open {
            self.probe(&spot);
            let Some(seen) = seen.filter(|_| alive) else {
                continue;
            };
            let above = seen.count > want || seen.queued || seen.read_keys > want;
            let word = match (above, dropped_on.contains(&spot.name)) {
                (true, true) => DROPPED_LEFT,
                (true, false) => LEFT_HELD,
                (false, _) => TAKEN_AWAY,
            };
            self.log.flag(format!(
                "{word} the owner's field {field} in {} {} counts {} hold(s) in Redis {} ms after \
                 its rest began (every request held back had run){}{}, for guards that stand \
                 for {want} ({}, client {})",
                spot.kind.as_str(),
                spot.name,
                seen.count,
                started.elapsed().as_millis(),
                if seen.queued {
                    ", and it is in the fair queue"
                } else {
                    ""
                },
                if seen.read_keys > 0 {
                    format!(", with {} read-hold key(s)", seen.read_keys)
                } else {
                    String::new()
                },
                self.case,
                set.tag
            ));
        }
        spots.len()
    }

    /// `hold_count()` of the owner on `spot`, recorded as a probe.
    fn probe(&self, spot: &Spot) {
        let log = self.log;
        log.record(Event::Probe { actor: log.id });
        if let Ok(observed) = targets::owner_hold_count(self.set, spot.kind, spot.name, self.owner)
        {
            log.record(Event::Count {
                actor: log.id,
                client: self.set.tag.clone(),
                kind: spot.kind,
                name: spot.name.to_owned(),
                what: "hold_count".into(),
                observed,
            });
        }
    }
}
