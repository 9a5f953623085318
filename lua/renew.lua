-- Renew a batch of held locks in one round trip.
-- KEYS[1..n] lock hashes
-- ARGV[1] the new TTL in ms; then for KEYS[i]: ARGV[2i] how to renew it and
-- ARGV[2i + 1] the holder field.
--   "h": a hash lock (plain, fair, fenced, write): renew the hash.
--   "r": a read lock: renew the hash and this holder's read-hold keys
--        "<base>:<field>:rwlock_timeout:<k>" for k = 1..count.
-- Reply: an array with, for each key in order, 1 when it was renewed and 0
-- when the field no longer holds it (the lock was lost): for a read lock,
-- also when none of the holder's read-hold keys is left.
local renewed = {}
for i, key in ipairs(KEYS) do
    local mode, field = ARGV[2 * i], ARGV[2 * i + 1]
    local count = tonumber(redis.call('hget', key, field))
    local holds = {}
    if count and mode == 'r' then
        -- Helper keys share the lock's hash tag (see docs/wire-format.md).
        local base = key
        if not string.find(key, '{', 1, true) then
            base = '{' .. key .. '}'
        end
        for k = 1, count do
            local hold = base .. ':' .. field .. ':rwlock_timeout:' .. k
            if redis.call('exists', hold) == 1 then
                holds[#holds + 1] = hold
            end
        end
        if #holds == 0 then
            -- A read hold lives as long as its key, not its field: with no
            -- key of this holder left, the next release of another reader
            -- deletes the hash (read_release.lua). The holds were lost (a
            -- renewal come too late, a deleted key); renew nothing. A key
            -- that is left keeps the hash alive for every hold of the field.
            count = nil
        end
    end
    if count then
        -- Never shorter than it is: a hold taken with a longer lease by the
        -- same holder still needs its time, and PTTL -1 (a key without
        -- expiry, which another client may have made) is longer than any.
        local ttl = redis.call('pttl', key)
        if ttl ~= -1 and ttl < tonumber(ARGV[1]) then
            redis.call('pexpire', key, ARGV[1])
        end
        for _, hold in ipairs(holds) do
            local hold_ttl = redis.call('pttl', hold)
            if hold_ttl ~= -1 and hold_ttl < tonumber(ARGV[1]) then
                redis.call('pexpire', hold, ARGV[1])
            end
        end
        renewed[i] = 1
    else
        renewed[i] = 0
    end
end
return renewed
