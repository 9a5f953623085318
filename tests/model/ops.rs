//! The operation mix: what an actor does next, drawn from its random stream
//! and what it holds. Every operation draws from a generator seeded by one
//! value of the actor's stream, so the k-th operation of an actor always
//! starts from the same draw, however the threads interleave.
//!
//! The mix leans on the patterns that have broken locks before: re-entering
//! a held lock with a lease and dropping the inner hold first (the lease
//! must not cut the outer hold short), keeping a leased guard past its
//! lease and re-acquiring before unlocking it (the stale guard must not
//! release the new hold), releases in any order, force-unlocks, and client
//! restarts under held guards.

use std::time::Duration;

use crate::config::{
    HANDOVER_LEASE_MS, LEASE_MS, LONG_LEASE_MS, MEMBER_LEASE_MS, REACQUIRE_LEASE_MS,
};
use crate::rng::Rng;
use crate::targets::{Kind, Method, Target};

/// The most guards an actor holds at once.
const MAX_HELD: usize = 4;

/// What an actor does next.
#[derive(Debug, Clone)]
pub(crate) enum Op {
    /// Acquire `target`; `reentrant` when the actor already holds it.
    Acquire {
        target: Target,
        method: Method,
        reentrant: bool,
    },
    /// Release held guard number `index` (any order): `unlock()`, or a
    /// plain drop with `drop`; with `cut`, the release's first attempt is
    /// lost (when the run has a fault proxy).
    Release {
        index: usize,
        drop: bool,
        cut: Option<Cut>,
    },
    /// Give guard `index` up with `leak()`; released later by `Lock::unlock`.
    Leak { index: usize },
    /// Keep leased guard `index` until its lease ran out plus `extra`,
    /// optionally acquire the same lock again first, then unlock the stale
    /// guard.
    StaleLease {
        index: usize,
        reacquire: Option<Method>,
        extra: Duration,
        cut: Option<Cut>,
    },
    /// Drop guard `index` while its release request is held back `delay`
    /// (longer than the response timeout: the release goes on in the
    /// background), then take the same lock again at once with
    /// `reacquire`, or shut the client down with `restart` (see
    /// `actors/stalled_drop.rs`).
    StalledDrop {
        index: usize,
        delay: Duration,
        reacquire: Option<Method>,
        restart: bool,
    },
    /// Work inside (or between) critical sections.
    Work(Duration),
    /// `force_unlock` whoever holds it.
    ForceUnlock(Target),
    /// `hold_count()` (or `is_held_by_current_thread()` with `as_bool`).
    Check {
        kind: Kind,
        name: &'static str,
        as_bool: bool,
    },
    /// `is_locked()` and `remaining_lease()`, not judged.
    Peek { kind: Kind, name: &'static str },
    /// Shut the actor's client set down and build a new one.
    RestartClient,
    /// Take `target`, let `waiters` more threads of the same client park
    /// on it, then release it (its reply held back `delay` by the fault
    /// proxy, so the hand-over to a parked thread is in flight) while
    /// another thread shuts the client down.
    ShutdownHandover {
        target: Target,
        waiters: usize,
        delay: Duration,
    },
    /// `fork()` (in child processes only) and, in the forked process, do
    /// `what` with the inherited client; see `forks.rs`.
    Fork { what: ForkUse, target: Target },
    /// Take `target` (a name that shares a channel) with a lease longer
    /// than the liveness bound, keep it `hold`, and release it early: a
    /// waiter of another client must be woken by the release, not by the
    /// lease's end.
    LongLease {
        target: Target,
        lease: Duration,
        hold: Duration,
    },
    /// A release's wake-up on a channel two locks share: with a client of
    /// the actor's own (another client, so the release publishes), wait a
    /// moment on lock `first` (held by the actor), so that the other
    /// client's channel knows `first`; then take `then` (same channel)
    /// with a lease of `lease`, let the other client wait on it without a
    /// bound, and release it after `hold`. The waiter must get it at once,
    /// not when the lease would have ended (past the liveness bound).
    ///
    /// With `race_join`, the release comes at the worst moment instead:
    /// after the waiter's first try ran and before it joined the channel's
    /// waiters (the proxy holds that try's reply back). Its client was
    /// subscribed all along, so only the message it heard in between tells
    /// it to try again rather than park on the first try's TTL.
    SharedChannelWake {
        first: &'static str,
        then: &'static str,
        lease: Duration,
        hold: Duration,
        race_join: bool,
    },
    /// A multi-lock over `members`, single locks of several kinds (plain,
    /// fair, fenced, spin, read, write), taken with `method`; its guard is
    /// split into one guard per lock, each then held and released as a
    /// hold of its own kind.
    MixedMulti {
        members: Vec<Target>,
        method: Method,
    },
    /// `Lock::unlock()` on the lock of held guard `index`, which the
    /// thread holds only through live guards (none leaked): it must answer
    /// `NotHeld` and leave every hold alone.
    UnlockGuarded { index: usize },
    /// Take `target` (a single lock), have it force-unlocked, let another
    /// thread of the client take and release it, then re-enter it with
    /// the reply spoiled by `spoil` (when the run has a fault proxy), and
    /// unlock the first guard: its hold was lost, so its release must not
    /// say `Ok` (see `actors/wiped_reentry.rs`).
    WipedReentry { target: Target, spoil: u8 },
    /// Take `target` twice through a client behind a proxy of its own,
    /// drop the second guard while that proxy loses the release's reply
    /// and partitions for the unlock latch's life plus `partition`, then
    /// let another client try the lock while the first guard stands (see
    /// `actors/partitioned_release.rs`).
    PartitionedRelease { target: Target, partition: Duration },
    /// Take `target` with `lease`, let another client wait on it, let a
    /// second thread of this client wait with the `short` lease, release
    /// (a direct hand-over to that thread, which holds `overrun` past its
    /// lease): the other client's waiter must get the lock soon after the
    /// short lease ends (see `actors/short_lease_handover.rs`).
    ShortLeaseHandover {
        target: Target,
        lease: Duration,
        short: Duration,
        overrun: Duration,
    },
    /// Take `target` (a multi-lock or a RedLock) with `wait` and `lease`
    /// while the acquire requests of its member `stalled` on the main
    /// server are held back `stall` (a stalled server: the call gives up on
    /// the member, whose requests run later), try it again at once, then
    /// let another client take the member once the requests ran (see
    /// `actors/stalled_member.rs`).
    StalledMember {
        target: Target,
        stalled: &'static str,
        stall: Duration,
        wait: Duration,
        lease: Duration,
    },
    /// A release held back while the same thread goes on with the lock
    /// (see [`ReleaseCase`] and `actors/release_in_flight.rs`).
    ReleaseInFlight(ReleaseCase),
    /// An acquire held back while the same thread gives the lock back and
    /// goes on with it (see [`UndoCase`] and `actors/undo_in_flight.rs`).
    UndoInFlight(UndoCase),
}

/// Take `target` (a single lock) with `method`, twice with `reentry` (two
/// guards of one generation); drop the last guard while every release
/// request of it by this thread is held back `delay`, for `window` (a
/// standing rule: the release goes on in the background, its resends
/// held back too); then, `pause` after the drop returned, make the `next`
/// calls while the release may still be on its way, or `end` the case
/// with a shutdown or a fork; once every held-back request ran, judge the
/// thread's count.
#[derive(Debug, Clone)]
pub(crate) struct ReleaseCase {
    pub(crate) target: Target,
    pub(crate) method: Method,
    pub(crate) reentry: bool,
    pub(crate) delay: Duration,
    pub(crate) window: Duration,
    pub(crate) pause: Duration,
    pub(crate) next: Vec<Next>,
    pub(crate) end: CaseEnd,
}

/// Take `target` (a single lock, held by nobody of this thread) with
/// `method` while the first request naming it by this thread is held back
/// `delay` (past the response timeout: the pool's retry takes it, an undo
/// follows the late request); give the guard back at once (`unlock()`
/// with `unlock`, else a drop), make the `next` calls while the request is
/// still held back, or `end` the case with a shutdown or a fork; once it
/// ran, judge the thread's count.
#[derive(Debug, Clone)]
pub(crate) struct UndoCase {
    pub(crate) target: Target,
    pub(crate) method: Method,
    pub(crate) delay: Duration,
    pub(crate) unlock: bool,
    pub(crate) next: Vec<Next>,
    pub(crate) end: CaseEnd,
    /// Now and then the held-back request's connection is cut when its
    /// hold-back ends, so the undo written behind it never arrives.
    pub(crate) cut: Option<UndoCut>,
}

/// How an undo case's connection is cut (2bbaed6: an undo whose
/// connection fails before its reply goes again on another connection,
/// one copy at a time, while its latches outlive every copy).
#[derive(Debug, Clone, Copy)]
pub(crate) struct UndoCut {
    /// The late request runs first (its hold is the undo's to give back),
    /// or never runs.
    pub(crate) ran: bool,
    /// How long the proxy holds back the undo's next copy: under or past
    /// the response timeout (a copy kept and read, while the thread's
    /// next calls wait on the lane).
    pub(crate) copy_held: Duration,
    /// The guard the call got stands until the judge (no next call but a
    /// `hold_count()`): no release of the field follows the undo, so a
    /// late hold the undo did not give back stays beside it.
    pub(crate) keep_guard: bool,
}

/// A call of the thread's own while a request of it on the same lock may
/// still be on its way (the in-flight cases, `actors/in_flight.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Next {
    /// An acquire of the case's lock (a re-entry while a guard stands).
    Acquire(Method),
    /// `hold_count()` of the case's lock.
    HoldCount,
    /// `unlock()` of the case's other guard (the one of the same
    /// generation that still stands).
    UnlockOther,
    /// `try_lock()` again and again, each guard given back at once, until
    /// the held-back request ran.
    TryLoop,
}

