--[[
  Marks a claimed join as handed out as a partial (shared/mlgraph/join-store.ts), unless the
  claim was lost (its lease ran out and another replica took it over).

  Input:
    KEYS[1] mlgraph:{mlgraph:<node>}:join:<puid>   the transaction's join
    KEYS[2] mlgraph:{mlgraph:<node>}:deadlines     open joins by deadline (ms)
    ARGV[1] puid
    ARGV[2] claim   the caller's token
    ARGV[3] keep    ms the ended join is kept
  Output:
    1 when finished, 0 when the claim was lost
]]
if redis.call('HGET', KEYS[1], 'claim') ~= ARGV[2] then return 0 end
redis.call('HSET', KEYS[1], 'state', 'partial')
redis.call('HDEL', KEYS[1], 'claim')
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1
