//! A seeded, randomized, model-based checker: it looks for the next "two
//! holders" bug before a user does.
//!
//! Each *schedule* starts three `redis-server`s and runs actors (threads of
//! three or four clients, part of them in child processes) that pick lock
//! operations at random from their own seeded stream: every lock kind on a
//! few names each, now and then names that share a channel (`p0`, `{p0}`),
//! a hash slot (`{pt}a`, `{pt}b`) or a key with another kind (fenced and
//! spin locks on plain names), acquires with and without leases
//! (re-entrant ones too), releases in any order, leaks, stale leased
//! guards, force-unlocks (and a re-entry with its reply spoiled right
//! after one), a background release resent after a partition longer
//! than its latch's life, interruptible waits, client restarts, a client
//! shut down while its threads hand a lock to each other, `Lock::unlock()`
//! on a lock held only through live guards, long leases (longer than the
//! liveness bound) on names that share a channel, released early while
//! another client waits on them after waiting on the channel's other lock
//! (or at the worst moment: after the waiter's first try ran, before it
//! joined the channel's waiters, the proxy holding that try's reply back),
//! multi-lock and RedLock acquires whose member on the main server stalls
//! as its acquire is sent (the proxy holds that request and its retry back
//! past the response timeout; the late acquire's undo must give the member
//! back as they run, which the thread's `hold_count()` and another
//! client's waiter then judge), requests of a thread's own on one lock
//! still on their way while the thread goes on with that lock (a release
//! held back 1–2.5 s, its resends too, then the thread's next acquire,
//! re-entry, `hold_count()` or other guard's `unlock()`; an acquire held
//! back past the response timeout, whose retry takes the lock, then the
//! guard given back and `try_lock()` again and again while the late
//! request waits; each also with a shutdown, or in a child process a
//! fork, mid-path: issue 39's lanes, judged by the thread's count once
//! everything held back ran),
//! and, in child processes, `fork()` with the client in use or with the
//! forked process dropping the last handle of a client it inherited.
//! Beside them two holders that are not threads (issues 41 and 42,
//! `owners.rs`): an `Owner` driven from 2–4 threads of one client at once
//! (guards sent between its threads and released where they arrive, its
//! requests' first attempts and replies lost or held back by the proxy),
//! and an owner driven by tasks on the checker's own executor, whose
//! futures are dropped at random await points (after a few polls, while
//! pending, never polled, parked behind another thread's hold, right after
//! that hold's release); each is one holder to the oracle, whichever
//! thread or task acts for it, and at rest its field in Redis must count
//! exactly its live guards and a dropped future must leave nothing. After
//! every client shutdown the checker scans Redis at once for holder fields
//! the client left (`remains.rs`). The main server is reached
//! through a fault proxy (`tests/support/fault_proxy.rs`) that actors arm
//! to lose a release's first request or its reply; in half of the
//! schedules a fault thread also kills connections, stalls and restarts
//! servers. Every critical section is recorded in one history; afterwards
//! the oracle (`oracle.rs`) checks mutual exclusion (keyed by the Redis
//! key a lock lives in), losses, silent losses (a release that says `Ok`
//! for a lost hold), guards returned after `shutdown()`, fields a shutdown
//! left that no live guard accounts for and releases after a shutdown that
//! say `Ok` (`shutdown_rules.rs`), `Lock::unlock()` taking a guarded hold,
//! fencing tokens, hold counts (a stalled member's late hold kept, and a
//! count off the guards once an in-flight case's requests ran, and an
//! owner's field at rest, among them), what a dropped future left,
//! liveness, forks (the parent's pub/sub
//! connection included), and the end state in Redis (`leftovers.rs`).
//!
//! Running it:
//!
//! - `cargo test --test model`: schedules of about 10 s filling a 50 s
//!   budget, seeds derived from a clock-based master seed; all are printed.
//! - `REDHOLD_MODEL_SEED=<seed>`: replays one schedule (mode included: the
//!   seed's top two bits say whether faults and child processes take part).
//!   Each actor draws the same operations again; the threads' timing is the
//!   machine's, so a replay reproduces a failure often, not always.
//! - `REDHOLD_MODEL_SECS=<s>`: the budget (one schedule's length is at most
//!   10 s); `REDHOLD_MODEL_MASTER_SEED=<seed>` fixes the master seed;
//!   `REDHOLD_MODEL_KEEP_GOING=1` runs every schedule after a failing one.
//! - `REDHOLD_MODEL_VERBOSE=1` prints every violation in full (by default
//!   three per rule); `REDHOLD_MODEL_DUMP=<dir>` writes each schedule's
//!   whole history to `<dir>/history-<seed>.txt`.
//!
//! On a violation the test fails and prints the seed, the rule broken, the
//! holds involved, likely causes, and an excerpt of the history. A
//! schedule's violations are known once it has run and been judged, so a
//! failing run stops after that schedule (10 s plus its wind-down).
//!
//! | file | what |
//! |---|---|
//! | `config.rs` | timeouts, budget, seeds and modes |
//! | `rng.rs` | SplitMix64 and per-actor streams |
//! | `targets.rs` | lock kinds, names (shared channels, slots, keys), acquire methods, one guard type |
//! | `ops.rs` | the operation mix |
//! | `actors.rs` | actor threads, client slots (restarts), shutdown during a hand-over, lost releases, shared-channel wake-ups, `Lock::unlock` on guarded locks, the interrupter |
//! | `actors/wiped_reentry.rs` | a lock taken, force-unlocked, taken and released by another thread, then re-entered with its reply garbled, cut or lost: the first guard's release must say `LockLost` |
//! | `actors/stalled_drop.rs` | a guard dropped with its release request held back past the response timeout (the release goes on in the background), then the same lock taken again by the same thread, or the client shut down |
//! | `actors/short_lease_handover.rs` | a lock with a long lease handed straight to a thread of the same client with a short lease, which keeps it past that lease, while another client waits: that waiter must get the lock soon after the short lease ends (the liveness rule), not when the long one would have |
//! | `actors/partitioned_release.rs` | one lock taken twice through a client behind a proxy of its own; the second guard dropped while that proxy loses the release's reply and partitions for longer than the unlock latch lives (the release worker resends); another client tries the lock while the first guard stands |
//! | `actors/stalled_member.rs` | a multi-lock (2–3 names on the main server) or a RedLock (one name on the three servers) taken with a 4–5 s lease while the proxy holds its main-server member's acquire request and retry back 1.5–2.5 s (a stalled server): the call gives up on the member (a multi-lock fails, a RedLock takes the other two), or, with only the first request held back, ends with the locks and releases them before that request runs; the same thread tries again while they wait, and once they ran, the thread's `hold_count()` of the member must be 0 (the rule "late member kept") and another client must get it at once (liveness) |
//! | `actors/in_flight.rs` | what the two in-flight cases (issue 39, one ordered lane per lock and holder) share: their client (the actor's behind the schedule's proxy; in a child process one of the case's own behind a proxy of its own, chained), the thread's next calls while a request of its own on the lock is on its way, a shutdown or a fork mid-path, and the judge once every held-back request ran: the thread's `hold_count()` must equal its guards (more: the rule "left held"; fewer: "hold taken away"), another client tries the lock while a guard stands, and the count must be 0 once the thread released its guards |
//! | `actors/release_in_flight.rs` | a lock of any kind on a name of the cases' own (sharing a channel or a slot: `l0`/`{l0}`, `{lt}a`/`{lt}b`, `lf0`/`{lf0}`, `lw0`/`{lw0}`) or of the mix, taken once or twice (a re-entry); every release request of it by the thread held back 1–2.5 s for 0.8–2.5 s (a standing rule) while the last guard is dropped; 0–2 s later the thread's next calls (`lock()`, `try_lock_for`, `try_lock`, `hold_count()`, a re-entry, the other guard's `unlock()` and a re-take: 30 % at the worst moment, the unlock past 1 s after the drop, just after the path healed, the re-take before the first request runs) while the release worker runs; the summary counts them ("releases in flight") |
//! | `actors/undo_in_flight.rs` | the next request naming a lock of any kind with the thread's field held back 0.9–2.5 s (the pool's retry takes the lock, an undo follows the late request), the guard given back at once (mostly dropped), then `try_lock()` again and again, `lock()`, `try_lock_for`, `hold_count()` while the request waits; the summary counts them ("undos in flight") |
//! | `owners.rs` | holders that are not threads: an owner's one actor id and shared op numbers (`OwnerLog`), its guards on any thread (`OwnerHeld`), faults on its next request or release (matched by the lock's key and the owner's field), when its held-back requests have run (`Quiet`) |
//! | `owners/crew.rs` | one owner from 2–4 threads of a slot's client, in rounds of 0.5–1.8 s on one or two focus locks: every kind and form (`lock()` only as a re-entry), re-entries, guards sent to sibling threads through channels and released there, a standing rule on the owner's requests now and then; at each round's end the guards are pooled, judged at rest, tried by another client's thread, and dealt out again at random; the summary counts the rounds, the owner's holds and the faults on its requests |
//! | `owners/tasks.rs` | one owner driven by tasks on a client of its own: up to three async acquires in flight (every async form and kind), each dropped never, after 0–2 polls, 0–400 ms into a wait, or without a poll; releases by a drop, `unlock_async()`, or an `unlock_async()` dropped at once; a future parked behind another thread's hold (of its client: a direct hand-over; or another's) dropped while parked or right after the release; at each rest no waiter of its client may be parked; the summary counts the rests, the owner's holds and how futures were dropped |
//! | `owners/executor.rs` | the checker's executor: futures polled by hand, a waker that unparks the thread |
//! | `owners/rest.rs` | an owner at rest: its field in Redis (not through the proxy) against its live guards of each lock it touched, a fair queue entry or read-hold key left by a dropped future (the rules "left held", "hold taken away", "dropped future left"), then its `hold_count()` (the hold count rule) |
//! | `forks.rs` | `fork()` with a client in use (child processes only); `actors.rs` arranges the last drop of a client in the forked process |
//! | `failover.rs`, `failover/` | a separate test, `failover_safety`: Sentinel failovers that lose the replication stream for real (`link.rs`: every server known by a forwarder on 127.0.0.2 that can hold the stream back; `crash.rs`: starve the replica, `SIGKILL` the master right after an acquire or mid-operation, rejoin it empty as a replica; `topology.rs`, `actors.rs`, `tally.rs`), counting two-holder incidents with (`sync`: any incident or hold on an unreplicated write fails it) and without (`nosync`: counted and printed) `sync_replicas(1, 500 ms)`; either mode fails on a loss told `Ok`. `cluster.rs`: the same on a 3+3 Cluster with `CLUSTER FAILOVER FORCE` (no sync: not combinable). `live`: the master's link shuts the sentinels out, they replace it while it serves on, and one actor starts a new client per section; a client that does not follow `+switch-master` leaves holders on the old master told `Ok`. `REDHOLD_MODEL_FAILOVER=sync\|nosync\|cluster\|live\|all` (default all, side by side, each until 3 failovers: ~20 s); `REDHOLD_MODEL_FAILOVER_SECS=<s>` for the long runs |
//! | `remains.rs` | the scan of Redis right after each shutdown; each thread's library thread number |
//! | `../support/fault_proxy.rs` | a TCP proxy that loses or delays one chosen request or reply, or partitions (cuts every connection, holds new ones silent) |
//! | `spoiled.rs` | an acquire's reply garbled, cut or lost; the hold count in Redis judged on the spot |
//! | `children.rs`, `wire.rs` | actors in child processes, events over a socket |
//! | `faults.rs` | the fault thread |
//! | `history.rs` | events and the stamped history |
//! | `model.rs` | holds, sessions and valid intervals rebuilt from a history |
//! | `oracle.rs` | the rules, their excuses, violations |
//! | `shutdown_rules.rs` | the rules on what a shutdown leaves: fields no hold accounts for, releases that say `Ok` |
//! | `report.rs` | descriptions, likely causes, excerpts |
//! | `leftovers.rs` | what Redis must not keep after the run |
//! | `schedule.rs`, `joins.rs` | one schedule from start to verdict; bounded joins |

