// Generated from the .lua files in this folder by `npm run lua`: edit those, then run it.
import { luaFile } from '../../redis/scripts.js';

/** claim.lua */
export const claim = luaFile(
  'fl/claim',
  `--[[
  Claims the open round for aggregation once it is due: its quorum of updates arrived, or its
  deadline passed (shared/fl/round-store.ts). From then on the round takes no update. The claim
  is a lease: an aggregator that dies while aggregating leaves it to run out, and the next
  claim (the restarted aggregator, a tick) aggregates the same stored updates again. Only the
  claim's holder can commit (commit.lua), so nothing is counted twice.

  Input:
    KEYS[1] fl:{fl:<job>}:state   the job's round state (open.lua)
    ARGV[1] round   the round to claim
    ARGV[2] token   the claimer's token
    ARGV[3] now     ms
    ARGV[4] lease   ms the claim holds
  Output:
    {'claimed', closedBy, n} (closedBy: all, quorum or deadline) | {'waiting', n, quorum,
    deadline} | {'busy', claimUntil} | {'stale', round} | {'finished', status}
]]
local state = KEYS[1]
local r, token, now, lease = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local s = redis.call('HMGET', state, 'status', 'round', 'n', 'quorum', 'deadline', 'selected',
  'claimUntil', 'closedBy')
local status, n, quorum, deadline = s[1], tonumber(s[3]), tonumber(s[4]), tonumber(s[5])
if not status then return {'stale', 0} end
if status == 'done' or status == 'failed' then return {'finished', status} end
if tonumber(s[2]) ~= r then return {'stale', tonumber(s[2])} end
if status == 'aggregating' then
  if tonumber(s[7]) > now then return {'busy', tonumber(s[7])} end
  redis.call('HSET', state, 'claim', token, 'claimUntil', now + lease)
  return {'claimed', s[8], n}
end
local selected = #cjson.decode(s[6])
local closedBy
if n >= selected then closedBy = 'all'
elseif n >= quorum then closedBy = 'quorum'
elseif now >= deadline then closedBy = 'deadline'
else return {'waiting', n, quorum, deadline} end
redis.call('HSET', state, 'status', 'aggregating', 'claim', token, 'claimUntil', now + lease,
  'closedBy', closedBy, 'closedAt', now)
return {'claimed', closedBy, n}
`,
);

/** commit.lua */
export const commit = luaFile(
  'fl/commit',
  `--[[
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
`,
);

/** evaluated.lua */
export const evaluated = luaFile(
  'fl/evaluated',
  `--[[
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
`,
);

