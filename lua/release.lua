-- Release one hold of a plain reentrant lock, exactly once per request id.
-- KEYS[1] the lock hash, KEYS[2] its wake-up channel,
-- KEYS[3] the latch key that remembers this request's reply
-- ARGV[1] the wake-up message ("0"), ARGV[2] the holder field,
-- ARGV[3] latch TTL in ms,
-- ARGV[4] the publish command ("publish", or "spublish" on a cluster)
-- Reply: nil when the field does not hold the lock, 0 when holds remain,
-- 1 when the lock was freed and the release announced.
local replayed = redis.call('get', KEYS[3])
if replayed then
    -- A retry of a release that already ran: answer as the first time.
    return tonumber(replayed)
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 0 or redis.call('hexists', KEYS[1], 'mode') == 1 then
    return nil
end
local reply
if redis.call('hincrby', KEYS[1], ARGV[2], -1) > 0 then
    -- Holds remain: the TTL stays what they were taken (or renewed) with.
    -- Setting it to this hold's lease could cut another hold short.
    reply = 0
else
    redis.call('del', KEYS[1])
    redis.call(ARGV[4], KEYS[2], ARGV[1])
    reply = 1
end
redis.call('set', KEYS[3], reply, 'px', ARGV[3])
return reply
