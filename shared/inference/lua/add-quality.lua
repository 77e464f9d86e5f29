--[[
  Adds what a replica saw to its service's quality window (shared/inference/quality-window.ts),
  run through defineIdempotentScript so a resent delta is not counted twice: the delta goes into
  the newest bucket, opening one when it is full; the newest `keep` buckets are kept.

  Input:
    KEYS[1] quality:{<service>}:buckets   the buckets (JSON), oldest first
    KEYS[2] quality:{<service>}:drift     the drift state (field `drifting`: '0' or '1')
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
