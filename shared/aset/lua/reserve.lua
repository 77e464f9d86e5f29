--[[
  Binds a stream to a worker if the worker can still take its load within its capacity
  (shared/aset/binding-store.ts), constraint (2): two replicas can never both take the last
  capacity of a worker, nor bind one stream twice. An ended stream's id is refused.

  Input:
    KEYS[1] aset:{aset:<topology>}:workers    the workers' features (see includes/prelude.lua)
    KEYS[2] aset:{aset:<topology>}:bindings   stream id -> its binding (JSON)
    KEYS[3] aset:{aset:<topology>}:expiry     stream ids by lease end (ms)
    KEYS[4] aset:{aset:<topology>}:ended      ended stream ids by tombstone end (ms)
    KEYS[5] aset:{aset:<topology>}:window     `start`, `policy`, `r:<w>` responses per worker
    ARGV[1] id           the stream
    ARGV[2] record       its binding (JSON)
    ARGV[3] now          ms
    ARGV[4] worker
    ARGV[5] delta        the load it reserves (zeta_i * rho_i)
    ARGV[6] rate         what it adds to its (deadline, rate) cell
    ARGV[7] cell         the cell's offset in the worker's features
    ARGV[8] capacity     the worker's capacity ('inf' for none)
    ARGV[9] tolerance    constraint (2)'s relative slack
    ARGV[10] expiresAt   ms the lease ends
  Output:
    {'bound'} | {'exists', the binding} | {'ended'} | {'full', the worker's load}
]]
--- @include "includes/prelude"
local id, record, now = ARGV[1], ARGV[2], tonumber(ARGV[3])
local w, delta, rate, cell = ARGV[4], ARGV[5], ARGV[6], ARGV[7]
local capacity, tolerance, expiresAt = ARGV[8], tonumber(ARGV[9]), ARGV[10]
local existing = redis.call('HGET', bindings, id)
if existing then return {'exists', existing} end
if redis.call('ZSCORE', ended, id) then return {'ended'} end
local load = tonumber(redis.call('HGET', workers, w .. ':v' .. LOAD) or '0')
if capacity ~= 'inf' then
  -- Constraint (2) with the relative slack of constraints.ts's atMost.
  local value, bound = load + tonumber(delta), tonumber(capacity)
  if value > bound and value - bound > tolerance * math.max(math.abs(value), math.abs(bound)) then
    return {'full', tostring(load)}
  end
end
integrate(w, now)
redis.call('HINCRBYFLOAT', workers, w .. ':v' .. STREAMS, 1)
redis.call('HINCRBYFLOAT', workers, w .. ':v' .. LOAD, delta)
redis.call('HINCRBYFLOAT', workers, w .. ':v' .. cell, rate)
redis.call('HSET', bindings, id, record)
redis.call('ZADD', expiry, expiresAt, id)
return {'bound'}
