/**
 * Task delivery through Redis: one stream per edge node, consumed by the node with a consumer
 * group (an entry stays pending until acknowledged and is delivered again after a crash). One
 * script per (node, service) decides from the stored version whether the task is new: a
 * redelivered or reordered ApiServerSource event, or a status-only update, appends nothing, and
 * a service can leave a node and come back.
 * `current` holds each service's latest task for a node that starts from nothing.
 */
import type { KubeObject } from '../k8s/index.js';
// The key layout and the record are the edge's contract too (shared/messages/edge-task.ts).
import { nodeKeys } from '../messages/edge-task.js';
import type { EdgeTask } from '../messages/edge-task.js';
import { luaScript, runScript } from '../redis/index.js';
import type { RedisClient } from '../redis/index.js';
import type { Operation, Task } from './task.js';
import { taskVersion } from './task.js';

/** The record stored for the edge: the task without what only this side uses. */
function edgeTaskRecord(task: Omit<Task, 'operation'>): EdgeTask {
  return {
    namespace: task.namespace,
    name: task.name,
    uid: task.uid,
    generation: task.generation,
    resource: task.resource,
  };
}

/*
 * KEYS: stream, versions, current, local-controller, dead. ARGV: service, uid, generation,
 * placement ('present' | 'absent' | 'deleted'), body, maxlen, created (the object's
 * creationTimestamp; RFC 3339 strings of one server order as text).
 *
 * The stored version is "state|uid|generation|created", state one of insert, update (on the
 * node), unplace (the object lives but left this node), delete (the object is gone: terminal for
 * its uid). `dead` keeps each service's last deleted uids, so a late event of a deleted object
 * is recognised even after a successor took the name. Events are reordered and redelivered; the
 * rules only ever move a (node, service) forward:
 * - a lower generation of the stored uid, or an older object (created earlier), is stale;
 * - the stored uid: present and placed -> update when the generation rose; present and unplaced
 *   -> insert (placed again, whatever the generation); absent and placed -> unplace (the stream
 *   says delete); deleted -> delete (a stream entry only if the node still had it);
 * - a newer object of the same name replaces the stored one, whose uid becomes dead;
 * - nothing stored: present -> insert; absent or deleted -> recorded without a stream entry, so
 *   a late, older event cannot place (or revive) it.
 * Returns {appended (0/1), stream operation ('' when none), localControllerUpToDate (0/1),
 * stored version}.
 */
const offerLua = `
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
`;
const offerScript = luaScript(5, offerLua);

interface Offer {
  /** A new entry went into the node's stream. */
  appended: boolean;
  /** The operation this version stands for ('' when nothing is new). */
  operation: Operation | '';
  /** The node's local controller already has this version. */
  localControllerUpToDate: boolean;
  /**
   * The stored version ("state|uid|generation|created"; '' when nothing is stored) to confirm
   * after a local-controller delivery.
   */
  version: string;
}

/*
 * Local-controller deliveries of one (node, service) by racing replicas can land out of order: a
 * replica's POST of generation 2 may reach the LC after another replica delivered and confirmed
 * generation 3. So a delivery always sends the stored version, and is confirmed only if that is
 * still the stored version (compare-and-set). A failed confirmation of an older version means
 * this delivery may have overwritten a newer one: it clears the record (the LC holds an unknown
 * version) and bumps the epoch, so a confirmation of a delivery that was sent before, and may
 * have landed before, fails too. Whoever fails delivers the stored version again.
 *
 * Pending: KEYS versions, current, local-controller, epoch. ARGV service.
 * Returns {stored version ('' when none), 1 when the LC has it, current body, epoch}.
 */
const pendingLua = `
local stored = redis.call('HGET', KEYS[1], ARGV[1])
if not stored then return {'', 1, '', '0'} end
if redis.call('HGET', KEYS[3], ARGV[1]) == stored then return {stored, 1, '', '0'} end
return {stored, 0, redis.call('HGET', KEYS[2], ARGV[1]) or '',
  redis.call('HGET', KEYS[4], ARGV[1]) or '0'}
`;
const pendingScript = luaScript(4, pendingLua);

/*
 * Forget: KEYS local-controller, epoch. ARGV service. A delivery that failed may still land
 * (a timeout): the local controller's record and any confirmation in flight are no longer true.
 */
