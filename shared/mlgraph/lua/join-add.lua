--[[
  Adds one source's input to a transaction of a joiner node (shared/mlgraph/join-store.ts). An
  input resent by its source is not counted twice; the input that reaches the tightest bound
  completes the join and is the only one answered with the result (again if its source resends
  it); an input arriving after the join has ended is reported late rather than reopening it.

  The join's hash: `in:<source>` the inputs (JSON), `n` received, `bound` the tightest upper
  bound on the total, `state` (open, closing while a replica hands it out as a partial, then
  partial; or complete), `completer` the source whose input completed it, `claim` the token of
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
