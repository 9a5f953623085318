-- Take the write hold of a read-write lock.
-- KEYS[1] the lock hash
-- ARGV[1] lease in ms, ARGV[2] the writer field ("<field>:write"),
-- ARGV[3] the same holder's reader field, ARGV[4] "1" when the caller counts
-- write holds of its own (a re-entry only)
-- Reply: {1, holds} when the write hold was taken (holds = 1: a new hold,
-- not a re-entry); {0, -3} when the caller holds only read holds (an
-- upgrade, which could never be granted); else {0, PTTL}. Error WRONGKIND
-- when the name holds a lock of another kind (a hash without a mode).
-- Reply {2, 0} when ARGV[4] is "1" (the caller counts holds of its own
-- under the field) and Redis has none: those holds were lost (an expiry,
-- a restart, a force-unlock), and a re-entry must not take the lock anew
-- in their name, which Redis would count as if nothing had happened.
-- Nothing is changed.
if ARGV[4] == '1' and redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
    return {2, 0}
end
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false then
    if redis.call('exists', KEYS[1]) == 1 then
        return redis.error_reply('WRONGKIND plain or fair lock')
    end
    redis.call('hset', KEYS[1], 'mode', 'write')
    redis.call('hset', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return {1, 1}
end
if mode == 'write' and redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    local holds = redis.call('hincrby', KEYS[1], ARGV[2], 1)
    -- A re-entry never shortens the life the holds beneath it need (PTTL
    -- -1, a key without expiry, is longer than any lease).
    local ttl = redis.call('pttl', KEYS[1])
    if ttl ~= -1 and ttl < tonumber(ARGV[1]) then
        redis.call('pexpire', KEYS[1], ARGV[1])
    end
    return {1, holds}
end
if mode == 'read' and redis.call('hexists', KEYS[1], ARGV[3]) == 1 then
    return {0, -3}
end
return {0, redis.call('pttl', KEYS[1])}
