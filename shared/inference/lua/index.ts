// Generated from the .lua files in this folder by `npm run lua`: edit those, then run it.
import { luaFile } from '../../redis/scripts.js';

/** add-quality.lua */
export const addQuality = luaFile(
  'inference/add-quality',
  `--[[
  Adds what a replica saw to its service's quality window (shared/inference/quality-window.ts),
  run through defineIdempotentScript so a resent delta is not counted twice: the delta goes into
  the newest bucket, opening one when it is full; the newest \`keep\` buckets are kept.

  Input:
    KEYS[1] quality:{<service>}:buckets   the buckets (JSON), oldest first
    KEYS[2] quality:{<service>}:drift     the drift state (field \`drifting\`: '0' or '1')
    ARGV[1] delta   a bucket (JSON)
    ARGV[2] size    inputs per bucket
    ARGV[3] keep    buckets kept
    ARGV[4] ttl     seconds both keys are kept
  Output:
    {the buckets, oldest first, the drift state}
]]
local d = cjson.decode(ARGV[1])
local size, keep, ttl = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local last = redis.call('LINDEX', KEYS[1], -1)
local b = last and cjson.decode(last)
if (not b) or b.i >= size then
  b = {t = {}, n = {}, k = {}, i = 0, s = 0, o = 0, r = 0}
  for j = 1, #d.t do b.t[j] = 0; b.n[j] = 0; b.k[j] = 0 end
  redis.call('RPUSH', KEYS[1], '')
end
for j = 1, #d.t do
  b.t[j] = b.t[j] + d.t[j]; b.n[j] = b.n[j] + d.n[j]; b.k[j] = b.k[j] + d.k[j]
end
b.i = b.i + d.i; b.s = b.s + d.s; b.o = b.o + d.o
redis.call('LSET', KEYS[1], -1, cjson.encode(b))
redis.call('LTRIM', KEYS[1], -keep, -1)
redis.call('EXPIRE', KEYS[1], ttl)
redis.call('EXPIRE', KEYS[2], ttl)
return {redis.call('LRANGE', KEYS[1], 0, -1), redis.call('HGET', KEYS[2], 'drifting') or '0'}
`,
);

/** add-scores.lua */
export const addScores = luaFile(
  'inference/add-scores',
  `--[[
  Adds a replica's hardness scores to its service's shared window (shared/inference/budget.ts):
  appends them, trims to the newest \`window\`, and returns them all.

  Input:
    KEYS[1] budget:{<service>}:hardness   the window (a list, newest last)
    ARGV[1] window   scores the window keeps
    ARGV[2..] the new scores
  Output:
    the window's scores, oldest first
]]
local n = #ARGV
if n > 1 then
  redis.call('RPUSH', KEYS[1], unpack(ARGV, 2, n))
  redis.call('LTRIM', KEYS[1], -tonumber(ARGV[1]), -1)
end
redis.call('EXPIRE', KEYS[1], 86400)
return redis.call('LRANGE', KEYS[1], 0, -1)
`,
);

/** claim-answer.lua */
export const claimAnswer = luaFile(
  'inference/claim-answer',
  `--[[
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
`,
);

/** flip-drift.lua */
export const flipDrift = luaFile(
  'inference/flip-drift',
  `--[[
  Flips a service's drift state (shared/inference/quality-window.ts), only if nobody flipped it
  first, so one reset per change however many replicas see it; opens a bucket marked as a reset.

  Input:
    KEYS[1] quality:{<service>}:buckets   the buckets (JSON), oldest first
    KEYS[2] quality:{<service>}:drift     the drift state (field \`drifting\`: '0' or '1')
    ARGV[1] from    the drift state the caller saw ('0' or '1')
    ARGV[2] to      the new one
    ARGV[3] bucket  an empty bucket marked as a reset (JSON)
    ARGV[4] keep    buckets kept
    ARGV[5] ttl     seconds both keys are kept
  Output:
    1 when flipped, else 0
]]
if (redis.call('HGET', KEYS[2], 'drifting') or '0') ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[2], 'drifting', ARGV[2])
redis.call('RPUSH', KEYS[1], ARGV[3])
redis.call('LTRIM', KEYS[1], -tonumber(ARGV[4]), -1)
redis.call('EXPIRE', KEYS[1], ARGV[5])
redis.call('EXPIRE', KEYS[2], ARGV[5])
return 1
`,
);

/** release-answer.lua */
export const releaseAnswer = luaFile(
  'inference/release-answer',
  `--[[
  A failed answer gives the event's claim back (shared/inference/event-answers.ts), unless the
  claim is no longer the caller's.

  Input:
    KEYS[1] answer:{<scope>}:<event>   the event's answer or claim
    ARGV[1] token   the caller's claim
  Output:
    0
]]
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end return 0
`,
);

/** renew-answer.lua */
export const renewAnswer = luaFile(
  'inference/renew-answer',
  `--[[
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
`,
);
