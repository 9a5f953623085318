-- Release one hold of a fair lock, exactly once per request id, and wake
-- the head of the queue when the lock is freed.
-- KEYS[1] the lock hash, KEYS[2] the queue, KEYS[3] the deadlines,
-- KEYS[4] the channel prefix (a waiter's channel is "<prefix>:<field>"),
-- KEYS[5] the unlock latch
-- ARGV[1] the wake-up message ("0"), ARGV[2] the holder field,
-- ARGV[3] now (ms since the epoch), ARGV[4] latch TTL in ms,
-- ARGV[5] the publish command,
-- ARGV[6] "first" on a request's first attempt, "retry" on a later one,
-- "above:N" for an undo of a late acquire
-- Reply: nil when the field does not hold the lock (if the lock is gone the
-- head is woken all the same), 0 when holds remain, 1 when freed, 3 when a
-- retry finds the field gone and no latch (the hold was lost before).
--
-- Every release of a hold is latched, as in release.lua: a retry whose
-- earlier attempt ran replays its reply.
local retry = ARGV[6] == 'retry'
-- Read on a first attempt too: one delayed in the network (a stalled
-- server) may arrive after a retry of the same request ran.
do
    local replayed = redis.call('get', KEYS[5])
    if replayed then
        return tonumber(replayed)
    end
end
-- An undo of a late acquire (ARGV[6] "above:N", see src/engine/attempt.rs):
-- release only while the field counts more than N holds, those the
-- caller's guards stand for; otherwise 4, and nothing latched.
local above = tonumber(string.match(ARGV[6], '^above:(%d+)$'))
if above and (tonumber(redis.call('hget', KEYS[1], ARGV[2])) or 0) <= above then
    return 4
end
local now = tonumber(ARGV[3])
while true do
    local head = redis.call('lindex', KEYS[2], 0)
    if not head then break end
    local deadline = tonumber(redis.call('zscore', KEYS[3], head))
    if deadline and deadline > now then break end
    redis.call('lpop', KEYS[2])
    redis.call('zrem', KEYS[3], head)
end

local function wake_head()
    local head = redis.call('lindex', KEYS[2], 0)
    if head then
        redis.call(ARGV[5], KEYS[4] .. ':' .. head, ARGV[1])
    end
end

-- The field is gone: nil, or 3 on a retry.
local gone = nil
if retry then
    gone = 3
end
-- A retry's "gone" is latched: an earlier attempt still on its way must
-- not release a hold the same field takes afterwards.
local function latch_gone()
    if gone then
        redis.call('set', KEYS[5], gone, 'px', ARGV[4])
    end
    return gone
end
if redis.call('exists', KEYS[1]) == 0 then
    wake_head()
    return latch_gone()
end
if redis.call('hexists', KEYS[1], 'mode') == 1 then
    -- A read-write lock: no fair hold of ours.
    return nil
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
    return latch_gone()
end
if redis.call('hincrby', KEYS[1], ARGV[2], -1) > 0 then
    -- Holds remain: the TTL stays what they need (never cut short).
    redis.call('set', KEYS[5], 0, 'px', ARGV[4])
    return 0
end
redis.call('del', KEYS[1])
redis.call('set', KEYS[5], 1, 'px', ARGV[4])
wake_head()
return 1
