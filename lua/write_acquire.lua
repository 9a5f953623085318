-- Take the write hold of a read-write lock.
-- KEYS[1] the lock hash
-- ARGV[1] lease in ms, ARGV[2] the writer field ("<field>:write"),
-- ARGV[3] the same holder's reader field
-- Reply: nil when the write hold was taken; -3 when the caller holds only
-- read holds (an upgrade, which could never be granted); else the PTTL.
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false then
    redis.call('hset', KEYS[1], 'mode', 'write')
    redis.call('hset', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return nil
end
if mode == 'write' and redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    local ttl = redis.call('pttl', KEYS[1])
    redis.call('pexpire', KEYS[1], ttl + tonumber(ARGV[1]))
    return nil
end
if mode == 'read' and redis.call('hexists', KEYS[1], ARGV[3]) == 1 then
    return -3
end
return redis.call('pttl', KEYS[1])
