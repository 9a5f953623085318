-- Read a semaphore's or a count-down latch's keys at one instant; change
-- nothing.
-- KEYS[1] the name (a string holding a number), KEYS[2] the permit-expirable
-- semaphore's sorted set of permits out ({name}:timeout)
-- Reply: {type of KEYS[1], its value when it is a string (else false), the
-- permits out as id, score pairs (empty when there is no such set)}.
local kind = redis.call('type', KEYS[1])['ok']
local value = false
if kind == 'string' then
    value = redis.call('get', KEYS[1])
end
local permits = {}
if redis.call('type', KEYS[2])['ok'] == 'zset' then
    permits = redis.call('zrange', KEYS[2], 0, -1, 'WITHSCORES')
end
return {kind, value, permits}
