--[[
  Adds a replica's hardness scores to its service's shared window (shared/inference/budget.ts):
  appends them, trims to the newest `window`, and returns them all.

  Input:
    KEYS[1] budget:{<service>}:hardness   the window (a list, newest last)
    ARGV[1] window   scores the window keeps
    ARGV[2..] the new scores
  Output:
    the window's scores, oldest first
]]
local n = #ARGV
if n > 1 then
  redis.call('RPUSH', KEYS[1], unpack(ARGV, 2, n))
  redis.call('LTRIM', KEYS[1], -tonumber(ARGV[1]), -1)
end
redis.call('EXPIRE', KEYS[1], 86400)
return redis.call('LRANGE', KEYS[1], 0, -1)
