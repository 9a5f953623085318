//! A snapshot of what a client is doing, for dashboards and logs: counted
//! in memory as it happens, read without a round trip to Redis.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// What a [`Client`](crate::Client) is doing now and has done since it was
/// built, from [`Client::stats`](crate::Client::stats).
///
/// Taking a snapshot reads a few counters and takes no lock that a Redis
/// call holds, so it is cheap enough to poll. The figures are read one after
/// another, not all at one instant.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// Locks this client's threads and owners hold now: one per (lock,
    /// holder), however many times the holder re-entered it.
    pub held_locks: usize,
    /// Of [`held_locks`](Self::held_locks), those an [`Owner`](crate::Owner)
    /// holds.
    pub owner_held_locks: usize,
    /// Threads parked now (and async calls parked, each a task), waiting
    /// for a lock to be released (or for a spin lock's next attempt), for
    /// a semaphore's permits or for a count-down latch to open.
    pub parked_waiters: usize,
    /// Wake-up channels the client is subscribed to now.
    pub subscribed_channels: usize,
    /// Releases of dropped guards that Redis has not confirmed yet, carried
    /// on in the background.
    pub pending_releases: usize,
    /// Threads the client runs for async callers now: its I/O threads
    /// ([`ClientBuilder::async_threads`](crate::ClientBuilder::async_threads))
    /// and its timer, started with the first async call; 0 before.
    pub async_threads: usize,
    /// Renewal passes the watchdog has made.
    pub renewal_passes: u64,
    /// Holds found lost (expired or deleted under their holder) by the
    /// watchdog, a release, or a new acquire of the same thread.
    pub locks_lost: u64,
    /// Times a pub/sub connection died and was replaced.
    pub pubsub_reconnects: u64,
    /// Locks handed over to a parked thread of this client: it was woken by
    /// a release's message (from this client or another) and took the lock
    /// at its next attempt.
    pub local_handoffs: u64,
    /// Locks a release of this client handed straight to a parked thread of
    /// this client, in the same script and without announcing them.
    pub direct_handoffs: u64,
    /// Times a thread of this client, woken by a release of this client that
    /// another process's subscriber heard too, stood back a moment before
    /// its attempt, so that the other process's waiter could take the lock
    /// first: clients take turns rather than race.
    pub courtesy_pauses: u64,
    /// Times a waiter parked right after joining, without trying the lock
    /// a second time: it had found the lock busy while already subscribed
    /// to its channel, and nothing was announced on it before it joined
    /// (one round trip saved per contended acquire).
    pub second_tries_skipped: u64,
}

/// The running totals behind [`Stats`], shared by the parts that count.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) parked: AtomicUsize,
    pub(crate) renewal_passes: AtomicU64,
    pub(crate) locks_lost: AtomicU64,
    pub(crate) pubsub_reconnects: AtomicU64,
    pub(crate) local_handoffs: AtomicU64,
    pub(crate) direct_handoffs: AtomicU64,
    pub(crate) courtesy_pauses: AtomicU64,
    pub(crate) second_tries_skipped: AtomicU64,
}

impl Counters {
    /// Adds one to `counter`.
    pub(crate) fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a parked thread until the returned value drops.
    pub(crate) fn parked(&self) -> ParkedThread<'_> {
        self.parked.fetch_add(1, Ordering::Relaxed);
        ParkedThread { counters: self }
    }

    /// The totals, with the gauges the caller measured.
    pub(crate) fn snapshot(
        &self,
        (held_locks, owner_held_locks): (usize, usize),
        subscribed_channels: usize,
        (pending_releases, async_threads): (usize, usize),
    ) -> Stats {
        Stats {
            held_locks,
            owner_held_locks,
            pending_releases,
            async_threads,
            parked_waiters: self.parked.load(Ordering::Relaxed),
            subscribed_channels,
            renewal_passes: self.renewal_passes.load(Ordering::Relaxed),
            locks_lost: self.locks_lost.load(Ordering::Relaxed),
            pubsub_reconnects: self.pubsub_reconnects.load(Ordering::Relaxed),
            local_handoffs: self.local_handoffs.load(Ordering::Relaxed),
            direct_handoffs: self.direct_handoffs.load(Ordering::Relaxed),
            courtesy_pauses: self.courtesy_pauses.load(Ordering::Relaxed),
            second_tries_skipped: self.second_tries_skipped.load(Ordering::Relaxed),
        }
    }
}

/// One thread counted as parked.
#[derive(Debug)]
pub(crate) struct ParkedThread<'a> {
    counters: &'a Counters,
}

impl Drop for ParkedThread<'_> {
    fn drop(&mut self) {
        self.counters.parked.fetch_sub(1, Ordering::Relaxed);
    }
}
