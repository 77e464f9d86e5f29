/**
 * Task delivery through Redis: one stream per edge node, consumed by the node with a consumer
 * group (an entry stays pending until acknowledged and is delivered again after a crash). One
 * script per (node, service) decides from the stored version whether the task is new: a
 * redelivered or reordered ApiServerSource event, or a status-only update, appends nothing.
 * `current` holds each service's latest task for a node that starts from nothing.
 */
import { hashTag, key, luaScript, runScript } from '../redis/index.js';
import type { RedisClient } from '../redis/index.js';
import type { Operation, Task } from './task.js';
import { taskVersion } from './task.js';

function nodeKeys(node: string) {
  const tag = hashTag(node);
  return {
    stream: key('tasks', tag, 'stream'),
    versions: key('tasks', tag, 'versions'),
    current: key('tasks', tag, 'current'),
    localController: key('tasks', tag, 'local-controller'),
  };
}

/*
 * KEYS: stream, versions, current, local-controller. ARGV: service, uid, generation, deleted
 * ("1"/"0"), body, maxlen. The stored version is "op|uid|generation". Returns
 * {appended (0/1), operation, localControllerUpToDate (0/1)}.
 */
const offerLua = `
local stream, versions, current, lc = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local service, uid, generation, deleted = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4] == '1'
local stored = redis.call('HGET', versions, service)
local op
if stored then
  local sop, suid, sgen = string.match(stored, '^([^|]*)|([^|]*)|(%d+)$')
  sgen = tonumber(sgen)
  if suid == uid then
    if deleted then
      if sop == 'delete' then op = nil else op = 'delete' end
    elseif sop == 'delete' or generation < sgen then
      op = nil
    elseif generation == sgen then
      op = nil
    else
      op = 'update'
    end
  else
    -- Another object of the same name: a delete of the other one is stale.
    if deleted then op = nil else op = 'insert' end
  end
else
  if deleted then op = nil else op = 'insert' end
end
local version = (op or '') .. '|' .. uid .. '|' .. ARGV[3]
if op == nil then
  local delivered = redis.call('HGET', lc, service)
  local want = stored or version
  return {0, '', delivered == want and 1 or 0, want}
end
redis.call('XADD', stream, 'MAXLEN', '~', ARGV[6], '*', 'operation', op, 'service', service,
  'uid', uid, 'generation', ARGV[3], 'task', ARGV[5])
redis.call('HSET', versions, service, version)
if op == 'delete' then redis.call('HDEL', current, service)
else redis.call('HSET', current, service, ARGV[5]) end
return {1, op, 0, version}
`;
const offerScript = luaScript(4, offerLua);

interface Offer {
  /** A new entry went into the node's stream. */
  appended: boolean;
  /** The operation this version stands for ('' when nothing is new). */
  operation: Operation | '';
  /** The node's local controller already has this version. */
  localControllerUpToDate: boolean;
  /** The stored version to confirm after a local-controller delivery. */
  version: string;
}

interface TaskStreams {
  offer(node: string, task: Omit<Task, 'operation'> & { deleted: boolean }): Promise<Offer>;
  /** Records that the node's local controller acknowledged `version`. */
  confirmLocalController(node: string, service: string, version: string): Promise<void>;
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
          service,
          task.uid,
          String(task.generation),
          task.deleted ? '1' : '0',
          JSON.stringify({
            namespace: task.namespace,
            name: task.name,
            uid: task.uid,
            generation: task.generation,
            resource: task.resource,
          }),
          String(options.maxLength),
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
    async confirmLocalController(node, service, version) {
      await redis.hset(nodeKeys(node).localController, service, version);
    },
  };
}

export { createTaskStreams, nodeKeys, taskVersion };
export type { TaskStreams, Offer };
