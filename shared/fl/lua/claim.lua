--[[
  Claims the open round for aggregation once it is due: its quorum of updates arrived, or its
  deadline passed (shared/fl/round-store.ts). From then on the round takes no update. The claim
  is a lease: an aggregator that dies while aggregating leaves it to run out, and the next
  claim (the restarted aggregator, a tick) aggregates the same stored updates again. Only the
  claim's holder can commit (commit.lua), so nothing is counted twice.

  Input:
    KEYS[1] fl:{fl:<job>}:state   the job's round state (open.lua)
    ARGV[1] round   the round to claim
    ARGV[2] token   the claimer's token
    ARGV[3] now     ms
    ARGV[4] lease   ms the claim holds
  Output:
    {'claimed', closedBy, n} (closedBy: all, quorum or deadline) | {'waiting', n, quorum,
    deadline} | {'busy', claimUntil} | {'stale', round} | {'finished', status}
]]
local state = KEYS[1]
local r, token, now, lease = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local s = redis.call('HMGET', state, 'status', 'round', 'n', 'quorum', 'deadline', 'selected',
  'claimUntil', 'closedBy')
local status, n, quorum, deadline = s[1], tonumber(s[3]), tonumber(s[4]), tonumber(s[5])
if not status then return {'stale', 0} end
if status == 'done' or status == 'failed' then return {'finished', status} end
if tonumber(s[2]) ~= r then return {'stale', tonumber(s[2])} end
if status == 'aggregating' then
  if tonumber(s[7]) > now then return {'busy', tonumber(s[7])} end
  redis.call('HSET', state, 'claim', token, 'claimUntil', now + lease)
  return {'claimed', s[8], n}
end
local selected = #cjson.decode(s[6])
local closedBy
if n >= selected then closedBy = 'all'
elseif n >= quorum then closedBy = 'quorum'
elseif now >= deadline then closedBy = 'deadline'
else return {'waiting', n, quorum, deadline} end
redis.call('HSET', state, 'status', 'aggregating', 'claim', token, 'claimUntil', now + lease,
  'closedBy', closedBy, 'closedAt', now)
return {'claimed', closedBy, n}