/// How an in-flight case ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CaseEnd {
    /// The thread's count is judged once every held-back request ran.
    Judge,
    /// The client is shut down while the request is on its way (the rules
    /// on what a shutdown leaves judge it).
    Shutdown,
    /// `fork()` while the request is on its way (child processes only):
    /// the forked process's calls fail with `ForkedProcess` and leave the
    /// parent's lane alone; then the case goes on and is judged.
    Fork,
}

/// What a forked process does with the client it inherited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ForkUse {
    /// Acquire and release: every call must fail with `ForkedProcess`.
    Use,
    /// Drop every handle it inherited of a client of its own (built for
    /// the purpose, holding `target`, its pub/sub connection subscribed),
    /// so that the client's last drop runs in the forked process; the
    /// parent's pub/sub connection must not notice.
    Drop,
    /// `Client::shutdown()`.
    Shutdown,
}

/// How a release's first attempt is lost (see `fault_proxy.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Cut {
    /// The connection dies before the request reaches the server.
    Request,
    /// The server runs the release; the connection dies before its reply.
    Reply,
    /// The server runs the release; its reply comes one byte at a time,
    /// each within the response timeout, all of it not (issue 26).
    Trickle,
}

/// Percent of releases whose first attempt is lost (with a fault proxy).
const CUT_RELEASE: u64 = 8;
/// Percent of stale-lease releases (the hold is likely lost by then, maybe
/// taken by another) whose first attempt is lost.
const CUT_STALE: u64 = 40;

