-- A waiter leaves a fair lock's queue without the lock.
-- KEYS[1] the lock hash, KEYS[2] the queue, KEYS[3] the deadlines,
-- KEYS[4] the channel prefix
-- ARGV[1] the holder field, ARGV[2] the fair wait timeout in ms,
-- ARGV[3] the wake-up message ("0"), ARGV[4] the publish command
-- Reply: 1 when the field was queued, 0 when it was not.
if not redis.call('zscore', KEYS[3], ARGV[1]) then
    return 0
end
local wait = tonumber(ARGV[2])
local queue = redis.call('lrange', KEYS[2], 0, -1)
local behind = false
for _, field in ipairs(queue) do
    if behind then
        redis.call('zincrby', KEYS[3], -wait, field)
    elseif field == ARGV[1] then
        behind = true
    end
end
redis.call('lrem', KEYS[2], 0, ARGV[1])
redis.call('zrem', KEYS[3], ARGV[1])
-- If the lock is free, the new head may take it now.
if redis.call('exists', KEYS[1]) == 0 then
    local head = redis.call('lindex', KEYS[2], 0)
    if head then
        redis.call(ARGV[4], KEYS[4] .. ':' .. head, ARGV[3])
    end
end
return 1
