-- Arm a count-down latch (Redisson's RCountDownLatch layout: a string key
-- holding the count) unless it is armed already.
-- KEYS[1] the latch, KEYS[2] its channel, KEYS[3] this request's latch key
-- ARGV[1] the count (> 0), ARGV[2] the publish command, ARGV[3] the
-- request latch's TTL in ms
-- Reply: 1 when set, 0 when the latch existed. Publishes 1 ("a new count")
-- on the channel when set, as Redisson does.
-- Error WRONGKIND when the key holds something that is not a count.
local done = redis.call('get', KEYS[3])
if done then
    return tonumber(done)
end
local kind = redis.call('type', KEYS[1]).ok
if kind == 'hash' then
    return redis.error_reply('WRONGKIND a lock (a hash)')
end
if kind ~= 'none' and kind ~= 'string' then
    return redis.error_reply('WRONGKIND a Redis ' .. kind)
end
local reply = 0
if kind == 'none' then
    redis.call('set', KEYS[1], ARGV[1])
    redis.call(ARGV[2], KEYS[2], 1)
    reply = 1
end
redis.call('set', KEYS[3], reply, 'px', ARGV[3])
return reply