fn cut(rng: &mut Rng, percent: u64) -> Option<Cut> {
    rng.chance(percent).then(|| match rng.below(5) {
        0 | 1 => Cut::Request,
        2 | 3 => Cut::Reply,
        _ => Cut::Trickle,
    })
}

/// What the chooser needs to know about one held guard.
#[derive(Debug, Clone)]
pub(crate) struct HeldView {
    pub(crate) target: Target,
    pub(crate) leased: bool,
    /// False once the guard was leaked.
    pub(crate) has_guard: bool,
}

#[derive(Debug, Clone, Copy)]
enum Choice {
    Acquire,
    Release,
    Leak,
    Stale,
    StalledDrop,
    Work,
    Force,
    Check,
    Peek,
    Restart,
    ShutdownHandover,
    Fork,
    LongLease,
    SharedWait,
    SharedChannelWake,
    UnlockGuarded,
    WipedReentry,
    PartitionedRelease,
    ShortLeaseHandover,
    StalledMember,
    ReleaseInFlight,
    UndoInFlight,
}

/// Draws the next operation; `Fork` only when `may_fork`.
pub(crate) fn choose(rng: &mut Rng, held: &[HeldView], may_fork: bool) -> Op {
    let holding = !held.is_empty();
    let leased: Vec<usize> = (0..held.len())
        .filter(|&i| held[i].leased && held[i].has_guard)
        .collect();
    // Only watched guards are leaked: Redis keeps one TTL per lock, so a
    // leaked lease lives as long as the key (docs/reliability.md), and
    // `Lock::unlock` cannot say which of a thread's holds it ends; a
    // leaked watched hold has one unambiguous end, the `Lock::unlock`.
    let watched: Vec<usize> = (0..held.len())
        .filter(|&i| !held[i].leased && held[i].has_guard)
        .collect();
    // Locks held through live guards only (none leaked on the name).
    let guarded: Vec<usize> = (0..held.len())
        .filter(|&i| held[i].has_guard && held[i].target.kind.single())
        .filter(|&i| {
            !held
                .iter()
                .any(|h| !h.has_guard && h.target.names[0] == held[i].target.names[0])
        })
        .collect();
    let guarded_any: Vec<usize> = (0..held.len()).filter(|&i| held[i].has_guard).collect();
    let table: Vec<(u64, Choice)> = if holding {
        vec![
            (if held.len() < MAX_HELD { 330 } else { 0 }, Choice::Acquire),
            (
                if guarded.is_empty() { 0 } else { 20 },
                Choice::UnlockGuarded,
            ),
            (330, Choice::Release),
            (if watched.is_empty() { 0 } else { 60 }, Choice::Leak),
            (if leased.is_empty() { 0 } else { 90 }, Choice::Stale),
            (
                if guarded_any.is_empty() { 0 } else { 40 },
                Choice::StalledDrop,
            ),
            (120, Choice::Work),
            (5, Choice::Force),
            (80, Choice::Check),
            (15, Choice::Peek),
            (2, Choice::Restart),
            (if may_fork { 4 } else { 0 }, Choice::Fork),
        ]
    } else {
        vec![
            (820, Choice::Acquire),
            (40, Choice::Work),
            (8, Choice::Force),
            (60, Choice::Check),
            (30, Choice::Peek),
            (3, Choice::Restart),
            (6, Choice::ShutdownHandover),
            (if may_fork { 6 } else { 0 }, Choice::Fork),
            (15, Choice::LongLease),
            (20, Choice::SharedWait),
            (12, Choice::SharedChannelWake),
            (10, Choice::WipedReentry),
            (4, Choice::PartitionedRelease),
            (6, Choice::ShortLeaseHandover),
            (20, Choice::StalledMember),
            (RELEASE_IN_FLIGHT_WEIGHT, Choice::ReleaseInFlight),
            (UNDO_IN_FLIGHT_WEIGHT, Choice::UndoInFlight),
        ]
    };
    match rng.weighted(&table) {
        Choice::Acquire => acquire(rng, held),
        Choice::Release => Op::Release {
            index: rng.below(held.len() as u64) as usize,
            drop: rng.chance(30),
            cut: cut(rng, CUT_RELEASE),
        },
        Choice::StalledDrop => {
            let index = *rng.pick(&guarded_any);
            // Past the response timeout (600 ms), within the unlock latch's
            // life (about 2.8 s).
            let delay = Duration::from_millis(700 + rng.below(1300));
            let restart = rng.chance(15);
            // Bounded: the actor may hold other locks.
            let reacquire = (!restart && rng.chance(85)).then(|| {
                if rng.chance(50) {
                    Method::TryFor(Duration::from_millis(2500))
                } else {
                    // As drawn before the range had a name: seeds replay.
                    let (lo, hi) = REACQUIRE_LEASE_MS;
                    let lease = Duration::from_millis(lo + rng.below(hi - lo + 1));
                    Method::TryForLease(Duration::from_millis(2500), lease)
                }
            });
            Op::StalledDrop {
                index,
                delay,
                reacquire,
                restart,
            }
        }
        Choice::Leak => Op::Leak {
            index: *rng.pick(&watched),
        },
        Choice::Stale => {
            let index = *rng.pick(&leased);
            // Re-acquiring without a bound only when nothing else is held:
            // an actor never waits without a bound while it holds a lock,
            // so actors cannot deadlock on each other.
            let alone = held.len() == 1;
            let reacquire = rng.chance(65).then(|| stale_reacquire(rng, alone));
            Op::StaleLease {
                index,
                reacquire,
                extra: rng.millis(10, 150),
                cut: cut(rng, CUT_STALE),
            }
        }
        // Now and then a long section: the watchdog must keep a watched
        // hold alive over several renewals (every 500 ms).
        Choice::Work => Op::Work(if holding && rng.chance(10) {
            rng.millis(1600, 3000)
        } else if holding {
            rng.millis(0, 250)
        } else {
            rng.millis(0, 30)
        }),
        Choice::Force => Op::ForceUnlock(any_target(rng)),
        Choice::Check => {
            let singles: Vec<&HeldView> = held.iter().filter(|h| h.target.kind.single()).collect();
            let (kind, name) = if !singles.is_empty() && rng.chance(75) {
                let h = rng.pick(&singles);
                (h.target.kind, h.target.names[0])
            } else {
                let kind = *rng.pick(&Kind::SINGLE);
                (kind, pick_name(rng, kind))
            };
            Op::Check {
                kind,
                name,
                as_bool: rng.chance(30),
            }
        }
        Choice::Peek => {
            let target = any_target(rng);
            Op::Peek {
                kind: target.kind,
                name: target.names[0],
            }
        }
        Choice::Restart => Op::RestartClient,
        Choice::UnlockGuarded => Op::UnlockGuarded {
            index: *rng.pick(&guarded),
        },
        Choice::WipedReentry => {
            let kind = *rng.pick(&Kind::SINGLE);
            Op::WipedReentry {
                target: Target {
                    kind,
                    names: vec![pick_name(rng, kind)],
                },
                spoil: rng.below(3) as u8,
            }
        }
        Choice::ShortLeaseHandover => Op::ShortLeaseHandover {
            // Names of its own: another actor's release would wake the
            // waiter and hide a TTL cut short in silence.
            target: Target {
                kind: *rng.pick(&[Kind::Plain, Kind::Fenced]),
                names: vec![*rng.pick(&["h0", "h1"])],
            },
            lease: rng.millis(HANDOVER_LEASE_MS.0, HANDOVER_LEASE_MS.1),
            short: rng.millis(200, 400),
            overrun: rng.millis(600, 1200),
        },
        Choice::StalledMember => {
            // Names of its own, a few (two cases at once on one name hide
            // each other: a waiter counts as busy from its call on):
            // another holder would hide a late hold left standing.
            let (target, stalled) = if rng.chance(50) {
                let mut names = vec!["m0", "m1", "m2", "m3"];
                for i in (1..names.len()).rev() {
                    names.swap(i, rng.below(i as u64 + 1) as usize);
                }
                names.truncate(rng.range(2, 3) as usize);
                let stalled = *rng.pick(&names);
                let target = Target {
                    kind: Kind::Multi,
                    names,
                };
                (target, stalled)
            } else {
                // One name on the three servers: the main server's member
                // (behind the proxy) is the stalled one.
                let name = *rng.pick(&["rm0", "rm1"]);
                let target = Target {
                    kind: Kind::Red,
                    names: vec![name],
                };
                (target, name)
            };
            Op::StalledMember {
                target,
                stalled,
                // Past both attempts' response timeouts (2 × 600 ms + 50 ms).
                stall: rng.millis(1500, 2500),
                wait: rng.millis(0, 300),
                // Longer than the liveness bound (3 s) after the stall.
                lease: rng.millis(MEMBER_LEASE_MS.0, MEMBER_LEASE_MS.1),
            }
        }
        Choice::ReleaseInFlight => release_in_flight(rng, may_fork),
        Choice::UndoInFlight => undo_in_flight(rng, may_fork),
        Choice::PartitionedRelease => {
            // The releases issue 33 names: plain, fair, read and write.
            let kind = *rng.pick(&[Kind::Plain, Kind::Fair, Kind::Read, Kind::Write]);
            Op::PartitionedRelease {
                target: Target {
                    kind,
                    names: vec![pick_name(rng, kind)],
                },
                partition: rng.millis(1000, 2000),
            }
        }
        Choice::LongLease => Op::LongLease {
            target: shared_channel_target(rng),
            lease: rng.millis(LONG_LEASE_MS.0, LONG_LEASE_MS.1),
            hold: rng.millis(20, 400),
        },
        Choice::SharedChannelWake => {
            let race_join = rng.chance(50);
            // The race on names of its own: other traffic on the channel
            // would wake a waiter whose wake-up was lost, and hide it.
            let pairs: &[(&'static str, &'static str)] = if race_join {
                &[("q0", "{q0}"), ("q1", "{q1}")]
            } else {
                &[("p0", "{p0}"), ("p1", "{p1}")]
            };
            let (plain, tagged) = *rng.pick(pairs);
            let (first, then) = if rng.chance(50) {
                (plain, tagged)
            } else {
                (tagged, plain)
            };
            Op::SharedChannelWake {
                first,
                then,
                lease: rng.millis(LONG_LEASE_MS.0, LONG_LEASE_MS.1),
                hold: rng.millis(50, 300),
                race_join,
            }
        }
        // Waiters without a bound on the names that share a channel, so
        // that a long lease released early finds some.
        Choice::SharedWait => Op::Acquire {
            target: shared_channel_target(rng),
            method: if rng.chance(70) {
                Method::Lock
            } else {
                Method::LockLease(lease(rng))
            },
            reentrant: false,
        },
        Choice::Fork => Op::Fork {
            what: *rng.pick(&[
                ForkUse::Use,
                ForkUse::Drop,
                ForkUse::Drop,
                ForkUse::Shutdown,
            ]),
            target: match held.first() {
                Some(h) if rng.chance(60) => h.target.clone(),
                _ => any_target(rng),
            },
        },
        Choice::ShutdownHandover => {
            // The kinds a release hands over directly, on names that share
            // a channel with others now and then.
            let kind = if rng.chance(70) {
                Kind::Plain
            } else {
                Kind::Fenced
            };
            Op::ShutdownHandover {
                target: Target {
                    kind,
                    names: vec![pick_name(rng, kind)],
                },
                waiters: rng.range(2, 3) as usize,
                delay: rng.millis(20, 60),
            }
        }
    }
}

