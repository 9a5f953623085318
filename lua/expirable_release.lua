-- Give back one permit of an expirable semaphore by its id.
-- KEYS[1] the semaphore, KEYS[2] its lease set, KEYS[3] its channel,
-- KEYS[4] this request's latch
-- ARGV[1] the permit's id, ARGV[2] now (ms), ARGV[3] the publish command,
-- ARGV[4] the latch's TTL in ms
-- Reply: 1 when the permit was out and its lease had not ended; 0 when it
-- was not out (released before, or its ended lease already given back),
-- or its lease had ended (it goes back all the same, as in Redisson).
-- A retry of the same request replays the first reply.
local done = redis.call('get', KEYS[4])
if done then
    return tonumber(done)
end
local ends = redis.call('zscore', KEYS[2], ARGV[1])
local reply = 0
if ends then
    redis.call('zrem', KEYS[2], ARGV[1])
    local available = redis.call('incrby', KEYS[1], 1)
    redis.call(ARGV[3], KEYS[3], available)
    if tonumber(ends) > tonumber(ARGV[2]) then
        reply = 1
    end
end
redis.call('set', KEYS[4], reply, 'px', ARGV[4])
return reply
