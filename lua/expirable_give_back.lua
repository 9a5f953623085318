-- End an expirable-semaphore acquire call that returns without permits
-- although one of its attempts may have taken them (see
-- semaphore_give_back.lua): take its permit ids out of the lease set and
-- give back those still there, and close the call.
-- KEYS[1] the semaphore, KEYS[2] its lease set, KEYS[3] its channel,
-- KEYS[4] the call's request latch
-- ARGV[1] the publish command, ARGV[2] the latch's TTL in ms,
-- ARGV[3]... the call's permit ids
-- Reply: how many permits were given back.
local taken = redis.call('get', KEYS[4]) == 'taken'
redis.call('set', KEYS[4], 'closed', 'px', ARGV[2])
if not taken then
    return 0
end
local ids = {}
for i = 3, #ARGV do
    ids[#ids + 1] = ARGV[i]
end
local removed = redis.call('zrem', KEYS[2], unpack(ids))
if removed > 0 then
    local available = redis.call('incrby', KEYS[1], removed)
    redis.call(ARGV[1], KEYS[3], available)
end
return removed