/// Weights of the in-flight cases among an empty-handed actor's choices
/// (out of about 1000): a case keeps its actor 3 to 7 s, and only one
/// that can be judged before the schedule stops begins, so most begin in
/// a schedule's first seconds; a release case, the longer, gets more.
const RELEASE_IN_FLIGHT_WEIGHT: u64 = 60;
const UNDO_IN_FLIGHT_WEIGHT: u64 = 30;

/// The lease of a hold taken in an in-flight case, when it has one: as
/// long as the longest leases of the mix (which the end-state check
/// waits out after a shutdown), longer than most cases, so that only a
/// release ends it before the thread's count is judged (a count is not
/// judged against a lease about to end).
const IN_FLIGHT_LEASE: Duration = Duration::from_millis(LONG_LEASE_MS.1);

/// A lock for an in-flight case, and whether it is one of the cases' own
/// names (few others use them, so a call may wait without a bound): in
/// pairs that share a channel (`l0` and `{l0}`) or a hash slot (`{lt}a`
/// and `{lt}b`), fenced and spin locks on the plain ones; now and then a
/// name of the usual mix instead (contended, maybe shared as
/// [`pick_name`] does).
fn in_flight_target(rng: &mut Rng) -> (Target, bool) {
    let kind = *rng.pick(&Kind::SINGLE);
    let (name, own) = if rng.chance(25) {
        (pick_name(rng, kind), false)
    } else {
        let names: &[&'static str] = match kind {
            Kind::Fair => &["lf0", "{lf0}"],
            Kind::Read | Kind::Write => &["lw0", "{lw0}"],
            _ => &["l0", "{l0}", "{lt}a", "{lt}b"],
        };
        (*rng.pick(names), true)
    };
    let target = Target {
        kind,
        names: vec![name],
    };
    (target, own)
}

