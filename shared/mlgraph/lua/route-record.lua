--[[
  Remembers the route a prediction took through a router node, unless it has one
  (shared/mlgraph/route-store.ts): a retried prediction keeps its first route. The arms' fields
  come back with the route: the router's next decision reads them instead of asking again (one
  round trip per routed request, not two).

  Input:
    KEYS[1] mlgraph:{mlgraph:<node>}:arms         per child: `:routed`, `:rewarded`, `:reward`
    KEYS[2] mlgraph:{mlgraph:<node>}:puid:<puid>  the prediction's `route` (JSON) and `reward`
    ARGV[1] route   the children chosen (JSON array)
    ARGV[2] ttl     ms the route is kept
    ARGV[3..] arm fields to read back
  Output:
    {the route kept (JSON), the arm fields' values}
]]
local stored = redis.call('HGET', KEYS[2], 'route')
if not stored then
  stored = ARGV[1]
  redis.call('HSET', KEYS[2], 'route', stored)
  redis.call('PEXPIRE', KEYS[2], ARGV[2])
  for _, child in ipairs(cjson.decode(stored)) do
    redis.call('HINCRBY', KEYS[1], child .. ':routed', 1)
  end
end
if #ARGV < 3 then return {stored, {}} end
return {stored, redis.call('HMGET', KEYS[1], unpack(ARGV, 3))}
