--[[
  Atomic "get or claim" of one inference event's answer (shared/inference/event-answers.ts): the
  stored answer or claim, or nothing, and then the event is claimed for the caller.

  Input:
    KEYS[1] answer:{<scope>}:<event>   the event's answer (JSON) or claim ('claimed:<token>')
    ARGV[1] lease   seconds the claim lasts
    ARGV[2] token   the caller's claim
  Output:
    {0, stored answer or claim} when there was one, else {1} (claimed)
]]
local stored = redis.call('GET', KEYS[1])
if stored then return {0, stored} end
redis.call('SET', KEYS[1], ARGV[2], 'EX', ARGV[1])
return {1}
