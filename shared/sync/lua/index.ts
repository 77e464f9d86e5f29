// Generated from the .lua files in this folder by `npm run lua`: edit those, then run it.
import { luaFile } from '../../redis/scripts.js';

/** confirm.lua */
export const confirm = luaFile(
  'sync/confirm',
  `--[[
  Confirms that a node's local controller got a version (shared/sync/streams.ts), compare-and-set:
  only if it is still the stored version and no delivery since pending.lua was read may have
  overwritten it (the epoch). A failed confirmation of an older version clears the record (the
  local controller holds an unknown version) and bumps the epoch.

  Input:
    KEYS[1] tasks:{<node>}:versions                service -> stored version
    KEYS[2] tasks:{<node>}:local-controller        service -> the version the local controller has
    KEYS[3] tasks:{<node>}:local-controller-epoch  service -> confirmation epoch
    ARGV[1] service   <namespace>/<name>
    ARGV[2] version   the version delivered
    ARGV[3] epoch     the epoch pending.lua returned
  Output:
    1 when confirmed, else 0 (send the stored version again)
]]
local stored = redis.call('HGET', KEYS[1], ARGV[1])
if stored ~= ARGV[2] then
  redis.call('HDEL', KEYS[2], ARGV[1])
  redis.call('HINCRBY', KEYS[3], ARGV[1], 1)
  return 0
end
if (redis.call('HGET', KEYS[3], ARGV[1]) or '0') ~= ARGV[3] then return 0 end
redis.call('HSET', KEYS[2], ARGV[1], stored)
return 1
`,
);

/** create-group.lua */
export const createGroup = luaFile(
  'sync/create-group',
  `--[[
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
`,
);

/** forget.lua */
export const forget = luaFile(
  'sync/forget',
  `--[[
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
`,
);

