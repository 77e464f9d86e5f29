// Generated from the .lua files in this folder by `npm run lua`: edit those, then run it.
import { luaFile } from '../../redis/scripts.js';

/** add-responses.lua */
export const addResponses = luaFile(
  'aset/add-responses',
  `--[[
  Adds delivered responses per worker to the current window (shared/aset/binding-store.ts), run
  through defineIdempotentScript so a redelivered monitoring report is not counted twice.

  Input:
    KEYS[1] aset:{aset:<topology>}:window   \`start\`, \`policy\`, \`r:<w>\` responses per worker
    ARGV[1..] worker, responses pairs
  Output:
    1
]]
for i = 1, #ARGV, 2 do
  redis.call('HINCRBYFLOAT', KEYS[1], 'r:' .. ARGV[i], ARGV[i + 1])
end
return 1
`,
);

/** release.lua */
export const release = luaFile(
  'aset/release',
  `--[[
  Ends a stream's binding (shared/aset/binding-store.ts) and refuses its id for a while (a
  tombstone), so a late redelivery of its request cannot bind it again.

  Input:
    KEYS[1] aset:{aset:<topology>}:workers    the workers' features (see includes/prelude.lua)
    KEYS[2] aset:{aset:<topology>}:bindings   stream id -> its binding (JSON)
    KEYS[3] aset:{aset:<topology>}:expiry     stream ids by lease end (ms)
    KEYS[4] aset:{aset:<topology>}:ended      ended stream ids by tombstone end (ms)
    KEYS[5] aset:{aset:<topology>}:window     \`start\`, \`policy\`, \`r:<w>\` responses per worker
    ARGV[1] id               the stream
    ARGV[2] now              ms
    ARGV[3] tombstoneUntil   ms its id stays refused
  Output:
    the binding ended (JSON), or nil when there was none
]]
--[[
  What the scripts that change the bindings share (shared/aset/binding-store.ts): their five
  keys, in this order, and the functions that keep the workers' features.

  The workers hash: \`<w>:v<f>\` the current value of feature f of worker w, \`<w>:i<f>\` its
  integral (value x ms) since the window started, \`<w>:t\` when it was last advanced. The
  features are a worker's row of eq. (11), as shared/aset/observation.ts lays it out: FEATURES
  per worker (featuresPerWorker), STREAMS, RESPONSES (RESPONSES_PER_S) and LOAD their offsets
  (test/shared/aset/binding-store.test.ts checks they match).
]]
local workers, bindings, expiry, ended, window = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local FEATURES, STREAMS, RESPONSES, LOAD = 18, 0, 1, 2
local tracked = {}
for f = 0, FEATURES - 1 do
  if f ~= RESPONSES then tracked[#tracked + 1] = f end
end
local function names(w, kind)
  local list = {}
  for i, f in ipairs(tracked) do list[i] = w .. ':' .. kind .. f end
  return list
end
-- Moves worker w's integrals up to now. A replica whose clock is behind the last advance adds
-- nothing, so the change lands at the later time instead of running time backwards.
local function integrate(w, now)
  local t = tonumber(redis.call('HGET', workers, w .. ':t'))
  if t ~= nil and now > t then
    local values = redis.call('HMGET', workers, unpack(names(w, 'v')))
    for i, v in ipairs(values) do
      if v then
        local x = tonumber(v)
        if x ~= 0 then
          redis.call('HINCRBYFLOAT', workers, w .. ':i' .. tracked[i], x * (now - t))
        end
      end
    end
  end
  if t == nil or now > t then redis.call('HSET', workers, w .. ':t', now) end
end
local function release(id, now, tombstoneUntil)
  -- An end is remembered even for a stream with no binding (its request still on its way, or
  -- retried after a failure): the request must not bind it afterwards.
  redis.call('ZADD', ended, tombstoneUntil, id)
  redis.call('ZREM', expiry, id)
  local text = redis.call('HGET', bindings, id)
  if not text then return nil end
  local r = cjson.decode(text)
  local w = r.worker
  integrate(w, now)
  local left = tonumber(redis.call('HINCRBYFLOAT', workers, w .. ':v' .. STREAMS, -1))
  if left <= 0 then
    -- Nothing bound: zero the values exactly, so float residue of many +/- cannot build up.
    redis.call('HDEL', workers, unpack(names(w, 'v')))
  else
    redis.call('HINCRBYFLOAT', workers, w .. ':v' .. LOAD, '-' .. r.delta)
    redis.call('HINCRBYFLOAT', workers, w .. ':v' .. r.cell, '-' .. r.rate)
  end
  redis.call('HDEL', bindings, id)
  return text
end
local text = release(ARGV[1], tonumber(ARGV[2]), ARGV[3])
if text then return text end
return false
`,
);

