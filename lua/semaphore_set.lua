-- Set, take away or drain a semaphore's permits.
-- KEYS[1] the semaphore, KEYS[2] its channel, KEYS[3] this request's latch
-- ARGV[1] the operation:
--   'try_set' n: set n permits only when the semaphore does not exist yet;
--                reply 1 when set, 0 when it existed
--   'set' n:     set n permits whatever the semaphore held; reply n
--   'remove' n:  take n permits away, unless fewer than n are available;
--                reply the permits left, or -1 (nothing changed)
--   'drain':     take every available permit; reply how many were taken
-- ARGV[2] n (ignored by 'drain'), ARGV[3] the publish command,
-- ARGV[4] the latch's TTL in ms
-- A change that leaves permits available announces their number on the
-- channel, as a release does. A retry of the same request replays the
-- latched reply.
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
local available = nil
if kind == 'string' then
    available = redis.call('get', KEYS[1])
    if not string.match(available, '^-?%d+$') then
        return redis.error_reply('WRONGKIND a string that is not a count')
    end
    available = tonumber(available)
end
local op = ARGV[1]
local reply
if op == 'try_set' then
    if available then
        reply = 0
    else
        redis.call('set', KEYS[1], ARGV[2])
        redis.call(ARGV[3], KEYS[2], ARGV[2])
        reply = 1
    end
elseif op == 'set' then
    redis.call('set', KEYS[1], ARGV[2])
    redis.call(ARGV[3], KEYS[2], ARGV[2])
    reply = tonumber(ARGV[2])
elseif op == 'remove' then
    local n = tonumber(ARGV[2])
    if (available or 0) < n then
        reply = -1
    else
        reply = redis.call('decrby', KEYS[1], n)
    end
elseif op == 'drain' then
    if available == nil or available <= 0 then
        reply = 0
    else
        redis.call('set', KEYS[1], 0)
        reply = available
    end
else
    return redis.error_reply('ERR unknown semaphore operation ' .. tostring(op))
end
redis.call('set', KEYS[3], reply, 'px', ARGV[4])
return reply
