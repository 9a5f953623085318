//! The Lua of the raw ("redis crate alone") measurements: the acquire and
//! release shapes of Redisson's (and redhold's) reentrant lock.
//!
//! Included with `#[path]` by `benches/limits` and `benches/peers`, so both
//! measure the same raw bound.
#![allow(dead_code)]

/// Acquire shape (Redisson `tryLockInnerAsync`): take if free or already ours,
/// else return the PTTL. KEYS[1] = lock, ARGV[1] = lease ms, ARGV[2] = field.
pub(crate) const ACQUIRE_LUA: &str = "\
if (redis.call('exists', KEYS[1]) == 0) or (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then \
  redis.call('hincrby', KEYS[1], ARGV[2], 1); \
  redis.call('pexpire', KEYS[1], ARGV[1]); \
  return nil; \
end; \
return redis.call('pttl', KEYS[1]);";

/// Release shape (Redisson `unlockInnerAsync`): decrement our hold; at zero
/// delete and publish the unlock message. KEYS[1] = lock, KEYS[2] = channel,
/// ARGV[1] = message, ARGV[2] = lease ms, ARGV[3] = field.
pub(crate) const RELEASE_LUA: &str = "\
if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then return nil; end; \
local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); \
if (counter > 0) then redis.call('pexpire', KEYS[1], ARGV[2]); return 0; \
else redis.call('del', KEYS[1]); redis.call('publish', KEYS[2], ARGV[1]); return 1; end; \
return nil;";

/// The lease of a raw hold, in ms (30 s, as Redisson's default watchdog
/// timeout).
pub(crate) const LEASE_MS: u64 = 30_000;

/// The unlock channel of a lock name, as Redisson (and redhold) name it.
pub(crate) fn channel_of(name: &str) -> String {
    if name.contains('{') {
        format!("redisson_lock__channel:{name}")
    } else {
        format!("redisson_lock__channel:{{{name}}}")
    }
}
