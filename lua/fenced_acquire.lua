-- Take or re-enter a fenced lock and hand out a fencing token.
-- KEYS[1] the lock hash (shared with the plain lock), KEYS[2] the token counter
-- ARGV[1] lease in ms, ARGV[2] the holder field
-- Reply: {1, holds, token} when the caller now holds the lock (every
-- acquire, re-entries included, gets a larger token; holds = 1: a new hold),
-- else {0, PTTL}. Error WRONGKIND when the name holds a read-write lock.
if redis.call('exists', KEYS[1]) == 0 then
    redis.call('hset', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return {1, 1, redis.call('incr', KEYS[2])}
end
if redis.call('hexists', KEYS[1], 'mode') == 1 then
    return redis.error_reply('WRONGKIND read-write lock')
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    local holds = redis.call('hincrby', KEYS[1], ARGV[2], 1)
    -- A re-entry never shortens the life the holds beneath it need.
    if redis.call('pttl', KEYS[1]) < tonumber(ARGV[1]) then
        redis.call('pexpire', KEYS[1], ARGV[1])
    end
    return {1, holds, redis.call('incr', KEYS[2])}
end
return {0, redis.call('pttl', KEYS[1])}
