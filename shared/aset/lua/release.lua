--[[
  Ends a stream's binding (shared/aset/binding-store.ts) and refuses its id for a while (a
  tombstone), so a late redelivery of its request cannot bind it again.

  Input:
    KEYS[1] aset:{aset:<topology>}:workers    the workers' features (see includes/prelude.lua)
    KEYS[2] aset:{aset:<topology>}:bindings   stream id -> its binding (JSON)
    KEYS[3] aset:{aset:<topology>}:expiry     stream ids by lease end (ms)
    KEYS[4] aset:{aset:<topology>}:ended      ended stream ids by tombstone end (ms)
    KEYS[5] aset:{aset:<topology>}:window     `start`, `policy`, `r:<w>` responses per worker
    ARGV[1] id               the stream
    ARGV[2] now              ms
    ARGV[3] tombstoneUntil   ms its id stays refused
  Output:
    the binding ended (JSON), or nil when there was none
]]
--- @include "includes/prelude"
local text = release(ARGV[1], tonumber(ARGV[2]), ARGV[3])
if text then return text end
return false
