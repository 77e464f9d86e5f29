--[[
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
