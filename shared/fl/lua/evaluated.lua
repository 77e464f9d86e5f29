--[[
  Adds a round's evaluation to its history entry (shared/fl/round-store.ts), once the
  aggregator has measured the round's model beside the next round: the entry is replaced only
  if it is still the one the aggregator read, so a commit that moved the history meanwhile
  makes this a no-op the caller tries again.

  Input:
    KEYS[1] fl:{fl:<job>}:history   round summaries, newest first (JSON)
    ARGV[1] index      where the aggregator read the round's entry
    ARGV[2] expected   the entry it read there
    ARGV[3] entry      the entry with the evaluation
  Output:
    1 replaced | 0 the history moved
]]
local history, index = KEYS[1], tonumber(ARGV[1])
if redis.call('LINDEX', history, index) ~= ARGV[2] then return 0 end
redis.call('LSET', history, index, ARGV[3])
return 1
