-- Release one write hold of a read-write lock, exactly once per request id.
-- KEYS[1] the lock hash, KEYS[2] the channel, KEYS[3] the latch
-- ARGV[1] the wake-up message ("1": wake every waiter), ARGV[2] the writer
-- field, ARGV[3] latch TTL in ms, ARGV[4] the publish command,
-- ARGV[5] "first" on a request's first attempt, "retry" on a later one,
-- "above:N" for an undo of a late acquire
-- Reply: nil when the field holds no write hold, 0 when write holds remain,
-- 1 when the write lock was released (freed, or downgraded to the writer's
-- read holds), 3 when a retry finds the write hold gone and no latch (the
-- hold was lost before).
--
-- Every release of a hold is latched, as in release.lua.
local retry = ARGV[5] == 'retry'
-- Read on a first attempt too: one delayed in the network (a stalled
-- server) may arrive after a retry of the same request ran.
do
    local replayed = redis.call('get', KEYS[3])
    if replayed then
        return tonumber(replayed)
    end
end
-- An undo of a late acquire (ARGV[5] "above:N", see src/engine/attempt.rs):
-- release only while the field counts more than N holds, those the
-- caller's guards stand for; otherwise 4, and nothing latched.
local above = tonumber(string.match(ARGV[5], '^above:(%d+)$'))
if above and (tonumber(redis.call('hget', KEYS[1], ARGV[2])) or 0) <= above then
    return 4
end
if redis.call('hget', KEYS[1], 'mode') ~= 'write' or redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
    if retry then
        -- Latched: an earlier attempt still on its way must not release a
        -- hold the same field takes afterwards.
        redis.call('set', KEYS[3], 3, 'px', ARGV[3])
        return 3
    end
    return nil
end
if redis.call('hincrby', KEYS[1], ARGV[2], -1) > 0 then
    -- Holds remain: the TTL stays what they need (never cut short).
    redis.call('set', KEYS[3], 0, 'px', ARGV[3])
    return 0
end
redis.call('hdel', KEYS[1], ARGV[2])
if redis.call('hlen', KEYS[1]) == 1 then
    redis.call('del', KEYS[1])
else
    -- The writer still holds read holds: it keeps the lock as a reader.
    redis.call('hset', KEYS[1], 'mode', 'read')
end
redis.call('set', KEYS[3], 1, 'px', ARGV[3])
-- Wake every waiter: readers may all proceed now.
redis.call(ARGV[4], KEYS[2], ARGV[1])
return 1
