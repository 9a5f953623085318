-- Release one hold of a plain reentrant lock, exactly once per request id,
-- and, when that frees the lock and a successor is named, hand it straight
-- to that successor (a parked thread of the releasing client).
-- KEYS[1] the lock hash, KEYS[2] its wake-up channel,
-- KEYS[3] the latch key that remembers this request's reply,
-- KEYS[4] (optional, with a successor) the fencing-token counter the
-- successor's own acquire would have drawn a token from
-- ARGV[1] the wake-up message ("0"), ARGV[2] the holder field,
-- ARGV[3] latch TTL in ms,
-- ARGV[4] the publish command ("publish"; on a cluster "spublish" or, to
-- reach both kinds of listener, "publish+spublish": see src/scripts.rs),
-- ARGV[5] "first" on a request's first attempt, "retry" on a later one,
-- "above:N" for an undo of a late acquire,
-- ARGV[6] (optional) the successor's field, ARGV[7] its lease in ms
-- Reply: nil when the field does not hold the lock, 0 when holds remain,
-- {1, heard} when the lock was freed and the release announced to `heard`
-- subscribers (the releasing client's own among them when it waits on the
-- lock too: it tells from this whether another process waits), 2 when it was
-- handed to the successor (announced only when the successor's lease ends
-- sooner than the lock's TTL did, or the lock had none: the lock is still
-- held), or
-- {2, token} when it was handed over with a fencing token (KEYS[4]),
-- 3 when a retry finds the field gone and no latch: no earlier attempt of
-- this request released anything, so the hold was lost before.
--
-- Every release of a hold is latched (0, 1, 2 or "2:<token>"), so that a
-- retry whose earlier attempt ran replays its reply ({1, heard} replays as
-- 1), and a retry that finds neither latch nor field knows the hold was not
-- ours any more. A successor whose
-- token counter INCR would refuse (not a non-negative integer) is not
-- handed the lock: the lock is freed and announced instead, so nothing is
-- written before a failing INCR, and the waiter's own acquire reports it.
local retry = ARGV[5] == 'retry'
-- Read on a first attempt too: one delayed in the network (a stalled
-- server) may arrive after a retry of the same request ran.
do
    local replayed = redis.call('get', KEYS[3])
    if replayed then
        -- A retry of a release that already ran: answer as the first time.
        local token = string.match(replayed, '^2:(%d+)$')
        if token then
            return {2, tonumber(token)}
        end
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
local successor = ARGV[6]
if successor and KEYS[4] then
    local counter = redis.call('get', KEYS[4])
    -- What INCR accepts and turns into a positive token: absent, or a
    -- non-negative integer below 2^63 - 1 without leading zeros.
    if counter and not ((counter == '0' or string.match(counter, '^[1-9]%d*$'))
            and (#counter < 19 or (#counter == 19 and counter < '9223372036854775807'))) then
        successor = nil
    end
end
if redis.call('hexists', KEYS[1], 'mode') == 1 then
    -- A read-write lock: no plain hold of ours.
    return nil
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
    if retry then
        -- Latched too: an earlier attempt of this request still on its way
        -- must not release a hold the same field takes afterwards.
        redis.call('set', KEYS[3], 3, 'px', ARGV[3])
        return 3
    end
    return nil
end
if redis.call('hincrby', KEYS[1], ARGV[2], -1) > 0 then
    -- Holds remain: the TTL stays what they were taken (or renewed) with.
    -- Setting it to this hold's lease could cut another hold short.
    redis.call('set', KEYS[3], 0, 'px', ARGV[3])
    return 0
end
if successor and redis.call('hlen', KEYS[1]) == 1 then
    -- Only our spent field is left: the successor takes the lock as its
    -- own acquire would have, one hold and its lease.
    local before = redis.call('pttl', KEYS[1])
    redis.call('hdel', KEYS[1], ARGV[2])
    redis.call('hset', KEYS[1], successor, 1)
    redis.call('pexpire', KEYS[1], ARGV[7])
    -- PTTL -1 (a key without expiry, which another client may have made)
    -- is longer than any lease.
    if before == -1 or tonumber(ARGV[7]) < before then
        -- The lock now ends sooner than the waiters of other clients were
        -- told (they park until the TTL they saw, or on the message when
        -- they saw none): they look again. Never on a hand-over that keeps
        -- or lengthens the TTL (the watchdog's).
        redis.call(ARGV[4], KEYS[2], ARGV[1])
    end
    if KEYS[4] then
        -- A fenced lock's waiter: draw its token, as its acquire would.
        local token = redis.call('incr', KEYS[4])
        redis.call('set', KEYS[3], '2:' .. token, 'px', ARGV[3])
        return {2, token}
    end
    redis.call('set', KEYS[3], 2, 'px', ARGV[3])
    return 2
end
redis.call('del', KEYS[1])
redis.call('set', KEYS[3], 1, 'px', ARGV[3])
return {1, redis.call(ARGV[4], KEYS[2], ARGV[1])}
