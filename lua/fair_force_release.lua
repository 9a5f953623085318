-- Delete a fair lock whoever holds it and wake the head of its queue.
-- KEYS[1] the lock hash, KEYS[2] the queue, KEYS[3] the deadlines,
-- KEYS[4] the channel prefix
-- ARGV[1] the wake-up message ("0"), ARGV[2] now (ms since the epoch),
-- ARGV[3] the publish command
-- Reply: 1 when a lock was deleted, 0 when there was none.
local now = tonumber(ARGV[2])
while true do
    local head = redis.call('lindex', KEYS[2], 0)
    if not head then break end
    local deadline = tonumber(redis.call('zscore', KEYS[3], head))
    if deadline and deadline > now then break end
    redis.call('lpop', KEYS[2])
    redis.call('zrem', KEYS[3], head)
end
local deleted = redis.call('del', KEYS[1])
local head = redis.call('lindex', KEYS[2], 0)
if head then
    redis.call(ARGV[3], KEYS[4] .. ':' .. head, ARGV[1])
end
return deleted
