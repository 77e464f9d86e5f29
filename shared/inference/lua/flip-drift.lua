--[[
  Flips a service's drift state (shared/inference/quality-window.ts), only if nobody flipped it
  first, so one reset per change however many replicas see it; opens a bucket marked as a reset.

  Input:
    KEYS[1] quality:{<service>}:buckets   the buckets (JSON), oldest first
    KEYS[2] quality:{<service>}:drift     the drift state (field `drifting`: '0' or '1')
    ARGV[1] from    the drift state the caller saw ('0' or '1')
    ARGV[2] to      the new one
    ARGV[3] bucket  an empty bucket marked as a reset (JSON)
    ARGV[4] keep    buckets kept
    ARGV[5] ttl     seconds both keys are kept
  Output:
    1 when flipped, else 0
]]
if (redis.call('HGET', KEYS[2], 'drifting') or '0') ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[2], 'drifting', ARGV[2])
redis.call('RPUSH', KEYS[1], ARGV[3])
redis.call('LTRIM', KEYS[1], -tonumber(ARGV[4]), -1)
redis.call('EXPIRE', KEYS[1], ARGV[5])
redis.call('EXPIRE', KEYS[2], ARGV[5])
return 1