/** offer.lua */
export const offer = luaFile(
  'sync/offer',
  `--[[
  Offers one event's version of a service to an edge node (shared/sync/streams.ts): decides from
  the stored version whether it is new for the node, and if so appends it to the node's stream.
  A redelivered or reordered ApiServerSource event, or a status-only update, appends nothing,
  and a service can leave a node and come back.

  The stored version is "state|uid|generation|created", state one of insert, update (on the
  node), unplace (the object lives but left this node), delete (the object is gone: terminal for
  its uid). \`dead\` keeps each service's last deleted uids, so a late event of a deleted object
  is recognised even after a successor took the name. Events are reordered and redelivered; the
  rules only ever move a (node, service) forward:
  - a lower generation of the stored uid, or an older object (created earlier), is stale;
  - the stored uid: present and placed -> update when the generation rose; present and unplaced
    -> insert (placed again, whatever the generation); absent and placed -> unplace (the stream
    says delete); deleted -> delete (a stream entry only if the node still had it);
  - a newer object of the same name replaces the stored one, whose uid becomes dead;
  - nothing stored: present -> insert; absent or deleted -> recorded without a stream entry, so
    a late, older event cannot place (or revive) it.

  Input:
    KEYS[1] tasks:{<node>}:stream            the node's deliveries (XADD MAXLEN ~)
    KEYS[2] tasks:{<node>}:versions          service -> stored version
    KEYS[3] tasks:{<node>}:current           service -> its latest task, for a node that
                                             starts from nothing
    KEYS[4] tasks:{<node>}:local-controller  service -> the version the local controller has
    KEYS[5] tasks:{<node>}:dead              service -> its last deleted uids (space-separated)
    ARGV[1] service     <namespace>/<name>
    ARGV[2] uid
    ARGV[3] generation
    ARGV[4] placement   'present' | 'absent' | 'deleted'
    ARGV[5] body        the task record (JSON)
    ARGV[6] maxlen      the stream's cap
    ARGV[7] created     the object's creationTimestamp (RFC 3339 strings of one server order as
                        text)
  Output:
    {appended (0/1), stream operation ('' when none), localControllerUpToDate (0/1), stored
    version ('' when none)}
]]
local stream, versions, current, lc, deadKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local service, uid, generation, placement = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4]
local created = ARGV[7]
local deadList = redis.call('HGET', deadKey, service) or ''
local function isDead(u)
  for d in string.gmatch(deadList, '[^ ]+') do if d == u then return true end end
  return false
end
local function bury(u)
  if isDead(u) then return end
  local kept = {}
  for d in string.gmatch(deadList, '[^ ]+') do kept[#kept + 1] = d end
  kept[#kept + 1] = u
  while #kept > 8 do table.remove(kept, 1) end
  deadList = table.concat(kept, ' ')
  redis.call('HSET', deadKey, service, deadList)
end
local stored = redis.call('HGET', versions, service)
local sstate, suid, sgen, screated
if stored then
  sstate, suid, sgen, screated = string.match(stored, '^([^|]*)|([^|]*)|(%d+)|?(.*)$')
  sgen = tonumber(sgen)
  -- Written before states had a creation time (op|uid|generation): a delete then also meant
  -- "left this node", and a service must be able to come back to a node it left.
  if sstate == 'delete' and select(2, string.gsub(stored, '|', '|')) == 2 and not isDead(suid) then
    sstate = 'unplace'
  end
end
local placed = sstate == 'insert' or sstate == 'update'
-- state: the new stored state (nil: nothing changes); op: the stream entry (nil: none).
local state, op
if placement == 'deleted' then bury(uid) end
if isDead(uid) and placement ~= 'deleted' then
  state = nil
elseif not stored then
  if placement == 'present' then state, op = 'insert', 'insert'
  elseif placement == 'deleted' then state = 'delete'
  else state = 'unplace' end
elseif suid == uid then
  if sstate == 'delete' then state = nil
  elseif placement == 'deleted' then
    state = 'delete'
    if placed then op = 'delete' end
  elseif generation < sgen then state = nil
  elseif placement == 'present' then
    if not placed then state, op = 'insert', 'insert'
    elseif generation > sgen then state, op = 'update', 'update' end
  elseif placed then state, op = 'unplace', 'delete'
  elseif generation > sgen then state = 'unplace' end
elseif created < screated or (created == screated and placement == 'deleted') then
  -- An older object's event; or, created in the same second (timestamps have seconds), the
  -- delete of another object than the stored one, which its own delete will remove.
  state = nil
else
  -- A newer object of the same name: the stored one is gone. Created in the same second, which
  -- is newer is unknown: replace, but bury nothing, so the live object's next event wins.
  if created > screated then bury(suid) end
  if placement == 'present' then state, op = 'insert', 'insert'
  elseif placement == 'deleted' then
    state = 'delete'
    if placed then op = 'delete' end
  else
    state = 'unplace'
    if placed then op = 'delete' end
  end
end
local delivered = redis.call('HGET', lc, service)
if state == nil then
  if not stored then return {0, '', 1, ''} end
  return {0, '', delivered == stored and 1 or 0, stored}
end
local version = state .. '|' .. uid .. '|' .. ARGV[3] .. '|' .. created
redis.call('HSET', versions, service, version)
if op then
  redis.call('XADD', stream, 'MAXLEN', '~', ARGV[6], '*', 'operation', op, 'service', service,
    'uid', uid, 'generation', ARGV[3], 'task', ARGV[5])
end
if state == 'insert' or state == 'update' then redis.call('HSET', current, service, ARGV[5])
else redis.call('HDEL', current, service) end
-- Nothing for the local controller to learn: it never had the object, or already got its removal.
if not op and (not stored or not placed) and (not stored or delivered == stored) then
  redis.call('HSET', lc, service, version)
  return {0, '', 1, version}
end
return {op and 1 or 0, op or '', 0, version}
`,
);

/** pending.lua */
export const pending = luaFile(
  'sync/pending',
  `--[[
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
`,
);
