// Generated from the .lua files in this folder by `npm run lua`: edit those, then run it.
import { luaFile } from '../../redis/scripts.js';

/** join-add.lua */
export const joinAdd = luaFile(
  'mlgraph/join-add',
  `--[[
  Adds one source's input to a transaction of a joiner node (shared/mlgraph/join-store.ts). An
  input resent by its source is not counted twice; the input that reaches the tightest bound
  completes the join and is the only one answered with the result (again if its source resends
  it); an input arriving after the join has ended is reported late rather than reopening it.

  The join's hash: \`in:<source>\` the inputs (JSON), \`n\` received, \`bound\` the tightest upper
  bound on the total, \`state\` (open, closing while a replica hands it out as a partial, then
  partial; or complete), \`completer\` the source whose input completed it, \`claim\` the token of
  the replica handing it out.

  Input:
    KEYS[1] mlgraph:{mlgraph:<node>}:join:<puid>   the transaction's join
    KEYS[2] mlgraph:{mlgraph:<node>}:deadlines     open joins by deadline (ms)
    ARGV[1] puid
    ARGV[2] source
    ARGV[3] pending    how many more inputs this input's path still allows for
    ARGV[4] payload    the input (JSON)
    ARGV[5] now        ms
    ARGV[6] deadline   ms a join stays open
    ARGV[7] keep       ms an ended join is kept
  Output:
    {'complete', join fields} | {'again', join fields} | {'waiting'} | {'late', state}
]]
local join, deadlines = KEYS[1], KEYS[2]
local puid, source, pending, payload = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4]
local now, deadline, keep = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
local state = redis.call('HGET', join, 'state')
if state and state ~= 'open' then
  if state == 'complete' and redis.call('HGET', join, 'completer') == source then
    return {'again', redis.call('HGETALL', join)}
  end
  return {'late', state}
end
if redis.call('HSETNX', join, 'in:' .. source, payload) == 0 then return {'waiting'} end
local n = redis.call('HINCRBY', join, 'n', 1)
-- pending counts the other inputs this input's path still allows for, arrived or not: the
-- transaction has at most 1 + pending inputs, whatever arrived before.
local bound = tonumber(redis.call('HGET', join, 'bound'))
if bound == nil or 1 + pending < bound then
  bound = 1 + pending
  redis.call('HSET', join, 'bound', bound)
end
if n == 1 then
  redis.call('HSET', join, 'state', 'open')
  redis.call('ZADD', deadlines, now + deadline, puid)
  redis.call('PEXPIRE', join, deadline + keep)
end
if n >= bound then
  redis.call('HSET', join, 'state', 'complete', 'completer', source)
  redis.call('ZREM', deadlines, puid)
  redis.call('PEXPIRE', join, keep)
  return {'complete', redis.call('HGETALL', join)}
end
return {'waiting'}
`,
);

/** join-claim.lua */
export const joinClaim = luaFile(
  'mlgraph/join-claim',
  `--[[
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
`,
);

/** join-due.lua */
export const joinDue = luaFile(
  'mlgraph/join-due',
  `--[[
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
`,
);

/** join-finish.lua */
export const joinFinish = luaFile(
  'mlgraph/join-finish',
  `--[[
  Marks a claimed join as handed out as a partial (shared/mlgraph/join-store.ts), unless the
  claim was lost (its lease ran out and another replica took it over).

  Input:
    KEYS[1] mlgraph:{mlgraph:<node>}:join:<puid>   the transaction's join
    KEYS[2] mlgraph:{mlgraph:<node>}:deadlines     open joins by deadline (ms)
    ARGV[1] puid
    ARGV[2] claim   the caller's token
    ARGV[3] keep    ms the ended join is kept
  Output:
    1 when finished, 0 when the claim was lost
]]
if redis.call('HGET', KEYS[1], 'claim') ~= ARGV[2] then return 0 end
redis.call('HSET', KEYS[1], 'state', 'partial')
redis.call('HDEL', KEYS[1], 'claim')
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1
`,
);

