//! The waiters of one channel, lock by lock.
//!
//! Names that differ can share a channel: Redisson's naming gives `x` and
//! `{x}` one channel (`redisson_lock__channel:{x}`), and a fair lock's
//! per-waiter channel can equal the channel of a plain lock whose name
//! looks like `{y}:<uuid>:<thread>`. They are different locks all the same.
//! So everything that concerns one lock — its parked threads, the wake-ups
//! kept for them, the hand-over run and the courtesy — is kept per lock,
//! keyed by the lock's name (the key its hash lives in), and only the
//! subscription is the channel's.
//!
//! Two kinds that share a name and a channel share a hash too (the plain
//! and the fenced lock; the read and the write lock): they are one lock,
//! and one release may hand it from one kind to the other.
//!
//! A release message names its channel, not its lock: it may be for any
//! lock on the channel, so it wakes one waiter of each.

use std::sync::Arc;

use super::waiters::Waiters;

/// The waiters of a channel, per lock. Usually one lock, at most a few:
/// only names that map to one channel share it.
#[derive(Debug, Default)]
pub(super) struct Locks {
    by_name: Vec<(Arc<str>, Waiters)>,
    /// Counts every event that may have made the lock free for a waiter
    /// that has not joined yet: messages (any lock's), wake-ups of all, a
    /// subscription confirmed (again). Unchanged over a span, with the
    /// channel subscribed at both ends, means nothing was announced on it
    /// in between (see [`Channel::quiet_mark`](super::channel::Channel::quiet_mark)).
    disturbances: u64,
}

impl Locks {
    /// The waiters of `lock`, if any thread waited on it here.
    pub(super) fn of(&mut self, lock: &str) -> Option<&mut Waiters> {
        self.by_name
            .iter_mut()
            .find(|(name, _)| &**name == lock)
            .map(|(_, waiters)| waiters)
    }

    /// The waiters of `lock`, made when it has none yet.
    pub(super) fn entry(&mut self, lock: &str) -> &mut Waiters {
        let pos = match self.by_name.iter().position(|(name, _)| &**name == lock) {
            Some(pos) => pos,
            None => {
                self.by_name.push((Arc::from(lock), Waiters::default()));
                self.by_name.len() - 1
            }
        };
        &mut self.by_name[pos].1
    }

    /// One more thread waits for `lock`.
    pub(super) fn join(&mut self, lock: &str) {
        self.entry(lock).join();
    }

    /// A thread stopped waiting for `lock`. A lock nobody waits for keeps
    /// its entry (its courtesy history) as long as the channel lingers.
    pub(super) fn leave(&mut self, lock: &str) {
        if let Some(waiters) = self.of(lock) {
            waiters.leave();
        }
    }

    /// How many threads wait on the channel, for all its locks.
    pub(super) fn count(&self) -> usize {
        self.by_name
            .iter()
            .map(|(_, waiters)| waiters.count())
            .sum()
    }

    /// A release of one of the channel's locks was announced, and the
    /// message does not say which: one wake-up for each lock.
    pub(super) fn wake_one_each(&mut self) {
        self.disturbed();
        for (_, waiters) in &mut self.by_name {
            waiters.release_heard();
        }
    }

    /// Wakes every waiter of every lock, parked or about to park.
    pub(super) fn wake_all(&mut self) {
        self.disturbed();
        for (_, waiters) in &mut self.by_name {
            waiters.wake_all();
        }
    }

    /// Something may have been announced that a thread not yet joined
    /// did not hear (a subscription made again, say).
    pub(super) fn disturbed(&mut self) {
        self.disturbances = self.disturbances.wrapping_add(1);
    }

    /// The count of disturbances so far.
    pub(super) fn disturbances(&self) -> u64 {
        self.disturbances
    }

    /// Wakes every waiter of every name once (see
    /// [`Waiters::wake_each_once`]).
    pub(super) fn wake_each_once(&mut self) {
        self.disturbed();
        for (_, waiters) in &mut self.by_name {
            waiters.wake_each_once();
        }
    }

    /// How many waiters are parked now, for all locks.
    #[cfg(test)]
    pub(super) fn parked_now(&self) -> usize {
        self.by_name
            .iter()
            .map(|(_, waiters)| waiters.parked_now())
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locks_that_share_a_channel_are_counted_apart() {
        let mut locks = Locks::default();
        locks.join("x");
        locks.join("{x}");
        locks.join("x");
        assert_eq!(locks.count(), 3);
        assert_eq!(locks.of("x").map(|w| w.count()), Some(2));
        assert_eq!(locks.of("{x}").map(|w| w.count()), Some(1));
        locks.leave("x");
        locks.leave("{x}");
        assert_eq!(locks.count(), 1);
        assert_eq!(locks.of("{x}").map(|w| w.count()), Some(0));
        assert!(locks.of("y").is_none());
    }

    #[test]
    fn a_message_keeps_a_wake_up_for_each_lock() {
        let mut locks = Locks::default();
        locks.join("x");
        locks.join("{x}");
        locks.wake_one_each();
        assert!(locks.of("x").is_some_and(|w| w.take_permit()));
        assert!(locks.of("{x}").is_some_and(|w| w.take_permit()));
        assert!(!locks.of("x").is_some_and(|w| w.take_permit()));
    }
}
