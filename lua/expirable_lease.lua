-- Read an expirable semaphore, or change one permit's lease, after giving
-- back the permits whose leases ended.
-- KEYS[1] the semaphore, KEYS[2] its lease set, KEYS[3] its channel
-- ARGV[1] now (ms), ARGV[2] the publish command, ARGV[3] the operation:
--   'available':          reply the permits available
--   'update' ID END:      set permit ID's lease to end at END (ms); reply 1,
--                         or 0 when the permit is not out
-- Error WRONGKIND when the key holds something that is not a count.
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
local ended = redis.call('zrangebyscore', KEYS[2], 0, ARGV[1])
if #ended > 0 then
    redis.call('zrem', KEYS[2], unpack(ended))
    local available = redis.call('incrby', KEYS[1], #ended)
    if available > 0 then
        redis.call(ARGV[2], KEYS[3], available)
    end
end
if ARGV[3] == 'available' then
    return tonumber(redis.call('get', KEYS[1]) or '0')
end
if ARGV[3] == 'update' then
    local was = redis.call('zscore', KEYS[2], ARGV[4])
    if was then
        redis.call('zadd', KEYS[2], ARGV[5], ARGV[4])
        if tonumber(ARGV[5]) < tonumber(was) then
            -- The permit comes back sooner than waiters were told (they
            -- park until the earliest lease end they saw): they look again.
            redis.call(ARGV[2], KEYS[3], tonumber(redis.call('get', KEYS[1]) or '0'))
        end
        return 1
    end
    return 0
end
return redis.error_reply('ERR unknown operation ' .. tostring(ARGV[3]))