/** join-tighten.lua */
export const joinTighten = luaFile(
  'mlgraph/join-tighten',
  `--[[
  Lowers a transaction's bound without an input of its own (shared/mlgraph/join-store.ts), as
  join-add.lua does with one: a route not taken after the inputs went. Completes the join when
  that many inputs have arrived; a join completed this way has no completer.

  Input:
    KEYS[1] mlgraph:{mlgraph:<node>}:join:<puid>   the transaction's join
    KEYS[2] mlgraph:{mlgraph:<node>}:deadlines     open joins by deadline (ms)
    ARGV[1] puid
    ARGV[2] inputs     the transaction's inputs in all, at most
    ARGV[3] deadline   ms a join stays open
    ARGV[4] keep       ms an ended join is kept
  Output:
    {'complete', join fields} | {'again', join fields} | {'waiting'} | {'late', state}
]]
local join, deadlines = KEYS[1], KEYS[2]
local puid, inputs = ARGV[1], tonumber(ARGV[2])
local deadline, keep = tonumber(ARGV[3]), tonumber(ARGV[4])
local state = redis.call('HGET', join, 'state')
if state and state ~= 'open' then
  if state == 'complete' then return {'again', redis.call('HGETALL', join)} end
  return {'late', state}
end
if not state then
  redis.call('HSET', join, 'state', 'open')
  redis.call('PEXPIRE', join, deadline + keep)
end
local bound = tonumber(redis.call('HGET', join, 'bound'))
if bound == nil or inputs < bound then
  bound = inputs
  redis.call('HSET', join, 'bound', bound)
end
local n = tonumber(redis.call('HGET', join, 'n') or '0')
if n > 0 and n >= bound then
  redis.call('HSET', join, 'state', 'complete', 'completer', '')
  redis.call('ZREM', deadlines, puid)
  redis.call('PEXPIRE', join, keep)
  return {'complete', redis.call('HGETALL', join)}
end
return {'waiting'}
`,
);

/** path-record.lua */
export const pathRecord = luaFile(
  'mlgraph/path-record',
  `--[[
  Adds routers to a prediction's path (shared/mlgraph/path-store.ts): one key, so the set and
  its expiry change together. Each prediction's key has its own slot on a cluster, so a busy
  graph's paths spread out.

  Input:
    KEYS[1] mlgraph:{path:<graph>:<puid>}:path   the routers the prediction went through
    ARGV[1] ttl   ms the path is kept
    ARGV[2..] the routers
  Output:
    1
]]
for i = 2, #ARGV do redis.call('SADD', KEYS[1], ARGV[i]) end
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return 1
`,
);

/** route-record.lua */
export const routeRecord = luaFile(
  'mlgraph/route-record',
  `--[[
  Remembers the route a prediction took through a router node, unless it has one
  (shared/mlgraph/route-store.ts): a retried prediction keeps its first route. The arms' fields
  come back with the route: the router's next decision reads them instead of asking again (one
  round trip per routed request, not two).

  Input:
    KEYS[1] mlgraph:{mlgraph:<node>}:arms         per child: \`:routed\`, \`:rewarded\`, \`:reward\`
    KEYS[2] mlgraph:{mlgraph:<node>}:puid:<puid>  the prediction's \`route\` (JSON) and \`reward\`
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
`,
);

/** route-reward.lua */
export const routeReward = luaFile(
  'mlgraph/route-reward',
  `--[[
  Applies a reward to the children a prediction was routed to (shared/mlgraph/route-store.ts),
  once per prediction however often it is resent.

  Input:
    KEYS[1] mlgraph:{mlgraph:<node>}:arms         per child: \`:routed\`, \`:rewarded\`, \`:reward\`
    KEYS[2] mlgraph:{mlgraph:<node>}:puid:<puid>  the prediction's \`route\` (JSON) and \`reward\`
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
`,
);
