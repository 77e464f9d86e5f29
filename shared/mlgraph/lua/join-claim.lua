--[[
  Freezes an overdue join for the caller (shared/mlgraph/join-store.ts): later inputs are late,
  so the partial sent is what the join holds. A claim whose lease ran out (its replica died) is
  taken over.

  Input:
    KEYS[1] mlgraph:{mlgraph:<node>}:join:<puid>   the transaction's join
    KEYS[2] mlgraph:{mlgraph:<node>}:deadlines     open joins by deadline (ms)
    ARGV[1] puid
    ARGV[2] claim   the caller's token
  Output:
    {'claimed', join fields} | {'expired'} (the join's key expired) | {'done'} (it ended)
]]
local state = redis.call('HGET', KEYS[1], 'state')
if not state then
  redis.call('ZREM', KEYS[2], ARGV[1])
  return {'expired'}
end
if state ~= 'open' and state ~= 'closing' then
  redis.call('ZREM', KEYS[2], ARGV[1])
  return {'done'}
end
redis.call('HSET', KEYS[1], 'state', 'closing', 'claim', ARGV[2])
return {'claimed', redis.call('HGETALL', KEYS[1])}
