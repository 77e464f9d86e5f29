--[[
  Rolls the scheduler's window of T once it has lasted `span` (shared/aset/binding-store.ts):
  one caller wins, and gets the ended window's time-averaged features. Times are stored and
  returned as the caller's strings: set-policy.lua compares them as text.

  Input:
    KEYS[1] aset:{aset:<topology>}:workers    the workers' features (see includes/prelude.lua)
    KEYS[2] aset:{aset:<topology>}:bindings   stream id -> its binding (JSON)
    KEYS[3] aset:{aset:<topology>}:expiry     stream ids by lease end (ms)
    KEYS[4] aset:{aset:<topology>}:ended      ended stream ids by tombstone end (ms)
    KEYS[5] aset:{aset:<topology>}:window     `start`, `policy`, `r:<w>` responses per worker
    ARGV[1] now     ms
    ARGV[2] span    ms a window lasts
    ARGV[3] count   how many workers the topology has
  Output:
    {'started', start} (no window existed) | {'current', start, policy} |
    {'rolled', start, end, policy, then FEATURES values per worker, worker-major}
]]
--- @include "includes/prelude"
local now, span, count = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
-- Times are stored and returned as the caller's strings: setPolicy compares them as text.
local stored = redis.call('HGET', window, 'start')
local start = tonumber(stored)
local policy = redis.call('HGET', window, 'policy')
if start == nil then
  redis.call('HSET', window, 'start', ARGV[1])
  redis.call('HDEL', window, 'policy')
  return {'started', ARGV[1]}
end
if now - start < span then return {'current', stored, policy} end
local elapsed = now - start
local out = {'rolled', stored, ARGV[1], policy}
for w = 0, count - 1 do
  integrate(w, now)
  local integrals = redis.call('HMGET', workers, unpack(names(w, 'i')))
  local responses = tonumber(redis.call('HGET', window, 'r:' .. w) or '0')
  local k = 1
  for f = 0, FEATURES - 1 do
    if f == RESPONSES then
      out[#out + 1] = tostring(responses * 1000 / elapsed)
    else
      out[#out + 1] = tostring(tonumber(integrals[k] or '0') / elapsed)
      k = k + 1
    end
  end
  redis.call('HDEL', workers, unpack(names(w, 'i')))
  redis.call('HDEL', window, 'r:' .. w)
end
redis.call('HSET', window, 'start', ARGV[1])
return out