/** reserve.lua */
export const reserve = luaFile(
  'aset/reserve',
  `--[[
  Binds a stream to a worker if the worker can still take its load within its capacity
  (shared/aset/binding-store.ts), constraint (2): two replicas can never both take the last
  capacity of a worker, nor bind one stream twice. An ended stream's id is refused.

  Input:
    KEYS[1] aset:{aset:<topology>}:workers    the workers' features (see includes/prelude.lua)
    KEYS[2] aset:{aset:<topology>}:bindings   stream id -> its binding (JSON)
    KEYS[3] aset:{aset:<topology>}:expiry     stream ids by lease end (ms)
    KEYS[4] aset:{aset:<topology>}:ended      ended stream ids by tombstone end (ms)
    KEYS[5] aset:{aset:<topology>}:window     \`start\`, \`policy\`, \`r:<w>\` responses per worker
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
--[[
  What the scripts that change the bindings share (shared/aset/binding-store.ts): their five
  keys, in this order, and the functions that keep the workers' features.

  The workers hash: \`<w>:v<f>\` the current value of feature f of worker w, \`<w>:i<f>\` its
  integral (value x ms) since the window started, \`<w>:t\` when it was last advanced. The
  features are a worker's row of eq. (11), as shared/aset/observation.ts lays it out: FEATURES
  per worker (featuresPerWorker), STREAMS, RESPONSES (RESPONSES_PER_S) and LOAD their offsets
  (test/shared/aset/binding-store.test.ts checks they match).
]]
local workers, bindings, expiry, ended, window = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local FEATURES, STREAMS, RESPONSES, LOAD = 18, 0, 1, 2
local tracked = {}
for f = 0, FEATURES - 1 do
  if f ~= RESPONSES then tracked[#tracked + 1] = f end
end
local function names(w, kind)
  local list = {}
  for i, f in ipairs(tracked) do list[i] = w .. ':' .. kind .. f end
  return list
end
-- Moves worker w's integrals up to now. A replica whose clock is behind the last advance adds
-- nothing, so the change lands at the later time instead of running time backwards.
local function integrate(w, now)
  local t = tonumber(redis.call('HGET', workers, w .. ':t'))
  if t ~= nil and now > t then
    local values = redis.call('HMGET', workers, unpack(names(w, 'v')))
    for i, v in ipairs(values) do
      if v then
        local x = tonumber(v)
        if x ~= 0 then
          redis.call('HINCRBYFLOAT', workers, w .. ':i' .. tracked[i], x * (now - t))
        end
      end
    end
  end
  if t == nil or now > t then redis.call('HSET', workers, w .. ':t', now) end
end
local function release(id, now, tombstoneUntil)
  -- An end is remembered even for a stream with no binding (its request still on its way, or
  -- retried after a failure): the request must not bind it afterwards.
  redis.call('ZADD', ended, tombstoneUntil, id)
  redis.call('ZREM', expiry, id)
  local text = redis.call('HGET', bindings, id)
  if not text then return nil end
  local r = cjson.decode(text)
  local w = r.worker
  integrate(w, now)
  local left = tonumber(redis.call('HINCRBYFLOAT', workers, w .. ':v' .. STREAMS, -1))
  if left <= 0 then
    -- Nothing bound: zero the values exactly, so float residue of many +/- cannot build up.
    redis.call('HDEL', workers, unpack(names(w, 'v')))
  else
    redis.call('HINCRBYFLOAT', workers, w .. ':v' .. LOAD, '-' .. r.delta)
    redis.call('HINCRBYFLOAT', workers, w .. ':v' .. r.cell, '-' .. r.rate)
  end
  redis.call('HDEL', bindings, id)
  return text
end
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
`,
);

