--[[
  Adds routers to a prediction's path (shared/mlgraph/path-store.ts): one key, so the set and
  its expiry change together. Each prediction's key has its own slot on a cluster, so a busy
  graph's paths spread out.

  Input:
    KEYS[1] mlgraph:{path:<graph>:<puid>}:path   the routers the prediction went through
    ARGV[1] ttl   ms the path is kept
    ARGV[2..] the routers
  Output:
    1
]]
for i = 2, #ARGV do redis.call('SADD', KEYS[1], ARGV[i]) end
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return 1
