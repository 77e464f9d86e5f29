--[[
  The joins of a joiner node past their deadline (shared/mlgraph/join-store.ts), each pushed a
  lease ahead: a replica that dies before handing them out leaves them due again.

  Input:
    KEYS[1] mlgraph:{mlgraph:<node>}:deadlines   open joins by deadline (ms)
    ARGV[1] now     ms
    ARGV[2] limit   joins at most
    ARGV[3] lease   ms
  Output:
    the due joins' puids
]]
local now, limit, lease = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, limit)
-- Pushed a lease ahead: a replica that dies before handing them out leaves them due again.
for _, puid in ipairs(due) do redis.call('ZADD', KEYS[1], now + lease, puid) end
return due