/** roll-window.lua */
export const rollWindow = luaFile(
  'aset/roll-window',
  `--[[
  Rolls the scheduler's window of T once it has lasted \`span\` (shared/aset/binding-store.ts):
  one caller wins, and gets the ended window's time-averaged features. Times are stored and
  returned as the caller's strings: set-policy.lua compares them as text.

  Input:
    KEYS[1] aset:{aset:<topology>}:workers    the workers' features (see includes/prelude.lua)
    KEYS[2] aset:{aset:<topology>}:bindings   stream id -> its binding (JSON)
    KEYS[3] aset:{aset:<topology>}:expiry     stream ids by lease end (ms)
    KEYS[4] aset:{aset:<topology>}:ended      ended stream ids by tombstone end (ms)
    KEYS[5] aset:{aset:<topology>}:window     \`start\`, \`policy\`, \`r:<w>\` responses per worker
    ARGV[1] now     ms
    ARGV[2] span    ms a window lasts
    ARGV[3] count   how many workers the topology has
  Output:
    {'started', start} (no window existed) | {'current', start, policy} |
    {'rolled', start, end, policy, then FEATURES values per worker, worker-major}
]]
--[[
  What the scripts that change the bindings share (shared/aset/binding-store.ts): their five
  keys, in this order, and the functions that keep the workers' features.

  The workers hash: \`<w>:v<f>\` the current value of feature f of worker w, \`<w>:i<f>\` its
  integral (value x ms) since the window started, \`<w>:t\` when it was last advanced. The
  features are a worker's row of eq. (11), as shared/aset/observation.ts lays it out: FEATURES
  per worker (featuresPerWorker), STREAMS, RESPONSES (RESPONSES_PER_S) and LOAD their offsets
  (test/shared/aset/binding-store.test.ts checks they match).
]]
local workers, bindings, expiry, ended, window = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local FEATURES, STREAMS, RESPONSES, LOAD = 18, 0, 1, 2
local tracked = {}
for f = 0, FEATURES - 1 do
  if f ~= RESPONSES then tracked[#tracked + 1] = f end
end
local function names(w, kind)
  local list = {}
  for i, f in ipairs(tracked) do list[i] = w .. ':' .. kind .. f end
  return list
end
-- Moves worker w's integrals up to now. A replica whose clock is behind the last advance adds
-- nothing, so the change lands at the later time instead of running time backwards.
local function integrate(w, now)
  local t = tonumber(redis.call('HGET', workers, w .. ':t'))
  if t ~= nil and now > t then
    local values = redis.call('HMGET', workers, unpack(names(w, 'v')))
    for i, v in ipairs(values) do
      if v then
        local x = tonumber(v)
        if x ~= 0 then
          redis.call('HINCRBYFLOAT', workers, w .. ':i' .. tracked[i], x * (now - t))
        end
      end
    end
  end
  if t == nil or now > t then redis.call('HSET', workers, w .. ':t', now) end
end
local function release(id, now, tombstoneUntil)
  -- An end is remembered even for a stream with no binding (its request still on its way, or
  -- retried after a failure): the request must not bind it afterwards.
  redis.call('ZADD', ended, tombstoneUntil, id)
  redis.call('ZREM', expiry, id)
  local text = redis.call('HGET', bindings, id)
  if not text then return nil end
  local r = cjson.decode(text)
  local w = r.worker
  integrate(w, now)
  local left = tonumber(redis.call('HINCRBYFLOAT', workers, w .. ':v' .. STREAMS, -1))
  if left <= 0 then
    -- Nothing bound: zero the values exactly, so float residue of many +/- cannot build up.
    redis.call('HDEL', workers, unpack(names(w, 'v')))
  else
    redis.call('HINCRBYFLOAT', workers, w .. ':v' .. LOAD, '-' .. r.delta)
    redis.call('HINCRBYFLOAT', workers, w .. ':v' .. r.cell, '-' .. r.rate)
  end
  redis.call('HDEL', bindings, id)
  return text
end
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
`,
);

/** set-policy.lua */
export const setPolicy = luaFile(
  'aset/set-policy',
  `--[[
  Stores the policy chosen for a window of T (shared/aset/binding-store.ts), unless the window
  rolled again since it started.

  Input:
    KEYS[1] aset:{aset:<topology>}:window   \`start\`, \`policy\`, \`r:<w>\` responses per worker
    ARGV[1] start    the window's start, as roll-window.lua returned it
    ARGV[2] policy
  Output:
    1 when stored, else 0
]]
if redis.call('HGET', KEYS[1], 'start') ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'policy', ARGV[2])
return 1
`,
);