/// An acquire of an in-flight case: unbounded waits only on the cases'
/// own names (`own`), leases longer than the case.
fn in_flight_method(rng: &mut Rng, own: bool) -> Method {
    let lease = IN_FLIGHT_LEASE;
    match rng.below(if own { 6 } else { 4 }) {
        0 => Method::TryLock,
        1 => Method::TryFor(rng.millis(100, 2500)),
        2 => Method::TryForLease(rng.millis(100, 2500), lease),
        3 => Method::TryFor(rng.millis(0, 300)),
        4 => Method::Lock,
        _ => Method::LockLease(lease),
    }
}

/// How an in-flight case ends: mostly judged; now and then a shutdown,
/// or (child processes only) a fork.
fn case_end(rng: &mut Rng, may_fork: bool) -> CaseEnd {
    if may_fork && rng.chance(20) {
        CaseEnd::Fork
    } else if rng.chance(8) {
        CaseEnd::Shutdown
    } else {
        CaseEnd::Judge
    }
}

/// See [`Op::ReleaseInFlight`].
fn release_in_flight(rng: &mut Rng, may_fork: bool) -> Op {
    let (target, own) = in_flight_target(rng);
    // The first hold: watched, or leased past the case.
    let method = if rng.chance(50) {
        Method::TryFor(Duration::from_millis(300))
    } else {
        Method::TryForLease(Duration::from_millis(300), IN_FLIGHT_LEASE)
    };
    let end = case_end(rng, may_fork);
    if rng.chance(30) {
        // At the worst moment: the generation's other guard is unlocked
        // once its retry bound reaches past the dropped release's latch
        // (from about 1 s after that was sent), just after the path healed
        // (so the unlock and the next acquire go through at once), and the
        // lock is taken again while the dropped release's first request
        // is still on its way.
        let pause = rng.millis(500, 1000);
        let healed = (600 + pause.as_millis() as u64).saturating_sub(rng.range(50, 300));
        return Op::ReleaseInFlight(ReleaseCase {
            target,
            method,
            reentry: true,
            delay: rng.millis(pause.as_millis() as u64 + 1100, 2500),
            window: Duration::from_millis(healed.max(800)),
            pause,
            next: vec![Next::UnlockOther, Next::Acquire(in_flight_method(rng, own))],
            end,
        });
    }
    let reentry = rng.chance(50);
    let pause = rng.millis(0, 2000);
    let mut next = Vec::new();
    if reentry && rng.chance(40) {
        // The generation's other guard released while the dropped one's
        // release may be on its way, then the lock taken again.
        next.push(Next::UnlockOther);
        next.push(Next::Acquire(in_flight_method(rng, own)));
    } else {
        next.push(if rng.chance(20) {
            Next::HoldCount
        } else {
            Next::Acquire(in_flight_method(rng, own))
        });
        if rng.chance(40) {
            next.push(if rng.chance(30) {
                Next::HoldCount
            } else {
                Next::Acquire(in_flight_method(rng, own))
            });
        }
    }
    // Every request of the release held back for a while from the drop
    // on; half the time the path heals just before the next calls (the
    // drop returns about 600 ms after the rule is armed), so that they go
    // through while the first request is still on its way.
    let window = if rng.chance(50) {
        rng.millis(800, 2500)
    } else {
        let healed = (600 + pause.as_millis() as u64).saturating_sub(rng.range(50, 300));
        Duration::from_millis(healed.clamp(800, 2500))
    };
    Op::ReleaseInFlight(ReleaseCase {
        target,
        method,
        reentry,
        // Past the response timeout (600 ms) for every attempt.
        delay: rng.millis(1000, 2500),
        window,
        pause,
        next,
        end,
    })
}

