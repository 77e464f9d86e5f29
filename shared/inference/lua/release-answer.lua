--[[
  A failed answer gives the event's claim back (shared/inference/event-answers.ts), unless the
  claim is no longer the caller's.

  Input:
    KEYS[1] answer:{<scope>}:<event>   the event's answer or claim
    ARGV[1] token   the caller's claim
  Output:
    0
]]
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end return 0
