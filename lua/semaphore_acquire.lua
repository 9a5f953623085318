-- Take permits from a semaphore (Redisson's RSemaphore layout: a string key
-- holding the number of permits available).
-- KEYS[1] the semaphore, KEYS[2] the request latch of this acquire call
-- ARGV[1] how many permits (> 0), ARGV[2] the request latch's TTL in ms,
-- ARGV[3] this attempt's number within the call (1, 2, ...: the client
-- numbers every request it sends, retries included)
-- Reply: 1 when the permits were taken (by this attempt or an earlier one
-- of the same call), 0 when fewer are available, or when this attempt
-- comes late: a later attempt of the call ran already, or the call ended.
-- Error WRONGKIND when the key holds something that is not a count.
--
-- The call's request latch says where the call stands: 'taken', 'closed'
-- (the call ended without permits: see semaphore_give_back.lua), or the
-- number of the last attempt that found too few permits. So an attempt
-- whose reply was lost is never counted twice, and one that reaches Redis
-- late (a stalled server), after the client gave up on it, takes nothing.
local state = redis.call('get', KEYS[2])
if state == 'taken' then
    return 1
end
if state == 'closed' or (state and tonumber(state) >= tonumber(ARGV[3])) then
    -- Every answer keeps the latch alive a TTL from now: the client counts
    -- on that to know how long it may still send (src/server/request.rs).
    redis.call('pexpire', KEYS[2], ARGV[2])
    return 0
end
local kind = redis.call('type', KEYS[1]).ok
if kind == 'hash' then
    return redis.error_reply('WRONGKIND a lock (a hash)')
end
if kind ~= 'none' and kind ~= 'string' then
    return redis.error_reply('WRONGKIND a Redis ' .. kind)
end
local available = 0
if kind == 'string' then
    available = redis.call('get', KEYS[1])
    if not string.match(available, '^-?%d+$') then
        return redis.error_reply('WRONGKIND a string that is not a count')
    end
    available = tonumber(available)
end
if available < tonumber(ARGV[1]) then
    redis.call('set', KEYS[2], ARGV[3], 'px', ARGV[2])
    return 0
end
redis.call('decrby', KEYS[1], ARGV[1])
redis.call('set', KEYS[2], 'taken', 'px', ARGV[2])
return 1
