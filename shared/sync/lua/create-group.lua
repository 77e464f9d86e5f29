--[[
  Creates the consumer group of a node's stream, and the stream (shared/sync/consumer.ts). A
  script because ioredis does not add its key prefix to XGROUP's key (it sits after a
  subcommand), and a script's KEYS are prefixed. An existing group (BUSYGROUP) is what we want.

  Input:
    KEYS[1] tasks:{<node>}:stream   the node's deliveries
    ARGV[1] group                   the consumer group
  Output:
    1
]]
local ok = redis.pcall('XGROUP', 'CREATE', KEYS[1], ARGV[1], '0', 'MKSTREAM') return 1
