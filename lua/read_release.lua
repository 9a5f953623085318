-- Release one read hold of a read-write lock, exactly once per request id.
-- KEYS[1] the lock hash, KEYS[2] the channel, KEYS[3] this holder's
-- read-hold key prefix, KEYS[4] the base that every holder's prefix starts
-- with ("{name}", or the name when it has a hash tag), KEYS[5] the latch
-- ARGV[1] the wake-up message ("0"), ARGV[2] the holder field,
-- ARGV[3] latch TTL in ms, ARGV[4] the publish command,
-- ARGV[5] "first" on a request's first attempt, "retry" on a later one,
-- "above:N" for an undo of a late acquire
-- Reply: nil when the field holds no read hold, 0 when the lock is still
-- held by someone, 1 when it was freed, 3 when a retry finds the field gone
-- and no latch (the holds were lost before).
--
-- Every release of a hold is latched, as in release.lua: a retry whose
-- earlier attempt ran replays its reply.
local retry = ARGV[5] == 'retry'
-- Read on a first attempt too: one delayed in the network (a stalled
-- server) may arrive after a retry of the same request ran.
do
    local replayed = redis.call('get', KEYS[5])
    if replayed then
        return tonumber(replayed)
    end
end
-- An undo of a late acquire (ARGV[5] "above:N", see src/engine/attempt.rs):
-- release only while the field counts more than N holds, those the
-- caller's guards stand for; otherwise 4, and nothing latched.
local above = tonumber(string.match(ARGV[5], '^above:(%d+)$'))
if above and (tonumber(redis.call('hget', KEYS[1], ARGV[2])) or 0) <= above then
    return 4
end
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false or redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
    if retry then
        -- Latched: an earlier attempt still on its way must not release a
        -- hold the same field takes afterwards.
        redis.call('set', KEYS[5], 3, 'px', ARGV[3])
        return 3
    end
    return nil
end
-- Whether PTTL a ends sooner than PTTL b: -2 (gone) soonest, -1 (a key
-- without expiry, which another client may have made) never.
local function sooner(a, b)
    if a == -1 then
        return false
    end
    return b == -1 or a < b
end
local left = redis.call('hincrby', KEYS[1], ARGV[2], -1)
if left == 0 then
    redis.call('hdel', KEYS[1], ARGV[2])
end
-- Hold keys are numbered, not tied to guards: which hold this release ends
-- is unknown. Dropping the key with the shortest TTL keeps the longest ones,
-- so no remaining hold of this holder is ever cut short.
local last = KEYS[3] .. ':' .. (left + 1)
local shortest, shortest_ttl = left + 1, redis.call('pttl', last)
for k = 1, left do
    local ttl = redis.call('pttl', KEYS[3] .. ':' .. k)
    if sooner(ttl, shortest_ttl) then
        shortest, shortest_ttl = k, ttl
    end
end
if shortest <= left then
    -- The last key outlives the one it replaces: it lives on in its place.
    local last_ttl = redis.call('pttl', last)
    if last_ttl > 0 then
        redis.call('set', KEYS[3] .. ':' .. shortest, 1, 'px', last_ttl)
    elseif last_ttl == -1 then
        redis.call('set', KEYS[3] .. ':' .. shortest, 1)
    end
end
redis.call('del', last)

local reply = 1
if mode == 'write' then
    -- The writer still holds its write hold: the lock lives as long as that
    -- needs, so the read holds' TTLs must not cut it short.
    reply = 0
elseif redis.call('hlen', KEYS[1]) > 1 then
    -- Other read holds remain: the hash lives as long as the longest of them.
    local longest = -3
    local fields = redis.call('hkeys', KEYS[1])
    for _, field in ipairs(fields) do
        local count = tonumber(redis.call('hget', KEYS[1], field))
        if count then
            for k = 1, count do
                local ttl = redis.call('pttl', KEYS[4] .. ':' .. field .. ':rwlock_timeout:' .. k)
                if sooner(longest, ttl) then
                    longest = ttl
                end
            end
        end
    end
    if longest == -1 then
        -- A hold without expiry remains: so does the hash.
        redis.call('persist', KEYS[1])
        reply = 0
    elseif longest > 0 then
        local before = redis.call('pttl', KEYS[1])
        redis.call('pexpire', KEYS[1], longest)
        if sooner(longest, before) then
            -- The lock now ends sooner than a parked writer was told (the
            -- TTL it saw, or none): it looks again (a reply of 0 announces
            -- nothing otherwise).
            redis.call(ARGV[4], KEYS[2], ARGV[1])
        end
        reply = 0
    end
end
if reply == 1 then
    redis.call('del', KEYS[1])
    redis.call(ARGV[4], KEYS[2], ARGV[1])
end
redis.call('set', KEYS[5], reply, 'px', ARGV[3])
return reply