/** sweep.lua */
export const sweep = luaFile(
  'aset/sweep',
  `--[[
  Ends bindings whose lease has run out (shared/aset/binding-store.ts), and forgets tombstones
  that have.

  Input:
    KEYS[1] aset:{aset:<topology>}:workers    the workers' features (see includes/prelude.lua)
    KEYS[2] aset:{aset:<topology>}:bindings   stream id -> its binding (JSON)
    KEYS[3] aset:{aset:<topology>}:expiry     stream ids by lease end (ms)
    KEYS[4] aset:{aset:<topology>}:ended      ended stream ids by tombstone end (ms)
    KEYS[5] aset:{aset:<topology>}:window     \`start\`, \`policy\`, \`r:<w>\` responses per worker
    ARGV[1] now              ms
    ARGV[2] limit            bindings at most
    ARGV[3] tombstoneUntil   ms their ids stay refused
  Output:
    how many bindings it ended
]]
--[[
  What the scripts that change the bindings share (shared/aset/binding-store.ts): their five
  keys, in this order, and the functions that keep the workers' features.

  The workers hash: \`<w>:v<f>\` the current value of feature f of worker w, \`<w>:i<f>\` its
  integral (value x ms) since the window started, \`<w>:t\` when it was last advanced. The
  features are a worker's row of eq. (11), as shared/aset/observation.ts lays it out: FEATURES
  per worker (featuresPerWorker), STREAMS, RESPONSES (RESPONSES_PER_S) and LOAD their offsets
  (test/shared/aset/binding-store.test.ts checks they match).
]]
local workers, bindings, expiry, ended, window = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local FEATURES, STREAMS, RESPONSES, LOAD = 18, 0, 1, 2
local tracked = {}
for f = 0, FEATURES - 1 do
  if f ~= RESPONSES then tracked[#tracked + 1] = f end
end
local function names(w, kind)
  local list = {}
  for i, f in ipairs(tracked) do list[i] = w .. ':' .. kind .. f end
  return list
end
-- Moves worker w's integrals up to now. A replica whose clock is behind the last advance adds
-- nothing, so the change lands at the later time instead of running time backwards.
local function integrate(w, now)
  local t = tonumber(redis.call('HGET', workers, w .. ':t'))
  if t ~= nil and now > t then
    local values = redis.call('HMGET', workers, unpack(names(w, 'v')))
    for i, v in ipairs(values) do
      if v then
        local x = tonumber(v)
        if x ~= 0 then
          redis.call('HINCRBYFLOAT', workers, w .. ':i' .. tracked[i], x * (now - t))
        end
      end
    end
  end
  if t == nil or now > t then redis.call('HSET', workers, w .. ':t', now) end
end
local function release(id, now, tombstoneUntil)
  -- An end is remembered even for a stream with no binding (its request still on its way, or
  -- retried after a failure): the request must not bind it afterwards.
  redis.call('ZADD', ended, tombstoneUntil, id)
  redis.call('ZREM', expiry, id)
  local text = redis.call('HGET', bindings, id)
  if not text then return nil end
  local r = cjson.decode(text)
  local w = r.worker
  integrate(w, now)
  local left = tonumber(redis.call('HINCRBYFLOAT', workers, w .. ':v' .. STREAMS, -1))
  if left <= 0 then
    -- Nothing bound: zero the values exactly, so float residue of many +/- cannot build up.
    redis.call('HDEL', workers, unpack(names(w, 'v')))
  else
    redis.call('HINCRBYFLOAT', workers, w .. ':v' .. LOAD, '-' .. r.delta)
    redis.call('HINCRBYFLOAT', workers, w .. ':v' .. r.cell, '-' .. r.rate)
  end
  redis.call('HDEL', bindings, id)
  return text
end
local now, limit, tombstoneUntil = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3]
redis.call('ZREMRANGEBYSCORE', ended, '-inf', now)
local due = redis.call('ZRANGEBYSCORE', expiry, '-inf', now, 'LIMIT', 0, limit)
for _, id in ipairs(due) do release(id, now, tombstoneUntil) end
return #due
`,
);
