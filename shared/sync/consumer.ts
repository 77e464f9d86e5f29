/**
 * The edge side of task delivery: a node reads its stream through a consumer group. Entries it
 * read but did not acknowledge (it crashed while applying them) come back first on restart, and
 * entries a dead consumer left pending are claimed by a live one after `claimIdleMs`.
 */
import { luaScript, runScript } from '../redis/index.js';
import type { RedisClient } from '../redis/index.js';
import { nodeKeys } from './streams.js';
import type { Operation, Task } from './task.js';

interface DeliveredTask extends Task {
  /** Stream entry id: acknowledge it once the task is applied. */
  entryId: string;
}

interface TaskConsumer {
  /** Up to `count` tasks: this consumer's unacknowledged ones, then claimed, then new ones. */
  next(count: number, blockMs?: number): Promise<DeliveredTask[]>;
  ack(entryIds: readonly string[]): Promise<void>;
}

type Entry = [id: string, fields: string[]];

// ioredis does not add its key prefix to XGROUP's key (it sits after a subcommand); a script's
// KEYS are prefixed. An existing group (BUSYGROUP) is what we want.
const createGroup = luaScript(
  1,
  "local ok = redis.pcall('XGROUP', 'CREATE', KEYS[1], ARGV[1], '0', 'MKSTREAM') return 1",
);

function decode([entryId, fields]: Entry): DeliveredTask {
  const map = new Map<string, string>();
  for (let i = 0; i + 1 < fields.length; i += 2) map.set(fields[i]!, fields[i + 1]!);
  const body = JSON.parse(map.get('task') ?? '{}') as Omit<Task, 'operation'>;
  return { ...body, operation: map.get('operation') as Operation, entryId };
}

async function createTaskConsumer(
  redis: RedisClient,
  options: { node: string; group?: string; consumer: string; claimIdleMs?: number },
): Promise<TaskConsumer> {
  const { stream } = nodeKeys(options.node);
  const group = options.group ?? 'edge';
  await runScript(redis, createGroup, [stream, group], () => undefined);
  const read = async (id: string, count: number, blockMs?: number) => {
    const args: Array<string | number> = ['GROUP', group, options.consumer, 'COUNT', count];
    if (blockMs !== undefined && id === '>') args.push('BLOCK', blockMs);
    const reply = (await redis.call('XREADGROUP', ...args, 'STREAMS', stream, id)) as Array<
      [string, Entry[]]
    > | null;
    return (reply?.[0]?.[1] ?? []).filter((entry) => entry[1] !== null).map(decode);
  };
  return {
    async next(count, blockMs) {
      const own = await read('0', count);
      if (own.length > 0) return own;
      const [, claimed] = (await redis.xautoclaim(
        stream,
        group,
        options.consumer,
        options.claimIdleMs ?? 60_000,
        '0',
        'COUNT',
        count,
      )) as [string, Entry[]];
      const live = claimed.filter((entry) => entry[1] !== null);
      if (live.length > 0) return live.map(decode);
      return read('>', count, blockMs);
    },
    async ack(entryIds) {
      if (entryIds.length > 0) await redis.xack(stream, group, ...entryIds);
    },
  };
}

export { createTaskConsumer };
export type { TaskConsumer, DeliveredTask };
