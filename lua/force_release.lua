-- Delete a plain lock whoever holds it, and wake its waiters.
-- KEYS[1] the lock hash, KEYS[2] its wake-up channel
-- ARGV[1] the wake-up message ("0"), ARGV[2] the publish command
-- Reply: 1 when a lock was deleted, 0 when there was none.
if redis.call('del', KEYS[1]) == 1 then
    redis.call(ARGV[2], KEYS[2], ARGV[1])
    return 1
end
return 0
