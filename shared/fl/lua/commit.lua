--[[
  Ends a claimed round (claim.lua), all at once (shared/fl/round-store.ts): the new model
  version becomes the job's (its bytes are stored before), the round's summary joins the
  capped history, the round's updates go, and the next round opens; or the same round opens
  again (no update arrived by its deadline); or the job finishes. Only the claim's holder
  commits, once: a second commit of the same claim, or one after the lease was taken over,
  changes nothing.

  Input:
    KEYS[1] fl:{fl:<job>}:state     the job's round state (open.lua)
    KEYS[2] fl:{fl:<job>}:round     the round's updates (offer.lua)
    KEYS[3] fl:{fl:<job>}:history   round summaries, newest first (JSON)
    ARGV[1] round
    ARGV[2] token      the claim's token
    ARGV[3] outcome    next (a new version; the next round opens), retry (the same round
                       opens again) or done / failed (the job ends)
    ARGV[4] version    the new model version (next, done); ignored for retry and failed
    ARGV[5] sha        its sha256 (next, done)
    ARGV[6] summary    the round's history entry (JSON), or '' for none
    ARGV[7] selected   JSON list of the next (or retried) round's workers
    ARGV[8] quorum
    ARGV[9] now        ms
    ARGV[10] deadline  ms the next round closes at the latest
    ARGV[11] message   why the job ended ('' otherwise)
    ARGV[12] keep      history entries kept
  Output:
    {'committed', round now} | {'lost'} (not this claim's to commit)
]]
local state, round, history = KEYS[1], KEYS[2], KEYS[3]
local r, token, outcome = tonumber(ARGV[1]), ARGV[2], ARGV[3]
local s = redis.call('HMGET', state, 'status', 'round', 'claim')
if s[1] ~= 'aggregating' or tonumber(s[2]) ~= r or s[3] ~= token then return {'lost'} end
if ARGV[6] ~= '' then
  redis.call('LPUSH', history, ARGV[6])
  redis.call('LTRIM', history, 0, tonumber(ARGV[12]) - 1)
end
redis.call('HDEL', state, 'claim', 'claimUntil', 'closedBy', 'closedAt')
if outcome == 'next' or outcome == 'done' then
  redis.call('HSET', state, 'version', ARGV[4], 'sha', ARGV[5])
end
if outcome == 'retry' then
  redis.call('HSET', state, 'status', 'open', 'selected', ARGV[7], 'quorum', ARGV[8],
    'opened', ARGV[9], 'deadline', ARGV[10])
  return {'committed', r}
end
redis.call('DEL', round)
if outcome == 'next' then
  redis.call('HSET', state, 'status', 'open', 'round', r + 1, 'base', ARGV[4], 'n', 0,
    'selected', ARGV[7], 'quorum', ARGV[8], 'opened', ARGV[9], 'deadline', ARGV[10])
  return {'committed', r + 1}
end
redis.call('HSET', state, 'status', outcome, 'message', ARGV[11], 'finishedAt', ARGV[9])
return {'committed', r}
