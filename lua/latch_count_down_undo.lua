-- End a count_down call that fails although one of its attempts may have
-- counted, or may still reach Redis (its reply was lost, or it was held
-- back past the response timeout): close the call, so that an attempt
-- that comes later counts nothing (latch_count_down.lua replays), and give
-- back the count its attempt took unless that count opened the latch.
-- KEYS[1] the latch, KEYS[2] the call's request latch
-- ARGV[1] the request latch's TTL in ms
-- Reply: 1 when a count was given back, 0 when none was: no attempt ran
-- (the call is closed before any does), the call was closed already, its
-- attempt opened the latch (or found it open: that happened), or the
-- latch opened since (giving back would arm it again).
local done = redis.call('get', KEYS[2])
redis.call('set', KEYS[2], 'closed', 'px', ARGV[1])
if not done or done == 'closed' or tonumber(done) == 0 then
    return 0
end
local count = redis.call('type', KEYS[1]).ok == 'string' and redis.call('get', KEYS[1])
if not count or not string.match(count, '^-?%d+$') then
    return 0
end
redis.call('incr', KEYS[1])
return 1
