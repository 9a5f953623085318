-- Take a fair lock in arrival order, or queue for it.
-- KEYS[1] the lock hash, KEYS[2] the queue (list of waiting fields),
-- KEYS[3] the deadlines (sorted set: waiting field -> ms since the epoch)
-- ARGV[1] lease in ms, ARGV[2] the holder field, ARGV[3] the fair wait
-- timeout in ms, ARGV[4] now (client clock, ms since the epoch),
-- ARGV[5] "1" to join the queue when the lock is busy, "0" only to try,
-- ARGV[6] "1" when the caller counts holds of its own (a re-entry only)
-- Reply: {1, holds} when the caller now holds the lock (holds = 1: a new
-- hold, not a re-entry); otherwise {0, how long to wait before trying again
-- in ms}. Error WRONGKIND when the name holds a read-write lock.
-- Reply {2, 0} when ARGV[6] is "1" (the caller counts holds of its own
-- under the field) and Redis has none: those holds were lost (an expiry,
-- a restart, a force-unlock), and a re-entry must not take the lock anew
-- in their name, which Redis would count as if nothing had happened.
-- Nothing is changed, and the caller joins no queue.
if ARGV[6] == '1' and redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
    return {2, 0}
end
local now = tonumber(ARGV[4])
local wait = tonumber(ARGV[3])

-- Waiters whose deadline passed gave up or died: drop them from the head.
while true do
    local head = redis.call('lindex', KEYS[2], 0)
    if not head then break end
    local deadline = tonumber(redis.call('zscore', KEYS[3], head))
    if deadline and deadline > now then break end
    redis.call('lpop', KEYS[2])
    redis.call('zrem', KEYS[3], head)
end

local exists = redis.call('exists', KEYS[1]) == 1
if exists and redis.call('hexists', KEYS[1], 'mode') == 1 then
    return redis.error_reply('WRONGKIND read-write lock')
end

if not exists then
    local head = redis.call('lindex', KEYS[2], 0)
    if not head or head == ARGV[2] then
        if head then
            redis.call('lpop', KEYS[2])
            redis.call('zrem', KEYS[3], ARGV[2])
            -- Everyone behind moved up one place: their turn comes sooner.
            local behind = redis.call('zrange', KEYS[3], 0, -1)
            for _, field in ipairs(behind) do
                redis.call('zincrby', KEYS[3], -wait, field)
            end
        end
        redis.call('hset', KEYS[1], ARGV[2], 1)
        redis.call('pexpire', KEYS[1], ARGV[1])
        return {1, 1}
    end
end

if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    local holds = redis.call('hincrby', KEYS[1], ARGV[2], 1)
    -- A re-entry never shortens the life the holds beneath it need (PTTL
    -- -1, a key without expiry, is longer than any lease).
    local ttl = redis.call('pttl', KEYS[1])
    if ttl ~= -1 and ttl < tonumber(ARGV[1]) then
        redis.call('pexpire', KEYS[1], ARGV[1])
    end
    return {1, holds}
end

local pttl = redis.call('pttl', KEYS[1])
local mine = redis.call('zscore', KEYS[3], ARGV[2])
if mine then
    -- Already queued. Look again when the lock expires or, when another
    -- waiter is ahead, when the head's deadline passes if that comes first:
    -- a release wakes only the head, so a waiter behind a dead head would
    -- otherwise sleep out the whole lock TTL after the head was due to be
    -- dropped. A release or give-up that makes us the head wakes us sooner.
    local head = redis.call('lindex', KEYS[2], 0)
    if not head or head == ARGV[2] then return {0, pttl} end
    local head_deadline = tonumber(redis.call('zscore', KEYS[3], head)) or now
    local until_head = math.max(1, head_deadline - now)
    if pttl > 0 then return {0, math.min(pttl, until_head)} end
    return {0, until_head}
end
if ARGV[5] ~= '1' then
    return {0, math.max(0, pttl)}
end

local last = redis.call('lindex', KEYS[2], -1)
local ttl
if last then
    ttl = (tonumber(redis.call('zscore', KEYS[3], last)) or now) - now
else
    ttl = pttl
end
ttl = math.max(0, ttl)
redis.call('zadd', KEYS[3], ttl + wait + now, ARGV[2])
redis.call('rpush', KEYS[2], ARGV[2])
return {0, ttl}
