--[[
  Offers one event's version of a service to an edge node (shared/sync/streams.ts): decides from
  the stored version whether it is new for the node, and if so appends it to the node's stream.
  A redelivered or reordered ApiServerSource event, or a status-only update, appends nothing,
  and a service can leave a node and come back.

  The stored version is "state|uid|generation|created", state one of insert, update (on the
  node), unplace (the object lives but left this node), delete (the object is gone: terminal for
  its uid). `dead` keeps each service's last deleted uids, so a late event of a deleted object
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
