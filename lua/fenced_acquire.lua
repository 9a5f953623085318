-- Take or re-enter a fenced lock and hand out a fencing token.
-- KEYS[1] the lock hash (shared with the plain lock), KEYS[2] the token counter
-- ARGV[1] lease in ms, ARGV[2] the holder field
-- Reply: {1, token} when the caller now holds the lock (every acquire,
-- reentries included, gets a larger token), else {0, PTTL}.
if redis.call('exists', KEYS[1]) == 0 or redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return {1, redis.call('incr', KEYS[2])}
end
return {0, redis.call('pttl', KEYS[1])}
