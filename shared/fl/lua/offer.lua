--[[
  Accepts one trainer's update for the open round, at most once (shared/fl/round-store.ts). The
  update names its round and the model version it trained from: one for another round, or
  trained from another version, is refused with the reason, and so is one from a worker the
  round did not select. An update resent (a retry, a redelivery) is a duplicate, counted once,
  whether its round is still open, being aggregated or committed.

  Asynchronous (FedBuff) rounds, ARGV[7] set: a round is a buffer any trainer of the job adds to,
  and an update is known by its worker and the version it trained from (whatever round it was
  told): one trained from the open round's base or up to ARGV[7] versions before it is accepted,
  an older one is refused (stale-base), a newer one too (future); a worker adds one update per
  buffer (buffered); the same worker and version again is a duplicate.

  Input:
    KEYS[1] fl:{fl:<job>}:state     the job's round state (open.lua)
    KEYS[2] fl:{fl:<job>}:round     the open round's updates: m:<worker> meta, w:<worker> weights
    KEYS[3] fl:{fl:<job>}:workers   per worker: <w>:accepted, <w>:refused, <w>:lastRound, <w>:lastSeen
    ARGV[1] round
    ARGV[2] worker
    ARGV[3] base      the model version the update trained from
    ARGV[4] meta      the update's metadata (JSON)
    ARGV[5] weights   the update's encoded weights
    ARGV[6] now       ms
    ARGV[7] maxStaleness   asynchronous rounds only ('' for synchronous ones)
  Output:
    {'accepted', n, quorum, selected, round} | {'duplicate', n} | {'refused', reason, detail}
    (round: the open round it joined, which an asynchronous update need not name)
    reason: unknown-job, finished, late, future, closed, stale-base, not-selected, buffered
]]
local state, round, workers = KEYS[1], KEYS[2], KEYS[3]
local r, worker, base, now = tonumber(ARGV[1]), ARGV[2], ARGV[3], ARGV[6]
local async = ARGV[7] ~= ''
local s = redis.call('HMGET', state, 'status', 'round', 'base', 'selected', 'quorum', 'n')
local status, current = s[1], tonumber(s[2])
redis.call('HSET', workers, worker .. ':lastSeen', now)
local last = async and (worker .. ':lastBase') or (worker .. ':lastRound')
if status and redis.call('HGET', workers, last) == (async and base or tostring(r)) then
  return {'duplicate', tonumber(s[6])}
end
local function refuse(reason, detail)
  redis.call('HINCRBY', workers, worker .. ':refused', 1)
  return {'refused', reason, detail}
end
if not status then return refuse('unknown-job', '') end
if status == 'done' or status == 'failed' then return refuse('finished', status) end
if async then
  local behind = tonumber(s[3]) - tonumber(base)
  if behind < 0 then return refuse('future', s[3]) end
  if behind > tonumber(ARGV[7]) then return refuse('stale-base', s[3]) end
  if status ~= 'open' then return refuse('closed', status) end
  if redis.call('HEXISTS', round, 'm:' .. worker) == 1 then return refuse('buffered', '') end
  redis.call('HSET', round, 'm:' .. worker, ARGV[4], 'w:' .. worker, ARGV[5])
  local n = redis.call('HINCRBY', state, 'n', 1)
  redis.call('HINCRBY', workers, worker .. ':accepted', 1)
  redis.call('HSET', workers, worker .. ':lastRound', current, worker .. ':lastBase', base)
  return {'accepted', n, tonumber(s[5]), #cjson.decode(s[4]), current}
end
if r < current then return refuse('late', tostring(current)) end
if r > current then return refuse('future', tostring(current)) end
if status ~= 'open' then return refuse('closed', status) end
if base ~= s[3] then return refuse('stale-base', s[3]) end
local chosen = false
for _, name in ipairs(cjson.decode(s[4])) do
  if name == worker then chosen = true end
end
if not chosen then return refuse('not-selected', '') end
redis.call('HSET', round, 'm:' .. worker, ARGV[4], 'w:' .. worker, ARGV[5])
local n = redis.call('HINCRBY', state, 'n', 1)
redis.call('HINCRBY', workers, worker .. ':accepted', 1)
redis.call('HSET', workers, worker .. ':lastRound', r)
return {'accepted', n, tonumber(s[5]), #cjson.decode(s[4]), current}
