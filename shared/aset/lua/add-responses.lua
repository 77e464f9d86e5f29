--[[
  Adds delivered responses per worker to the current window (shared/aset/binding-store.ts), run
  through defineIdempotentScript so a redelivered monitoring report is not counted twice.

  Input:
    KEYS[1] aset:{aset:<topology>}:window   `start`, `policy`, `r:<w>` responses per worker
    ARGV[1..] worker, responses pairs
  Output:
    1
]]
for i = 1, #ARGV, 2 do
  redis.call('HINCRBYFLOAT', KEYS[1], 'r:' .. ARGV[i], ARGV[i + 1])
end
return 1
