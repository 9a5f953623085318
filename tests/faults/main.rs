//! Fault tests on real `redis-server` processes: what redhold promises when a
//! holder dies, connections are killed, the server stops, stalls or talks
//! garbage. One fault per file; `docs/reliability.md` says which promise each
//! test proves. Every wait is bounded, so a broken promise fails the test
//! instead of hanging it.

#[path = "../bounded/mod.rs"]
mod bounded;
#[path = "../support/child.rs"]
mod child;
mod common;
#[allow(dead_code)]
#[path = "../support/fault_proxy.rs"]
mod fault_proxy;
#[path = "../support/mod.rs"]
mod support;

mod acquire_reply;
mod channel_garbage;
mod connect_errors;
mod deadline_stalled;
mod drop_stalled;
mod holder_killed;
mod hostile_replies;
mod lane;
mod lost_release;
mod model_found;
mod outage;
mod pubsub_killed;
mod reentry_after_wipe;
mod renewal_reply;
mod server_restart;
mod server_stall;
mod synchronizer_replies;
mod watchdog_cut_off;
