//! The proofs of redhold's async face on real executors (issue 42, "How
//! to prove it", the lock parts): the same scenario on four executors, an
//! executor that is never blocked (and never does Redis I/O in `poll`),
//! parked tasks that cost no thread, a cancellation storm that leaves
//! nothing behind, and an exact count under one lock.
//!
//! One test binary, so that tokio and smol are built and linked once.
//! Every proof takes its turn ([`serial`]): several of them measure time,
//! threads or CPU, which a neighbour's load would blur on a small machine.
//! Each starts its own `redis-server` (the library's test support).

#[path = "../../../tests/support/mod.rs"]
mod support;

mod async_redis;
mod executors;
mod no_sockets;
mod process;
mod redis_side;
mod side;
mod watch;

mod any_executor;
mod cancellation;
mod exactness;
mod library_bugs;
mod never_blocked;
mod parked_cost;
mod poll_source;
mod shutdown;

use std::sync::{Mutex, MutexGuard};

/// Lets one proof run at a time. A proof that failed (and so poisoned the
/// lock) does not fail the next one.
pub(crate) fn serial() -> MutexGuard<'static, ()> {
    static TURN: Mutex<()> = Mutex::new(());
    TURN.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}