/// See [`Op::UndoInFlight`].
fn undo_in_flight(rng: &mut Rng, may_fork: bool) -> Op {
    let (target, own) = in_flight_target(rng);
    let method = in_flight_method(rng, own);
    let mut next = Vec::new();
    for _ in 0..rng.range(1, 2) {
        next.push(match rng.below(4) {
            0 | 1 => Next::TryLoop,
            2 => Next::HoldCount,
            _ => Next::Acquire(in_flight_method(rng, own)),
        });
    }
    // A cut leaves the undo's copy time to go and answer within its keep
    // time: the hold-back is shorter.
    let cut = rng.chance(35).then(|| UndoCut {
        ran: rng.chance(60),
        copy_held: if rng.chance(50) {
            Duration::ZERO
        } else {
            rng.millis(300, 1100)
        },
        keep_guard: rng.chance(50),
    });
    if cut.is_some_and(|c| c.keep_guard) {
        next.retain(|n| *n == Next::HoldCount);
    }
    Op::UndoInFlight(UndoCase {
        target,
        method,
        // Past the response timeout (600 ms) and the retry's start, well
        // within the undo's keep time (the unlock latch's life, 2.85 s,
        // from the call's end).
        delay: if cut.is_some() {
            rng.millis(900, 1600)
        } else {
            rng.millis(900, 2500)
        },
        unlock: rng.chance(25),
        next,
        end: case_end(rng, may_fork),
        cut,
    })
}

