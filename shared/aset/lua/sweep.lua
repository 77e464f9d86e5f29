--[[
  Ends bindings whose lease has run out (shared/aset/binding-store.ts), and forgets tombstones
  that have.

  Input:
    KEYS[1] aset:{aset:<topology>}:workers    the workers' features (see includes/prelude.lua)
    KEYS[2] aset:{aset:<topology>}:bindings   stream id -> its binding (JSON)
    KEYS[3] aset:{aset:<topology>}:expiry     stream ids by lease end (ms)
    KEYS[4] aset:{aset:<topology>}:ended      ended stream ids by tombstone end (ms)
    KEYS[5] aset:{aset:<topology>}:window     `start`, `policy`, `r:<w>` responses per worker
    ARGV[1] now              ms
    ARGV[2] limit            bindings at most
    ARGV[3] tombstoneUntil   ms their ids stay refused
  Output:
    how many bindings it ended
]]
--- @include "includes/prelude"
local now, limit, tombstoneUntil = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3]
redis.call('ZREMRANGEBYSCORE', ended, '-inf', now)
local due = redis.call('ZRANGEBYSCORE', expiry, '-inf', now, 'LIMIT', 0, limit)
for _, id in ipairs(due) do release(id, now, tombstoneUntil) end
return #due
