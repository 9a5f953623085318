-- Delete a read-write lock held in the given mode, whoever holds it.
-- KEYS[1] the lock hash, KEYS[2] the channel
-- ARGV[1] the mode to delete ("read" or "write"), ARGV[2] the wake-up
-- message, ARGV[3] the publish command
-- Reply: 1 when the lock was deleted, 0 when it was not held in that mode.
if redis.call('hget', KEYS[1], 'mode') == ARGV[1] then
    redis.call('del', KEYS[1])
    redis.call(ARGV[3], KEYS[2], ARGV[2])
    return 1
end
return 0
