--[[
  Runs an effect at most once per delivery (shared/redis/idempotency.ts). The dedupe marker and
  the effect run in one script, so there is no window where the marker exists but the effect
  does not, or the reverse. The effect's script is put in place of the "-- @effect" line below
  and sees its own KEYS and ARGV, as if called directly. Redis does not roll back a script that
  raises, so the effect runs under pcall and a failure removes the marker again: a failed effect
  stays retryable. (Writes an effect made before failing are not undone: effects check first,
  then write.)

  Input:
    KEYS[1] seen:{<tag>}:<n>:<source>:<id>   the delivery's marker, in the effect's keys' slot
    then the effect's KEYS
    ARGV[1] ttl   seconds the marker is kept
    then the effect's ARGV
  Output:
    {0} when the delivery was seen before; {1, the effect's reply} when it applied; else the
    effect's error, its marker removed
]]
local seen = table.remove(KEYS, 1)
local ttl = table.remove(ARGV, 1)
if not redis.call('SET', seen, '1', 'NX', 'EX', ttl) then return {0} end
local function effect()
-- @effect
end
local ok, result = pcall(effect)
-- A failed or refused effect must stay retryable: drop the marker and pass the error on.
local failed = not ok or (type(result) == 'table' and result.err ~= nil)
if failed then redis.call('DEL', seen) end
if not ok and type(result) ~= 'table' then return redis.error_reply(tostring(result)) end
if failed then return result end
return {1, result}
