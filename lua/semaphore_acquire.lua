-- Take permits from a semaphore (Redisson's RSemaphore layout: a string key
-- holding the number of permits available).
-- KEYS[1] the semaphore, KEYS[2] the request latch of this acquire call
-- ARGV[1] how many permits (> 0), ARGV[2] the request latch's TTL in ms
-- Reply: 1 when the permits were taken, 0 when fewer are available.
-- Error WRONGKIND when the key holds something that is not a count.
--
-- A call's attempts share one request latch: an attempt whose reply was
-- lost took the permits and wrote '1' there, so the next attempt of the
-- same call answers 1 instead of taking them a second time.
if redis.call('get', KEYS[2]) == '1' then
    return 1
end
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
local available = redis.call('get', KEYS[1])
if not string.match(available, '^-?%d+$') then
    return redis.error_reply('WRONGKIND a string that is not a count')
end
if tonumber(available) < tonumber(ARGV[1]) then
    return 0
end
redis.call('decrby', KEYS[1], ARGV[1])
redis.call('set', KEYS[2], '1', 'px', ARGV[2])
return 1
