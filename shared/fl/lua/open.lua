--[[
  Starts a federated job's rounds, or finds them started (shared/fl/round-store.ts). The first
  call writes round 1, open, training from model version 0; every later call (an aggregator
  restarted, a second replica) leaves the state as it is and returns it, so a job resumes from
  its last completed round instead of starting again.

  The state hash: `status` (open, aggregating, done, failed), `round`, `base` (the model version
  the round trains from), `version` and `sha` (the latest model), `selected` (JSON list of the
  round's workers), `quorum`, `n` (updates accepted), `opened`, `deadline` (ms), and while a
  round is aggregated `claim`, `claimUntil`, `closedBy`, `closedAt`; `message` once finished.

  Input:
    KEYS[1] fl:{fl:<job>}:state   the job's round state
    ARGV[1] selected   JSON list of round 1's workers
    ARGV[2] quorum     updates that close round 1
    ARGV[3] now        ms
    ARGV[4] deadline   ms round 1 closes at the latest
    ARGV[5] sha        sha256 of model version 0
  Output:
    {'created' | 'existing', state fields as a flat list}
]]
local state = KEYS[1]
if redis.call('EXISTS', state) == 1 then return {'existing', redis.call('HGETALL', state)} end
redis.call('HSET', state, 'status', 'open', 'round', 1, 'base', 0, 'version', 0,
  'sha', ARGV[5], 'selected', ARGV[1], 'quorum', ARGV[2], 'n', 0,
  'opened', ARGV[3], 'deadline', ARGV[4])
return {'created', redis.call('HGETALL', state)}
