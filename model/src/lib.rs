//! An exhaustive model of redhold's protocol (issue 40), built in phases.
//! This crate is not published; the library never depends on it.
//!
//! # Layout
//!
//! - **The Redis side.** [`keyspace`] is an abstract Redis: every key's
//!   type, value and expiry on a clock of its own, and the commands the
//!   scripts call, with Redis's semantics. [`scripts`] has one function per
//!   Lua file in `lua/` (run through [`scripts::run`]): one atomic step that
//!   takes the file's keys and arguments as a typed [`call::Call`] and gives
//!   its reply, the exit it took (a branch id of [`scripts::branches`]) and
//!   what it published. [`names`] are the keys, fields and channels as
//!   small numbers, each rendering to the library's real name; [`wire`]
//!   spells a call as the `KEYS` and `ARGV` the library sends.
//! - **The search.** [`search`] is a small explicit-state breadth-first
//!   checker: fingerprinted states, an optional symmetry reduction, a depth
//!   bound, and a time limit that makes a run fail instead of passing
//!   silently; it prints counterexamples as the actions that lead to them.
//!   A model is a plain `step(&State, &Action) -> State` behind the
//!   [`search::Model`] trait.
//! - **A toy model.** [`toy`] is two (or more) clients taking and releasing
//!   one plain lock through the modelled scripts, with lost replies and
//!   retries: the first real check, and the measure of the search's speed.
//!
//! - **The client side.** [`client`] is the plain lock's client (and the
//!   fenced and spin variations) as explicit state machines: threads and
//!   their calls, each thread's lane with its turn and unconfirmed
//!   entries, the pool's retries, late attempts and the undos written
//!   behind them, the release worker, the renewal map's generations and
//!   the watchdog, waiters, kept wake-ups and direct hand-over; faults as
//!   transitions within a budget and time in ticks; the properties of
//!   issue 40 checked in every state, reachability checks, past defects
//!   as mutations, and the defects it found in the library and not yet
//!   fixed ([`client::Known`]: none at present).
//! - **The semaphore's client.** [`semaphore`] is the `Semaphore`'s
//!   acquire calls (their request latch, attempts, waits and outage
//!   ride-through, the give-back behind late attempts or carried on by the
//!   release worker) and releases, with cuts and held-back replies: the
//!   conservation of permits checked in every state.
//! - **The count-down latch's client.** [`latch`] is `count_down` (one
//!   request latch per call under the pool's retries) and the waits
//!   (looks, the subscription and its look again, parks, the publish at
//!   zero, kept wake-ups, reconnects, the re-check) and `try_set_count`,
//!   with cuts, held-back replies and pub/sub drops, and a failed
//!   `count_down`'s undo (on a connection of its own, behind its late
//!   attempts, carried on by the release worker): no wait opens early
//!   (counted per round when the latch is armed again), no waiter sleeps
//!   on an open latch, checked in every state.
//!
//! # Running
//!
//! ```text
//! cargo test -p redhold-model                      # everything (~30 s)
//! cargo test -p redhold-model --test conformance   # the scripts against redis-server
//! REDHOLD_CONFORMANCE_SEED=123 cargo test -p redhold-model --test conformance
//! cargo test -p redhold-model --test toy           # the toy model, and its mutation
//! cargo test -p redhold-model --test client        # the client model's configurations
//! cargo test -p redhold-model --test client_mutations -- --nocapture  # past defects, traces
//! cargo test -p redhold-model --test latch -- --nocapture   # the count-down latch's client, its mutations, the window left
//! REDHOLD_MODEL_LIMIT_SECS=3600 cargo test -p redhold-model --test client -- --ignored --nocapture deep  # by hand
//! ```
//!
//! The crate is built with `opt-level = 3` even in test builds (the
//! workspace's `Cargo.toml`): the search explores about ten times more
//! states per second optimised.
//!
//! The conformance test (`tests/conformance.rs`) starts its own
//! `redis-server` on a free port, replays seeded random walks of the
//! scripts on both the model and the server, running the files in `lua/`
//! themselves, and compares after every step the reply, every key (type,
//! value, TTL) and what a `PSUBSCRIBE *` listener heard. It fails when a
//! file's SHA-1 differs from the one pinned in [`scripts::Script`], when a
//! `return` of a file is missing from the branch table, or when a branch is
//! never reached.

pub mod call;
pub mod client;
pub mod keyspace;
pub mod latch;
pub mod names;
pub mod reply;
pub mod scripts;
pub mod search;
pub mod semaphore;
pub mod toy;
pub mod wire;
