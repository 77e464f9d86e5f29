--[[
  Records one worker report in its service's totals (shared/status/counters.ts), run through
  defineIdempotentScript so a redelivered report is not counted twice. Each reporter's
  cumulative counters only move forward, and the totals move by the difference. A reporter's
  counters are keyed by the authenticated node and the role as well as the reporter id the report
  names, so no node can move another node's counters. Only the per-reporter counters expire;
  PERSIST clears the TTL that totals written by earlier versions carry.

  Input:
    KEYS[1] status:{<service>}:reporters   "<node>|<role>|<reporter>|<counter>" -> last value
    KEYS[2] status:{<service>}:totals      the counters, each role's last state, `quality.*`
    ARGV[1] node         the authenticated node
    ARGV[2] reporter     the reporter id the report gives
    ARGV[3] role         'edge' | 'cloud' (checked to run on the node)
    ARGV[4] state        the worker's state
    ARGV[5] exitCode     '' when none
    ARGV[6] message      '' when none
    ARGV[7] reportTime
    ARGV[8] retention    seconds the per-reporter counters are kept
    ARGV[9] counters     how many counters follow, then each as name, value ('' when absent);
                         then '1' or '0' for whether the report carries quality, then its
                         fields as name, value ('' for a field it lacks)
  Output:
    1
]]
local reporters, totals = KEYS[1], KEYS[2]
local node, reporter, role = ARGV[1], ARGV[2], ARGV[3]
local state, exitCode, message, reportTime = ARGV[4], ARGV[5], ARGV[6], ARGV[7]
local retention = ARGV[8]
-- Then the counters as name/value pairs after their number, then '1' or '0' for whether the
-- report carries quality, then its fields as name/value pairs ('' for a field it lacks).
local counters = tonumber(ARGV[9])
local qualityAt = 10 + 2 * counters
-- The node is the authenticated one and the role one it was checked to run; the reporter id
-- is the node's own word. Keying by all three means no node can move another node's counters.
local owner = node .. '|' .. role .. '|' .. reporter
for i = 10, qualityAt - 1, 2 do
  local name, value = ARGV[i], ARGV[i + 1]
  if value ~= '' then
    local field = owner .. '|' .. name
    local current = redis.call('HGET', reporters, field)
    local migrated = false
    if not current then
      -- Counters written before they were keyed by node and role: taken over as this
      -- reporter's baseline, else a worker running across the upgrade would be counted twice.
      local legacy = reporter .. '|' .. name
      current = redis.call('HGET', reporters, legacy)
      if current then
        redis.call('HDEL', reporters, legacy)
        migrated = true
      end
    end
    local old = tonumber(current or '0')
    local new = tonumber(value)
    if new > old then
      redis.call('HSET', reporters, field, value)
      redis.call('HINCRBY', totals, name, new - old)
    elseif migrated then
      redis.call('HSET', reporters, field, current)
    end
  end
end
redis.call('HSET', totals, role .. '.state', state, role .. '.exitCode', exitCode,
  role .. '.message', message, role .. '.reportTime', reportTime)
-- Quality is a snapshot, not a counter: the latest report replaces all of it (a field it lacks
-- is dropped, not kept from an older one). Replicas share the hash, so the latest of any replica
-- stands, and one a slower replica records after it does not take its place.
if ARGV[qualityAt] == '1' then
  local stored = redis.call('HGET', totals, 'quality.reportTime')
  if not stored or stored <= reportTime then
    for i = qualityAt + 1, #ARGV, 2 do
      local field = 'quality.' .. ARGV[i]
      if ARGV[i + 1] == '' then
        redis.call('HDEL', totals, field)
      else
        redis.call('HSET', totals, field, ARGV[i + 1])
      end
    end
    redis.call('HSET', totals, 'quality.reportTime', reportTime)
  end
end
redis.call('EXPIRE', reporters, retention)
redis.call('PERSIST', totals)
return 1