#[path = "../support/child.rs"]
mod child;
#[path = "../support/fault_proxy.rs"]
mod fault_proxy;
#[path = "../support/mod.rs"]
mod support;

mod actors;
mod children;
mod config;
#[cfg(all(feature = "sentinel", feature = "cluster"))]
mod failover;
mod faults;
mod forks;
mod history;
mod joins;
mod leftovers;
mod model;
mod ops;
mod oracle;
mod owners;
mod remains;
mod report;
mod rng;
mod schedule;
mod shutdown_rules;
mod spoiled;
mod targets;
mod wire;

use std::io::Write;
use std::time::Instant;

use config::Plan;

/// Writes to the real stderr, past the test harness's capture, so the
/// summary shows in every `cargo test` run.
fn say(text: &str) {
    let mut err = std::io::stderr().lock();
    let _ = err.write_all(text.as_bytes());
    let _ = err.write_all(b"\n");
}

#[test]
fn no_two_holders_in_random_schedules() {
    let plan = Plan::from_env();
    let started = Instant::now();
    say(&match plan.master {
        Some(master) => format!(
            "model: master seed {master} ({}={master} repeats this run), {} schedule(s) of {:?}",
            config::MASTER_ENV,
            plan.schedules.len(),
            plan.schedules[0].run_for
        ),
        None => format!("model: replaying seed {}", plan.schedules[0].seed),
    });
    let mut outcomes = Vec::new();
    for spec in &plan.schedules {
        let offset = started.elapsed().as_secs_f64();
        let outcome = schedule::run(spec);
        say(&format!(
            "model: {} (at {:.1} s)",
            outcome.summary,
            started.elapsed().as_secs_f64()
        ));
        for (kind, secs, calls) in &outcome.firsts {
            say(&format!(
                "model:   first {kind}: {secs:.2} s into schedule {} ({:.2} s into the run), \
                 after {calls} acquire calls",
                spec.index,
                offset + secs
            ));
        }
        let failed = !outcome.found.is_empty();
        outcomes.push(outcome);
        if failed && !plan.keep_going {
            break;
        }
    }
    let mut report = String::new();
    let mut violations = 0;
    let mut ops = 0;
    for outcome in &mut outcomes {
        ops += outcome.ops;
        let leftovers = outcome
            .leftovers
            .take()
            .map(|t| {
                t.join()
                    .unwrap_or_else(|_| vec!["end-state check panicked".into()])
            })
            .unwrap_or_default();
        let count = outcome.found.len() + leftovers.len();
        if count == 0 {
            continue;
        }
        violations += count;
        report.push_str(&format!(
            "\n=== schedule {} seed {} ({}): {count} violation(s){} -- replay with {}={}\n",
            outcome.spec.index,
            outcome.spec.seed,
            outcome.spec.mode(),
            outcome
                .first_violation
                .map(|t| format!(", the first {t:.2} s into the schedule"))
                .unwrap_or_default(),
            config::SEED_ENV,
            outcome.spec.seed
        ));
        report.push_str(&outcome.report);
        for problem in leftovers {
            report.push_str(&format!("[LEFTOVER] {problem}\n"));
        }
    }
    let seeds: Vec<String> = outcomes.iter().map(|o| o.spec.seed.to_string()).collect();
    say(&format!(
        "model: {} schedule(s), seeds [{}], {ops} ops, {violations} violation(s), {:.1} s",
        outcomes.len(),
        seeds.join(", "),
        started.elapsed().as_secs_f64()
    ));
    assert!(violations == 0, "model checker found violations:{report}");
}

/// A child process of a schedule with processes; does nothing otherwise.
#[test]
fn model_child() {
    let Ok(text) = std::env::var(children::CHILD_ENV) else {
        return;
    };
    let spec = children::ChildSpec::decode(&text)
        .unwrap_or_else(|| panic!("malformed {}: {text:?}", children::CHILD_ENV));
    children::child_main(spec);
}