/** offer.lua */
export const offer = luaFile(
  'fl/offer',
  `--[[
  Accepts one trainer's update for the open round, at most once (shared/fl/round-store.ts). The
  update names its round and the model version it trained from: one for another round, or
  trained from another version, is refused with the reason, and so is one from a worker the
  round did not select. An update resent (a retry, a redelivery) is a duplicate, counted once,
  whether its round is still open, being aggregated or committed.

  Asynchronous (FedBuff) rounds, ARGV[7] set: a round is a buffer any trainer of the job adds to,
  and an update is known by its worker and the version it trained from (whatever round it was
  told): one trained from the open round's base or up to ARGV[7] versions before it is accepted,
  an older one is refused (stale-base), a newer one too (future); a worker adds one update per
  buffer (buffered); the same worker and version again is a duplicate.

  Input:
    KEYS[1] fl:{fl:<job>}:state     the job's round state (open.lua)
    KEYS[2] fl:{fl:<job>}:round     the open round's updates: m:<worker> meta, w:<worker> weights
    KEYS[3] fl:{fl:<job>}:workers   per worker: <w>:accepted, <w>:refused, <w>:lastRound, <w>:lastSeen
    ARGV[1] round
    ARGV[2] worker
    ARGV[3] base      the model version the update trained from
    ARGV[4] meta      the update's metadata (JSON)
    ARGV[5] weights   the update's encoded weights
    ARGV[6] now       ms
    ARGV[7] maxStaleness   asynchronous rounds only ('' for synchronous ones)
  Output:
    {'accepted', n, quorum, selected, round} | {'duplicate', n} | {'refused', reason, detail}
    (round: the open round it joined, which an asynchronous update need not name)
    reason: unknown-job, finished, late, future, closed, stale-base, not-selected, buffered
]]
local state, round, workers = KEYS[1], KEYS[2], KEYS[3]
local r, worker, base, now = tonumber(ARGV[1]), ARGV[2], ARGV[3], ARGV[6]
local async = ARGV[7] ~= ''
local s = redis.call('HMGET', state, 'status', 'round', 'base', 'selected', 'quorum', 'n')
local status, current = s[1], tonumber(s[2])
redis.call('HSET', workers, worker .. ':lastSeen', now)
local last = async and (worker .. ':lastBase') or (worker .. ':lastRound')
if status and redis.call('HGET', workers, last) == (async and base or tostring(r)) then
  return {'duplicate', tonumber(s[6])}
end
local function refuse(reason, detail)
  redis.call('HINCRBY', workers, worker .. ':refused', 1)
  return {'refused', reason, detail}
end
if not status then return refuse('unknown-job', '') end
if status == 'done' or status == 'failed' then return refuse('finished', status) end
if async then
  local behind = tonumber(s[3]) - tonumber(base)
  if behind < 0 then return refuse('future', s[3]) end
  if behind > tonumber(ARGV[7]) then return refuse('stale-base', s[3]) end
  if status ~= 'open' then return refuse('closed', status) end
  if redis.call('HEXISTS', round, 'm:' .. worker) == 1 then return refuse('buffered', '') end
  redis.call('HSET', round, 'm:' .. worker, ARGV[4], 'w:' .. worker, ARGV[5])
  local n = redis.call('HINCRBY', state, 'n', 1)
  redis.call('HINCRBY', workers, worker .. ':accepted', 1)
  redis.call('HSET', workers, worker .. ':lastRound', current, worker .. ':lastBase', base)
  return {'accepted', n, tonumber(s[5]), #cjson.decode(s[4]), current}
end
if r < current then return refuse('late', tostring(current)) end
if r > current then return refuse('future', tostring(current)) end
if status ~= 'open' then return refuse('closed', status) end
if base ~= s[3] then return refuse('stale-base', s[3]) end
local chosen = false
for _, name in ipairs(cjson.decode(s[4])) do
  if name == worker then chosen = true end
end
if not chosen then return refuse('not-selected', '') end
redis.call('HSET', round, 'm:' .. worker, ARGV[4], 'w:' .. worker, ARGV[5])
local n = redis.call('HINCRBY', state, 'n', 1)
redis.call('HINCRBY', workers, worker .. ':accepted', 1)
redis.call('HSET', workers, worker .. ':lastRound', r)
return {'accepted', n, tonumber(s[5]), #cjson.decode(s[4]), current}
`,
);

/** open.lua */
export const open = luaFile(
  'fl/open',
  `--[[
  Starts a federated job's rounds, or finds them started (shared/fl/round-store.ts). The first
  call writes round 1, open, training from model version 0; every later call (an aggregator
  restarted, a second replica) leaves the state as it is and returns it, so a job resumes from
  its last completed round instead of starting again.

  The state hash: \`status\` (open, aggregating, done, failed), \`round\`, \`base\` (the model version
  the round trains from), \`version\` and \`sha\` (the latest model), \`selected\` (JSON list of the
  round's workers), \`quorum\`, \`n\` (updates accepted), \`opened\`, \`deadline\` (ms), and while a
  round is aggregated \`claim\`, \`claimUntil\`, \`closedBy\`, \`closedAt\`; \`message\` once finished.

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
`,
);
