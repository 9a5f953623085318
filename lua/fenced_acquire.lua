-- Take or re-enter a fenced lock and hand out a fencing token.
-- KEYS[1] the lock hash (shared with the plain lock), KEYS[2] the token counter
-- ARGV[1] lease in ms, ARGV[2] the holder field, ARGV[3] "1" when the
-- caller counts holds of its own (a re-entry only)
-- Reply: {1, holds, token} when the caller now holds the lock (every
-- acquire, re-entries included, gets a larger token; holds = 1: a new hold),
-- else {0, PTTL}. Error WRONGKIND when the name holds a read-write lock,
-- error CORRUPT when the counter holds what INCR would refuse or turn into
-- a token that is not positive: checked before anything is written, so a
-- failed acquire leaves no hold behind.
-- Reply {2, 0} when ARGV[3] is "1" (the caller counts holds of its own
-- under the field) and Redis has none: those holds were lost (an expiry,
-- a restart, a force-unlock), and a re-entry must not take the lock anew
-- in their name, which Redis would count as if nothing had happened.
-- Nothing is changed.
local function check_counter()
    local counter = redis.call('get', KEYS[2])
    if counter and not ((counter == '0' or string.match(counter, '^[1-9]%d*$'))
            and (#counter < 19 or (#counter == 19 and counter < '9223372036854775807'))) then
        return redis.error_reply('CORRUPT ' .. string.sub(counter, 1, 64))
    end
    return nil
end
if ARGV[3] == '1' and redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
    return {2, 0}
end
if redis.call('exists', KEYS[1]) == 0 then
    local corrupt = check_counter()
    if corrupt then return corrupt end
    redis.call('hset', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return {1, 1, redis.call('incr', KEYS[2])}
end
if redis.call('hexists', KEYS[1], 'mode') == 1 then
    return redis.error_reply('WRONGKIND read-write lock')
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    local corrupt = check_counter()
    if corrupt then return corrupt end
    local holds = redis.call('hincrby', KEYS[1], ARGV[2], 1)
    -- A re-entry never shortens the life the holds beneath it need (PTTL
    -- -1, a key without expiry, is longer than any lease).
    local ttl = redis.call('pttl', KEYS[1])
    if ttl ~= -1 and ttl < tonumber(ARGV[1]) then
        redis.call('pexpire', KEYS[1], ARGV[1])
    end
    return {1, holds, redis.call('incr', KEYS[2])}
end
return {0, redis.call('pttl', KEYS[1])}
