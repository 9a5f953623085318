//! The Lua scripts under `lua/`, compiled in and run with EVALSHA (the redis
//! crate loads a script again when the server answers NOSCRIPT).

use once_cell::sync::Lazy;
use redis::Script;

/// Takes or re-enters a plain lock: `lua/acquire.lua`.
pub(crate) static ACQUIRE: Lazy<Script> =
    Lazy::new(|| Script::new(include_str!("../lua/acquire.lua")));

/// Releases one hold of a plain lock, once per request id: `lua/release.lua`.
pub(crate) static RELEASE: Lazy<Script> =
    Lazy::new(|| Script::new(include_str!("../lua/release.lua")));

/// Deletes a plain lock whoever holds it: `lua/force_release.lua`.
pub(crate) static FORCE_RELEASE: Lazy<Script> =
    Lazy::new(|| Script::new(include_str!("../lua/force_release.lua")));

/// Renews a batch of held locks: `lua/renew.lua`.
pub(crate) static RENEW: Lazy<Script> = Lazy::new(|| Script::new(include_str!("../lua/renew.lua")));

/// The wake-up message that frees one local waiter.
pub(crate) const WAKE_ONE: &str = "0";
