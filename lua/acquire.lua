-- Take or re-enter a plain reentrant lock.
-- KEYS[1] the lock hash
-- ARGV[1] lease in ms, ARGV[2] the holder field "<client-uuid>:<thread-id>"
-- Reply: nil when the caller now holds the lock, else the lock's PTTL in ms.
if redis.call('exists', KEYS[1]) == 0 or redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return nil
end
return redis.call('pttl', KEYS[1])
