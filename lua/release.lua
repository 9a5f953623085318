-- Release one hold of a plain reentrant lock, exactly once per request id.
-- KEYS[1] the lock hash, KEYS[2] its wake-up channel,
-- KEYS[3] the latch key that remembers this request's reply
-- ARGV[1] the wake-up message ("0"), ARGV[2] lease in ms for remaining holds,
-- ARGV[3] the holder field, ARGV[4] latch TTL in ms,
-- ARGV[5] the publish command ("publish", or "spublish" on a cluster)
-- Reply: nil when the field does not hold the lock, 0 when holds remain,
-- 1 when the lock was freed and the release announced.
local replayed = redis.call('get', KEYS[3])
if replayed then
    -- A retry of a release that already ran: answer as the first time.
    return tonumber(replayed)
end
if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then
    return nil
end
local reply
if redis.call('hincrby', KEYS[1], ARGV[3], -1) > 0 then
    redis.call('pexpire', KEYS[1], ARGV[2])
    reply = 0
else
    redis.call('del', KEYS[1])
    redis.call(ARGV[5], KEYS[2], ARGV[1])
    reply = 1
end
redis.call('set', KEYS[3], reply, 'px', ARGV[4])
return reply
