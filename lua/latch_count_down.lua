-- Count a count-down latch down by one; at zero the key is deleted and 0
-- ("open") is published on its channel, which wakes every waiter.
-- KEYS[1] the latch, KEYS[2] its channel, KEYS[3] this request's latch key
-- ARGV[1] the publish command, ARGV[2] the request latch's TTL in ms
-- Reply: the count left (0 when open; also when the latch did not exist);
-- -1 when the call was closed.
-- Error WRONGKIND when the key holds something that is not a count.
--
-- A retry of the same request (its first reply was lost) replays the
-- latched reply: one call never counts down twice, which would open the
-- latch early. An attempt that comes after its call failed and was closed
-- (latch_count_down_undo.lua: 'closed') counts nothing and replies -1
-- (docs/reliability.md, "the count-down latch's client", says what window
-- is left: an attempt that runs before any copy of the undo).
local done = redis.call('get', KEYS[3])
if done then
    return tonumber(done) or -1
end
local kind = redis.call('type', KEYS[1]).ok
if kind == 'hash' then
    return redis.error_reply('WRONGKIND a lock (a hash)')
end
if kind ~= 'none' and kind ~= 'string' then
    return redis.error_reply('WRONGKIND a Redis ' .. kind)
end
if kind == 'string' and not string.match(redis.call('get', KEYS[1]), '^-?%d+$') then
    return redis.error_reply('WRONGKIND a string that is not a count')
end
local left = redis.call('decr', KEYS[1])
if left <= 0 then
    redis.call('del', KEYS[1])
end
if left == 0 then
    redis.call(ARGV[1], KEYS[2], 0)
end
left = math.max(left, 0)
redis.call('set', KEYS[3], left, 'px', ARGV[2])
return left
