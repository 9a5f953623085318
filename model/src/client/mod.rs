//! The client side of the protocol as explicit state machines (issue 40,
//! phase 2): threads with their acquire calls and releases, each thread's
//! lane (`src/engine/lane/`), the pool's retries and late attempts kept
//! for their undos, the release worker, the renewal map's generations and
//! the watchdog, waiters and direct hand-over; the server runs the
//! modelled scripts ([`crate::scripts`]); faults are transitions within a
//! budget, and time passes in ticks.
//!
//! | file | mirrors |
//! |---|---|
//! | [`acquire`] | `engine/attempt.rs` (`try_acquire`, `send_acquire`), `engine/give_back.rs` |
//! | [`wait`], [`pubsub`] | `engine/wait.rs`, `engine/first_busy.rs`, `pubsub/waiters.rs`, `pubsub/reserved.rs` |
//! | [`finish`] | `engine/finish.rs`, `attempt.rs` (`settle_unsure`, `undo_late`, `undo_behind`) |
//! | [`release`] | `engine/release.rs`, `engine/unguarded.rs` |
//! | [`settle`] | `lane/one.rs` (`settle`), `lane/entry.rs`, `lane/pending.rs` |
//! | [`undo`] | `attempt.rs` (`undo_behind`), `lane/entry.rs` (`settle_undo`, `resend`), `server/late.rs` (`Trailing`: `follow`, `unwritten`, `confirm`) |
//! | [`worker`] | `lane/worker.rs` |
//! | [`retry`] | `server/pool.rs` (retries), `kind/target.rs` (`ReleaseAttempts`), `Lane::push` |
//! | [`holds`] | `renewals.rs` (`add`, `counted`, `release_one`, `mark_lost`) |
//! | [`time`] | the response timeout, leases, latches, `watchdog.rs` |
//! | [`faults`] | the fault proxy's cuts and hold-backs, partitions, restarts, crashes |
//! | [`replica`] | a lagging replica, `WAIT` (`Pool::run_write`), a Sentinel failover (`Pool::master_switched`) |
//! | [`requests`], [`config`] (`Kind`) | `kind/hash.rs`, `kind/fenced.rs`, `kind/fair.rs`, `kind/read_write.rs` (`try_acquire`, `release`) |
//! | [`config`] (`owners`, `holder`) | `Owner`: its threads share one field, lane and renewal record |
//!
//! **Abstractions** (each a choice the properties do not depend on, or
//! a documented limit): a tick is about one response timeout, and every
//! deadline falls on one; local work between two waits is atomic and
//! shorter than a tick; a request not held back runs, and its reply is
//! read, within its tick; one held back runs within the next tick (a
//! longer stall outlives the latch: a documented limit); the watchdog
//! renews at every tick; the worker's pauses and the hand-over's run
//! bounds and courtesies (performance only) are left out; the oldest
//! waiter is the lowest-numbered thread.

pub mod acquire;
pub mod config;
pub mod configs;
pub mod events;
pub mod faults;
pub mod fencing;
pub mod finish;
pub mod holds;
pub mod job;
pub mod known;
pub mod model;
pub mod mutation;
pub mod normalize;
pub mod properties;
pub mod pubsub;
pub mod release;
pub mod render;
pub mod replica;
pub mod requests;
pub mod retry;
pub mod server;
pub mod settle;
pub mod state;
pub mod time;
pub mod undo;
pub mod unreplicated;
pub mod wait;
pub mod worker;

pub use config::{Config, Fault, Kind, Lease, ReleaseMode};
pub use known::Known;
pub use model::{Action, Begin, ClientModel};
pub use mutation::ClientMutation;
pub use state::State;
