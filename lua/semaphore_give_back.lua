-- End an acquire call that returns without permits although one of its
-- attempts may have taken them, or may still reach Redis (its reply was
-- lost, or it was retried): give back what it took, and close the call so
-- that a late attempt takes nothing.
-- KEYS[1] the semaphore, KEYS[2] its channel, KEYS[3] the call's request latch
-- ARGV[1] how many permits, ARGV[2] the publish command, ARGV[3] the
-- latch's TTL in ms
-- Reply: 1 when permits were given back, 0 when none had been taken.
local taken = redis.call('get', KEYS[3]) == 'taken'
redis.call('set', KEYS[3], 'closed', 'px', ARGV[3])
if not taken then
    return 0
end
local available = redis.call('incrby', KEYS[1], ARGV[1])
redis.call(ARGV[2], KEYS[2], available)
return 1
