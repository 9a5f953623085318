-- Read everything one lock keeps in Redis at one instant; change nothing.
-- KEYS[1] the lock, KEYS[2] the fair queue, KEYS[3] the fair deadlines,
-- KEYS[4] the fencing token counter
-- Reply: {type of KEYS[1], its fields and values when it is a hash (else
-- {}), its PTTL, the queue (oldest first), the deadlines as field, score
-- pairs, the token counter (false when there is none)}. A helper key of an
-- unexpected type reads as absent.
local function type_of(key)
    return redis.call('type', key)['ok']
end
local kind = type_of(KEYS[1])
local fields = {}
if kind == 'hash' then
    fields = redis.call('hgetall', KEYS[1])
end
local queue = {}
if type_of(KEYS[2]) == 'list' then
    queue = redis.call('lrange', KEYS[2], 0, -1)
end
local deadlines = {}
if type_of(KEYS[3]) == 'zset' then
    deadlines = redis.call('zrange', KEYS[3], 0, -1, 'withscores')
end
local token = false
if type_of(KEYS[4]) == 'string' then
    token = redis.call('get', KEYS[4])
end
return {kind, fields, redis.call('pttl', KEYS[1]), queue, deadlines, token}
