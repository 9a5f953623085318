-- Give back the permits of an acquire call that ended without them (an
-- error, an interrupt, shutdown) although one of its attempts may have
-- taken them: its reply was lost.
-- KEYS[1] the semaphore, KEYS[2] its channel, KEYS[3] the call's request latch
-- ARGV[1] how many permits, ARGV[2] the publish command, ARGV[3] the
-- latch's TTL in ms
-- Reply: 1 when permits were given back, 0 when none had been taken.
if redis.call('get', KEYS[3]) ~= '1' then
    return 0
end
local available = redis.call('incrby', KEYS[1], ARGV[1])
-- Marked, so that a late attempt of the same call neither replays '1' nor
-- takes permits again, and this give-back runs once.
redis.call('set', KEYS[3], 'given back', 'px', ARGV[3])
redis.call(ARGV[2], KEYS[2], available)
return 1
