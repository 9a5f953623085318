-- Delete a count-down latch whatever its count, and publish 1 on its
-- channel as Redisson does (its waiters read 1 as "a new count"; ours look
-- at the count again and, finding none, stop waiting).
-- KEYS[1] the latch, KEYS[2] its channel
-- ARGV[1] the publish command
-- Reply: 1 when a latch was deleted, 0 when there was none.
-- Error WRONGKIND when the key holds something that is not a count.
local kind = redis.call('type', KEYS[1]).ok
if kind == 'none' then
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
return 1
