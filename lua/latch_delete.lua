-- Delete a count-down latch whatever its count, and publish 1 on its
-- channel as Redisson does (its waiters read 1 as "a new count"; ours look
-- at the count again and, finding none, stop waiting).
-- KEYS[1] the latch, KEYS[2] its channel, KEYS[3] this request's latch key
-- ARGV[1] the publish command, ARGV[2] the request latch's TTL in ms
-- Reply: 1 when a latch was deleted, 0 when there was none.
-- Error WRONGKIND when the key holds something that is not a count.
--
-- A retry of the same request (its first reply was lost) replays the
-- latched reply: a delete that ran says so, not "there was none".
local done = redis.call('get', KEYS[3])
if done then
    return tonumber(done)
end
local kind = redis.call('type', KEYS[1]).ok
if kind == 'none' then
    redis.call('set', KEYS[3], 0, 'px', ARGV[2])
    return 0
end
if kind == 'hash' then
    return redis.error_reply('WRONGKIND a lock (a hash)')
end
if kind ~= 'string' then
    return redis.error_reply('WRONGKIND a Redis ' .. kind)
end
if not string.match(redis.call('get', KEYS[1]), '^-?%d+$') then
    return redis.error_reply('WRONGKIND a string that is not a count')
end
redis.call('del', KEYS[1])
redis.call(ARGV[1], KEYS[2], 1)
redis.call('set', KEYS[3], 1, 'px', ARGV[2])
return 1
