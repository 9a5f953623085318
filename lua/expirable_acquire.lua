-- Take permits of an expirable semaphore (Redisson's
-- RPermitExpirableSemaphore layout: a string key holding the permits
-- available, and a sorted set of the permits out, each a random id scored
-- by the time its lease ends, in ms since the epoch).
-- KEYS[1] the semaphore, KEYS[2] its lease set ("{name}:timeout"),
-- KEYS[3] its channel, KEYS[4] the request latch of this acquire call
-- ARGV[1] how many permits (> 0), ARGV[2] when their leases end (ms),
-- ARGV[3] now (ms, the caller's clock, as Redisson's), ARGV[4] the publish
-- command, ARGV[5] the request latch's TTL in ms, ARGV[6] this attempt's
-- number within the call, ARGV[7]... the permits' ids (one per permit)
-- Reply: {1} when taken (by this attempt or an earlier one of the call);
-- {0, end} when too few are available, `end` the earliest lease end in the
-- set (-1 when none), so the caller knows when one comes back unannounced;
-- {0, -1} as well when this attempt comes late (see semaphore_acquire.lua).
-- Error WRONGKIND when the key holds something that is not a count.
local state = redis.call('get', KEYS[4])
if state == 'taken' then
    return {1}
end
if state == 'closed' or (state and tonumber(state) >= tonumber(ARGV[6])) then
    -- Every answer keeps the latch alive a TTL from now: the client counts
    -- on that to know how long it may still send (src/server/request.rs).
    redis.call('pexpire', KEYS[4], ARGV[5])
    return {0, -1}
end
local kind = redis.call('type', KEYS[1]).ok
if kind == 'hash' then
    return redis.error_reply('WRONGKIND a lock (a hash)')
end
if kind ~= 'none' and kind ~= 'string' then
    return redis.error_reply('WRONGKIND a Redis ' .. kind)
end
-- Leases that ended give their permits back first.
local ended = redis.call('zrangebyscore', KEYS[2], 0, ARGV[3])
local available = 0
if kind == 'string' then
    available = redis.call('get', KEYS[1])
    if not string.match(available, '^-?%d+$') then
        return redis.error_reply('WRONGKIND a string that is not a count')
    end
    available = tonumber(available)
end
if #ended > 0 then
    redis.call('zrem', KEYS[2], unpack(ended))
    available = redis.call('incrby', KEYS[1], #ended)
    if available > 0 then
        redis.call(ARGV[4], KEYS[3], available)
    end
end
if available < tonumber(ARGV[1]) then
    redis.call('set', KEYS[4], ARGV[6], 'px', ARGV[5])
    local first = redis.call('zrange', KEYS[2], 0, 0, 'WITHSCORES')
    if first[2] then
        return {0, tonumber(first[2])}
    end
    return {0, -1}
end
redis.call('decrby', KEYS[1], ARGV[1])
for i = 7, #ARGV do
    redis.call('zadd', KEYS[2], ARGV[2], ARGV[i])
end
-- The lease set lives as long as the semaphore, if that has a TTL.
local ttl = redis.call('pttl', KEYS[1])
if ttl > 0 then
    redis.call('pexpire', KEYS[2], ttl)
end
redis.call('set', KEYS[4], 'taken', 'px', ARGV[5])
return {1}
