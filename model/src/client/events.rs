//! What a step did that the reachability checks look for: each must
//! happen somewhere in a run's reachable states, or the bounds are too
//! small to mean anything (issue 40, part 2). Kept out of the states
//! themselves (see [`super::state::State::events`]).

/// A release request ran twice at the server (its latch replayed).
pub const RAN_TWICE: u8 = 1;
/// An acquire ran after its call had returned (a late attempt).
pub const LATE_ACQUIRE: u8 = 2;
/// A release left to the lane was settled unconfirmed, because its latch
/// might expire before another attempt arrived.
pub const ABANDONED: u8 = 4;
/// A hand-over went to a shorter lease while another client waited.
pub const SHORTER_HANDOVER: u8 = 8;

/// A failover promoted a replica without an acquire the master had told
/// its caller `Ok` for (unexpired).
pub const FAILOVER_LOST: u8 = 16;

/// A local release that could hand its lock over found a waiter of the
/// other lock on its channel parked in its client (phase 9b).
pub const OTHER_LOCK_PARKED: u8 = 32;

/// A release message reached a client with waiters of both locks on the
/// channel parked, and woke one of each.
pub const BOTH_LOCKS_WOKEN: u8 = 64;

/// A local release handed its lock to a waiter of it while a waiter of
/// the other lock on the channel was parked too.
pub const HANDED_PAST_OTHER_LOCK: u8 = 128;

/// Each event and its name.
pub const ALL: &[(u8, &str)] = &[
    (RAN_TWICE, "a release ran twice at the server"),
    (LATE_ACQUIRE, "a late acquire ran after its call returned"),
    (
        ABANDONED,
        "a background release was abandoned as its latch might expire",
    ),
    (
        SHORTER_HANDOVER,
        "a hand-over went to a shorter lease while another client waited",
    ),
    (FAILOVER_LOST, "a failover lost an acquire"),
    (
        OTHER_LOCK_PARKED,
        "a release found a waiter of the other lock on its channel parked",
    ),
    (
        BOTH_LOCKS_WOKEN,
        "a release message woke a waiter of each lock on the channel",
    ),
    (
        HANDED_PAST_OTHER_LOCK,
        "a release handed its lock over with a waiter of the other lock parked",
    ),
];

/// The names of the events in `mask`.
pub fn names(mask: u64) -> Vec<&'static str> {
    ALL.iter()
        .filter(|(bit, _)| mask & u64::from(*bit) != 0)
        .map(|(_, name)| *name)
        .collect()
}
