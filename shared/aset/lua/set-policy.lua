--[[
  Stores the policy chosen for a window of T (shared/aset/binding-store.ts), unless the window
  rolled again since it started.

  Input:
    KEYS[1] aset:{aset:<topology>}:window   `start`, `policy`, `r:<w>` responses per worker
    ARGV[1] start    the window's start, as roll-window.lua returned it
    ARGV[2] policy
  Output:
    1 when stored, else 0
]]
if redis.call('HGET', KEYS[1], 'start') ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'policy', ARGV[2])
return 1
