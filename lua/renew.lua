-- Renew a batch of held locks in one round trip.
-- KEYS[1..n] lock hashes
-- ARGV[1] the new TTL in ms, ARGV[i + 1] the holder field for KEYS[i]
-- Reply: an array with, for each key in order, 1 when it was renewed and 0
-- when the field no longer holds it (the lock was lost).
local renewed = {}
for i, key in ipairs(KEYS) do
    if redis.call('hexists', key, ARGV[i + 1]) == 1 then
        redis.call('pexpire', key, ARGV[1])
        renewed[i] = 1
    else
        renewed[i] = 0
    end
end
return renewed