const forgetScript = luaScript(
  2,
  "redis.call('HDEL', KEYS[1], ARGV[1]) redis.call('HINCRBY', KEYS[2], ARGV[1], 1) return 1",
);

/* Confirm: KEYS versions, local-controller, epoch. ARGV service, version, epoch. Returns 0/1. */
const confirmLua = `
local stored = redis.call('HGET', KEYS[1], ARGV[1])
if stored ~= ARGV[2] then
  redis.call('HDEL', KEYS[2], ARGV[1])
  redis.call('HINCRBY', KEYS[3], ARGV[1], 1)
  return 0
end
if (redis.call('HGET', KEYS[3], ARGV[1]) or '0') ~= ARGV[3] then return 0 end
redis.call('HSET', KEYS[2], ARGV[1], stored)
return 1
`;
const confirmScript = luaScript(3, confirmLua);

/** What a node's local controller is to be sent for a service: the stored version. */
interface LocalControllerPending {
  /** The stored version ("state|uid|generation|created"; '' when nothing is stored). */
  version: string;
  /** The local controller's confirmed version is this one: nothing to send. */
  upToDate: boolean;
  /** The stored resource of an insert or update (a removal keeps none). */
  resource: KubeObject | undefined;
  /** Hand back to confirmLocalController unchanged. */
  epoch: string;
}

/** The local controller's operation for a stored version's state (unplace: a delete). */
function storedOperation(version: string): Operation | undefined {
  const state = version.split('|')[0];
  if (state === 'insert' || state === 'update' || state === 'delete') return state;
  return state === 'unplace' ? 'delete' : undefined;
}

/** Where an event puts the service relative to one node. */
type Placement = 'present' | 'absent' | 'deleted';

interface TaskStreams {
  offer(node: string, task: Omit<Task, 'operation'> & { placement: Placement }): Promise<Offer>;
  /** The version the node's local controller should have now, and whether it is confirmed. */
  localControllerPending(node: string, service: string): Promise<LocalControllerPending>;
  /**
   * Records that the node's local controller acknowledged `pending.version`; false when that is
   * no longer the stored version, or a delivery since `pending` was read may have overwritten
   * it: send the stored version again.
   */
  confirmLocalController(
    node: string,
    service: string,
    pending: Pick<LocalControllerPending, 'version' | 'epoch'>,
  ): Promise<boolean>;
  /** A delivery failed but may still land: the next sync must send the stored version again. */
  forgetLocalController(node: string, service: string): Promise<void>;
}

function createTaskStreams(redis: RedisClient, options: { maxLength: number }): TaskStreams {
  return {
    offer(node, task) {
      const k = nodeKeys(node);
      const service = `${task.namespace}/${task.name}`;
      return runScript(
        redis,
        offerScript,
        [
          k.stream,
          k.versions,
          k.current,
          k.localController,
          k.dead,
          service,
          task.uid,
          String(task.generation),
          task.placement,
          JSON.stringify(edgeTaskRecord(task)),
          String(options.maxLength),
          task.created,
        ],
        (reply) => {
          const [appended, operation, upToDate, version] = reply as [
            number,
            string,
            number,
            string,
          ];
          return {
            appended: appended === 1,
            operation: operation as Operation | '',
            localControllerUpToDate: upToDate === 1,
            version,
          };
        },
      );
    },
    localControllerPending(node, service) {
      const k = nodeKeys(node);
      return runScript(
        redis,
        pendingScript,
        [k.versions, k.current, k.localController, k.localControllerEpoch, service],
        (reply) => {
          const [version, upToDate, body, epoch] = reply as [string, number, string, string];
          const stored =
            body === '' ? undefined : (JSON.parse(body) as { resource: KubeObject }).resource;
          return { version, upToDate: upToDate === 1, resource: stored, epoch };
        },
      );
    },
    confirmLocalController(node, service, pending) {
      const k = nodeKeys(node);
      return runScript(
        redis,
        confirmScript,
        [
          k.versions,
          k.localController,
          k.localControllerEpoch,
          service,
          pending.version,
          pending.epoch,
        ],
        (reply) => reply === 1,
      );
    },
    forgetLocalController(node, service) {
      const k = nodeKeys(node);
      return runScript(
        redis,
        forgetScript,
        [k.localController, k.localControllerEpoch, service],
        () => undefined,
      );
    },
  };
}

export { createTaskStreams, storedOperation, taskVersion };
export type { TaskStreams, Offer, Placement, LocalControllerPending };
