--[[
  What a node's local controller is to be sent for a service (shared/sync/streams.ts): the
  stored version, whether the local controller is confirmed to have it, and if not the stored
  task and the confirmation epoch to hand back to confirm.lua.

  Input:
    KEYS[1] tasks:{<node>}:versions                service -> stored version
    KEYS[2] tasks:{<node>}:current                 service -> its latest task
    KEYS[3] tasks:{<node>}:local-controller        service -> the version the local controller has
    KEYS[4] tasks:{<node>}:local-controller-epoch  service -> confirmation epoch
    ARGV[1] service   <namespace>/<name>
  Output:
    {stored version ('' when none), 1 when the local controller has it, current body ('' when
    it has it), epoch}
]]
local stored = redis.call('HGET', KEYS[1], ARGV[1])
if not stored then return {'', 1, '', '0'} end
if redis.call('HGET', KEYS[3], ARGV[1]) == stored then return {stored, 1, '', '0'} end
return {stored, 0, redis.call('HGET', KEYS[2], ARGV[1]) or '',
  redis.call('HGET', KEYS[4], ARGV[1]) or '0'}
