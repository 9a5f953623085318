-- Give permits to a semaphore, creating it when absent, and announce the
-- new number available on its channel (Redisson's waiters read it as how
-- many of them may try). Also `add_permits` with a positive number.
-- KEYS[1] the semaphore, KEYS[2] its channel, KEYS[3] this request's latch
-- ARGV[1] how many permits (> 0), ARGV[2] the publish command ('publish',
-- or 'spublish' or 'publish+spublish' on a cluster with sharded pub/sub:
-- see src/scripts.rs), ARGV[3] the latch's TTL in ms
-- Reply: the number of permits available after the release.
-- Error WRONGKIND when the key holds something that is not a count.
--
-- A retry of the same request (its first reply was lost) replays the
-- latched reply: permits are never given twice.
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
if kind == 'string' and not string.match(redis.call('get', KEYS[1]), '^-?%d+$') then
    return redis.error_reply('WRONGKIND a string that is not a count')
end
local available = redis.call('incrby', KEYS[1], ARGV[1])
redis.call('set', KEYS[3], available, 'px', ARGV[3])
redis.call(ARGV[2], KEYS[2], available)
return available
