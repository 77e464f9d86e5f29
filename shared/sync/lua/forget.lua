--[[
  A delivery to a node's local controller failed but may still land (a timeout): its record and
  any confirmation in flight are no longer true (shared/sync/streams.ts).

  Input:
    KEYS[1] tasks:{<node>}:local-controller        service -> the version the local controller has
    KEYS[2] tasks:{<node>}:local-controller-epoch  service -> confirmation epoch
    ARGV[1] service   <namespace>/<name>
  Output:
    1
]]
redis.call('HDEL', KEYS[1], ARGV[1]) redis.call('HINCRBY', KEYS[2], ARGV[1], 1) return 1
