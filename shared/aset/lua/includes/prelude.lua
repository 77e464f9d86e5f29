--[[
  What the scripts that change the bindings share (shared/aset/binding-store.ts): their five
  keys, in this order, and the functions that keep the workers' features.

  The workers hash: `<w>:v<f>` the current value of feature f of worker w, `<w>:i<f>` its
  integral (value x ms) since the window started, `<w>:t` when it was last advanced. The
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
