//! What async callers run on: the client's own threads, never an
//! executor's. The I/O pool ([`pool`]) runs every Redis call of an async
//! call; the timer ([`timers`]) ends parks, backoffs and waits; a
//! [`completion::Completion`] carries the outcome to the future, which
//! only polls it. So no executor thread waits on Redis, any executor (or a
//! plain `block_on`) drives the futures, and a task waiting for a lock is
//! an entry in the waiter registry and one in the timer, not a thread.

pub(crate) mod completion;
pub(crate) mod offloaded;
pub(crate) mod pool;
pub(crate) mod sleep;
pub(crate) mod timers;

use pool::{IoPool, Job};
use timers::Timers;

use crate::error::Result;

/// The client's I/O pool and timer, started with the first async call.
#[derive(Debug)]
pub(crate) struct Tasks {
    pool: IoPool,
    timers: Timers,
}

impl Tasks {
    /// A pool of `threads` threads and a timer, none started yet.
    pub(crate) fn new(threads: usize) -> Tasks {
        Tasks {
            pool: IoPool::new(threads),
            timers: Timers::new(),
        }
    }

    /// Runs `job` on the I/O pool.
    pub(crate) fn spawn(&self, job: Job) -> Result<()> {
        self.pool.spawn(job)
    }

    /// The timer.
    pub(crate) fn timers(&self) -> &Timers {
        &self.timers
    }

    /// How many threads the async machinery runs now (I/O pool and timer).
    pub(crate) fn threads(&self) -> usize {
        self.pool.threads() + usize::from(self.timers.is_started())
    }

    /// Ends the timer and the pool (after the jobs queued already).
    pub(crate) fn shutdown(&self) {
        self.timers.shutdown();
        self.pool.shutdown();
    }
}
