--[[
  Confirms that a node's local controller got a version (shared/sync/streams.ts), compare-and-set:
  only if it is still the stored version and no delivery since pending.lua was read may have
  overwritten it (the epoch). A failed confirmation of an older version clears the record (the
  local controller holds an unknown version) and bumps the epoch.

  Input:
    KEYS[1] tasks:{<node>}:versions                service -> stored version
    KEYS[2] tasks:{<node>}:local-controller        service -> the version the local controller has
    KEYS[3] tasks:{<node>}:local-controller-epoch  service -> confirmation epoch
    ARGV[1] service   <namespace>/<name>
    ARGV[2] version   the version delivered
    ARGV[3] epoch     the epoch pending.lua returned
  Output:
    1 when confirmed, else 0 (send the stored version again)
]]
local stored = redis.call('HGET', KEYS[1], ARGV[1])
if stored ~= ARGV[2] then
  redis.call('HDEL', KEYS[2], ARGV[1])
  redis.call('HINCRBY', KEYS[3], ARGV[1], 1)
  return 0
end
if (redis.call('HGET', KEYS[3], ARGV[1]) or '0') ~= ARGV[3] then return 0 end
redis.call('HSET', KEYS[2], ARGV[1], stored)
return 1