/// A name of `kind`: mostly one of its few main names, now and then one
/// that shares a channel, a hash slot or a key with another kind's.
pub(crate) fn pick_name(rng: &mut Rng, kind: Kind) -> &'static str {
    let extra = kind.extra_names();
    if !extra.is_empty() && rng.chance(25) {
        extra[rng.below(extra.len() as u64) as usize]
    } else {
        let names = kind.names();
        names[rng.below(names.len() as u64) as usize]
    }
}

/// A lock on a name that shares its channel with another (`p0` and
/// `{p0}`, `p1` and `{p1}`), mostly the tagged one: plain, or fenced on
/// the names fenced locks use.
fn shared_channel_target(rng: &mut Rng) -> Target {
    let (kind, names): (Kind, &[&'static str]) = if rng.chance(25) {
        (Kind::Fenced, &["{p0}", "p0"])
    } else {
        (Kind::Plain, &["{p0}", "{p1}", "p0", "p1"])
    };
    // The tagged names are the rarer ones elsewhere: their waiters are
    // the ones a wake-up for the channel's other lock leaves asleep.
    let name = if rng.chance(65) {
        names[0]
    } else {
        names[rng.below(names.len() as u64) as usize]
    };
    Target {
        kind,
        names: vec![name],
    }
}

/// A random lock of a random kind (a multi-lock over 2 or 3 plain names).
pub(crate) fn any_target(rng: &mut Rng) -> Target {
    let kind = rng.weighted(&[
        (16, Kind::Plain),
        (12, Kind::Fair),
        (12, Kind::Fenced),
        (10, Kind::Spin),
        (10, Kind::Read),
        (10, Kind::Write),
        (10, Kind::Multi),
        (8, Kind::Red),
    ]);
    let names = if kind == Kind::Multi {
        let mut all = kind.names().to_vec();
        // Fisher-Yates, then keep 2 or 3: the acquire order varies too.
        for i in (1..all.len()).rev() {
            all.swap(i, rng.below(i as u64 + 1) as usize);
        }
        all.truncate(rng.range(2, 3) as usize);
        all
    } else {
        vec![pick_name(rng, kind)]
    };
    Target { kind, names }
}

/// Two or three single locks of different kinds, on their kinds' names
/// (now and then one shared with another kind, as `pick_name` does).
fn mixed_members(rng: &mut Rng) -> Vec<Target> {
    let mut kinds = Kind::SINGLE.to_vec();
    for i in (1..kinds.len()).rev() {
        kinds.swap(i, rng.below(i as u64 + 1) as usize);
    }
    kinds.truncate(rng.range(2, 3) as usize);
    kinds
        .into_iter()
        .map(|kind| Target {
            kind,
            names: vec![pick_name(rng, kind)],
        })
        .collect()
}

fn lease(rng: &mut Rng) -> Duration {
    rng.millis(LEASE_MS.0, LEASE_MS.1)
}

/// An acquire: a lock the actor holds (re-entry) or any other.
fn acquire(rng: &mut Rng, held: &[HeldView]) -> Op {
    if !held.is_empty() && rng.chance(45) {
        let mut target = rng.pick(held).target.clone();
        // A writer may also read (downgrade); a reader asking to write is
        // refused, which is worth checking now and then.
        match target.kind {
            Kind::Write if rng.chance(35) => target.kind = Kind::Read,
            Kind::Read if rng.chance(10) => target.kind = Kind::Write,
            _ => {}
        }
        let reentrant = held.iter().any(|h| h.target == target);
        let method = if rng.chance(45) {
            // The classic: an inner hold with a lease and no wait.
            Method::TryForLease(Duration::ZERO, lease(rng))
        } else {
            method(rng, true)
        };
        return Op::Acquire {
            target,
            method,
            reentrant,
        };
    }
    let target = any_target(rng);
    if target.kind == Kind::Multi && rng.chance(40) {
        return Op::MixedMulti {
            members: mixed_members(rng),
            method: method(rng, held.is_empty()),
        };
    }
    let reentrant = held.iter().any(|h| h.target == target);
    Op::Acquire {
        method: method(rng, held.is_empty() || reentrant),
        target,
        reentrant,
    }
}

/// An acquire method; unbounded waits only when `may_block`.
fn method(rng: &mut Rng, may_block: bool) -> Method {
    #[derive(Clone, Copy)]
    enum M {
        Lock,
        LockLease,
        Try,
        TryFor,
        TryForLease,
        Intr,
        IntrLease,
    }
    let table: &[(u64, M)] = if may_block {
        &[
            (14, M::Lock),
            (14, M::LockLease),
            (12, M::Try),
            (14, M::TryFor),
            (22, M::TryForLease),
            (12, M::Intr),
            (12, M::IntrLease),
        ]
    } else {
        &[
            (25, M::Try),
            (25, M::TryFor),
            (30, M::TryForLease),
            (10, M::Intr),
            (10, M::IntrLease),
        ]
    };
    let trigger_max = if may_block { 1500 } else { 300 };
    match rng.weighted(table) {
        M::Lock => Method::Lock,
        M::LockLease => Method::LockLease(lease(rng)),
        M::Try => Method::TryLock,
        M::TryFor => Method::TryFor(rng.millis(1, 400)),
        M::TryForLease => Method::TryForLease(rng.millis(0, 400), lease(rng)),
        M::Intr => Method::Interruptibly(rng.millis(5, trigger_max)),
        M::IntrLease => Method::InterruptiblyLease(rng.millis(5, trigger_max), lease(rng)),
    }
}

/// How a stale guard's lock is taken again before the stale unlock.
fn stale_reacquire(rng: &mut Rng, may_block: bool) -> Method {
    if may_block && rng.chance(50) {
        if rng.chance(50) {
            Method::Lock
        } else {
            Method::LockLease(lease(rng))
        }
    } else {
        match rng.below(3) {
            0 => Method::TryLock,
            1 => Method::TryFor(rng.millis(50, 300)),
            _ => Method::TryForLease(rng.millis(0, 300), lease(rng)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mix_reaches_the_known_bad_patterns() {
        let mut rng = Rng::new(42);
        let outer = HeldView {
            target: Target {
                kind: Kind::Plain,
                names: vec!["p0"],
            },
            leased: false,
            has_guard: true,
        };
        let leased = HeldView {
            leased: true,
            ..outer.clone()
        };
        let (mut inner_lease, mut stale_then_lock) = (0, 0);
        for _ in 0..2000 {
            if let Op::Acquire {
                reentrant: true,
                method: Method::TryForLease(wait, _),
                ..
            } = choose(&mut rng, std::slice::from_ref(&outer), false)
            {
                inner_lease += usize::from(wait.is_zero());
            }
            if let Op::StaleLease {
                reacquire: Some(_), ..
            } = choose(&mut rng, std::slice::from_ref(&leased), false)
            {
                stale_then_lock += 1;
            }
        }
        assert!(inner_lease > 50, "{inner_lease}");
        assert!(stale_then_lock > 50, "{stale_then_lock}");
    }
}
