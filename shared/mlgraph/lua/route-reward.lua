--[[
  Applies a reward to the children a prediction was routed to (shared/mlgraph/route-store.ts),
  once per prediction however often it is resent.

  Input:
    KEYS[1] mlgraph:{mlgraph:<node>}:arms         per child: `:routed`, `:rewarded`, `:reward`
    KEYS[2] mlgraph:{mlgraph:<node>}:puid:<puid>  the prediction's `route` (JSON) and `reward`
    ARGV[1] reward
  Output:
    'applied' | 'duplicate' | 'unknown' (no route stored, or it expired)
]]
local route = redis.call('HGET', KEYS[2], 'route')
if not route then return 'unknown' end
if redis.call('HSETNX', KEYS[2], 'reward', ARGV[1]) == 0 then return 'duplicate' end
for _, child in ipairs(cjson.decode(route)) do
  redis.call('HINCRBY', KEYS[1], child .. ':rewarded', 1)
  redis.call('HINCRBYFLOAT', KEYS[1], child .. ':reward', ARGV[1])
end
return 'applied'
