--[[
  The owner of an event's claim extends its lease (shared/inference/event-answers.ts); a claim
  that lapsed (and may be someone else's now) is left alone.

  Input:
    KEYS[1] answer:{<scope>}:<event>   the event's answer or claim
    ARGV[1] lease   seconds the claim lasts from now
    ARGV[2] token   the owner's claim
  Output:
    1 when renewed, else 0
]]
if redis.call('GET', KEYS[1]) == ARGV[2] then return redis.call('EXPIRE', KEYS[1], ARGV[1]) end return 0
