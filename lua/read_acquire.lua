-- Take a read hold of a read-write lock.
-- KEYS[1] the lock hash, KEYS[2] this holder's read-hold key prefix
-- ("<base>:<field>:rwlock_timeout"; hold k lives at "<prefix>:<k>")
-- ARGV[1] lease in ms, ARGV[2] the holder field, ARGV[3] the same holder's
-- writer field ("<field>:write"), ARGV[4] "1" when the caller counts read
-- holds of its own (a re-entry only)
-- Reply: {1, holds} when the read hold was taken (holds = 1: this holder's
-- first read hold), else {0, PTTL}. Error WRONGKIND when the name holds a
-- lock of another kind (a hash without a mode).
-- Reply {2, 0} when ARGV[4] is "1" (the caller counts holds of its own
-- under the field) and Redis has none: those holds were lost (an expiry,
-- a restart, a force-unlock), and a re-entry must not take the lock anew
-- in their name, which Redis would count as if nothing had happened.
-- Nothing is changed.
--
-- This holder's field with none of its read holds' keys left (they
-- expired while another hold kept the hash alive, or were deleted) counts
-- holds that are over: it goes first, so that its count is never taken
-- for live holds. A re-entry of such holds is then refused as lost (as
-- the renewal reports them lost), and an undo's "above:N" never counts
-- them. A hash left with its mode only (it had no expiry) goes too. A
-- field with some key left keeps its count, as Redisson's: the holder's
-- client counts those holds until their guards release them.
local dropped = false
if redis.call('hexists', KEYS[1], 'mode') == 1 then
    local count = tonumber(redis.call('hget', KEYS[1], ARGV[2]))
    if count and count > 0 then
        local live = false
        for k = 1, count do
            local ttl = redis.call('pttl', KEYS[2] .. ':' .. k)
            if ttl == -1 or ttl > 0 then
                live = true
                break
            end
        end
        if not live then
            dropped = true
            redis.call('hdel', KEYS[1], ARGV[2])
            if redis.call('hlen', KEYS[1]) == 1 then
                redis.call('del', KEYS[1])
            end
        end
    end
end
if ARGV[4] == '1' and redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
    return {2, 0}
end
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false then
    if redis.call('exists', KEYS[1]) == 1 then
        return redis.error_reply('WRONGKIND plain or fair lock')
    end
    redis.call('hset', KEYS[1], 'mode', 'read')
    redis.call('hset', KEYS[1], ARGV[2], 1)
    redis.call('set', KEYS[2] .. ':1', 1, 'px', ARGV[1])
    redis.call('pexpire', KEYS[1], ARGV[1])
    return {1, 1}
end
-- Readers share; the writer may also read (and keeps those holds after it
-- releases the write: a downgrade).
if mode == 'read' or (mode == 'write' and redis.call('hexists', KEYS[1], ARGV[3]) == 1) then
    local count = redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('set', KEYS[2] .. ':' .. count, 1, 'px', ARGV[1])
    -- The hash lives as long as its longest hold; PTTL -1 (a key without
    -- expiry, which another client may have made) is longer than any lease.
    local ttl = redis.call('pttl', KEYS[1])
    if ttl ~= -1 then
        redis.call('pexpire', KEYS[1], math.max(ttl, tonumber(ARGV[1])))
    end
    return {1, count}
end
return {0, redis.call('pttl', KEYS[1])}
