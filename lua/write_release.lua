-- Release one write hold of a read-write lock, exactly once per request id.
-- KEYS[1] the lock hash, KEYS[2] the channel, KEYS[3] the latch
-- ARGV[1] the wake-up message ("1": wake every waiter), ARGV[2] the writer
-- field, ARGV[3] latch TTL in ms, ARGV[4] the publish command
-- Reply: nil when the field holds no write hold, 0 when write holds remain,
-- 1 when the write lock was released (freed, or downgraded to the writer's
-- read holds).
local replayed = redis.call('get', KEYS[3])
if replayed then
    return tonumber(replayed)
end
if redis.call('hget', KEYS[1], 'mode') ~= 'write' or redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
    return nil
end
local reply
if redis.call('hincrby', KEYS[1], ARGV[2], -1) > 0 then
    -- Holds remain: the TTL stays what they need (never cut short).
    reply = 0
else
    redis.call('hdel', KEYS[1], ARGV[2])
    if redis.call('hlen', KEYS[1]) == 1 then
        redis.call('del', KEYS[1])
    else
        -- The writer still holds read holds: it keeps the lock as a reader.
        redis.call('hset', KEYS[1], 'mode', 'read')
    end
    -- Wake every waiter: readers may all proceed now.
    redis.call(ARGV[4], KEYS[2], ARGV[1])
    reply = 1
end
redis.call('set', KEYS[3], reply, 'px', ARGV[3])
return reply
