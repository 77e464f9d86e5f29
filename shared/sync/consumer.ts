/**
 * The edge side of task delivery: a node reads its stream through a consumer group. Entries it
 * read but did not acknowledge (it crashed while applying them) come back first on restart, and
 * entries a dead consumer left pending are claimed by a live one after `claimIdleMs`. The stream
 * is capped (XADD MAXLEN ~), so a pending entry can be trimmed before it is applied: it is
 * acknowledged (nothing is left to apply) and counted as lost, and the edge resynchronises from
 * the node's `current` hash.
 */
import { nodeKeys } from '../messages/edge-task.js';
import { runScript } from '../redis/index.js';
import type { RedisClient } from '../redis/index.js';
import { createGroup } from './lua/index.js';
import type { Operation, Task } from './task.js';

interface DeliveredTask extends Task {
  /** Stream entry id: acknowledge it once the task is applied. */
  entryId: string;
}

interface TaskBatch {
  tasks: DeliveredTask[];
  /**
   * Pending entries trimmed from the stream before they were applied (now acknowledged). When
   * above 0, tasks are missing: reload the node's `current` hash.
   */
  lost: number;
}

interface TaskConsumer {
  /**
   * Up to `count` tasks: this consumer's unacknowledged ones, then claimed, then new ones (the
   * blocking read only when nothing was lost, so a resynchronisation is not delayed).
   */
  next(count: number, blockMs?: number): Promise<TaskBatch>;
  ack(entryIds: readonly string[]): Promise<void>;
}

// A pending entry trimmed from the stream comes back with no fields.
type Entry = [id: string, fields: string[] | null];

function decode([entryId, fields]: [string, string[]]): DeliveredTask {
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
  // A script: ioredis does not prefix XGROUP's key (lua/create-group.lua).
  await runScript(redis, createGroup, [stream, group], () => undefined);
  // XAUTOCLAIM looks at a bounded number of pending entries per call: continuing from where the
  // last call stopped reaches entries further down a long pending list.
  let claimCursor = '0-0';
  const ack = async (entryIds: readonly string[]) => {
    if (entryIds.length > 0) await redis.xack(stream, group, ...entryIds);
  };
  /** Live entries decoded; trimmed ones (and `deleted`) acknowledged and counted. */
  const settle = async (entries: Entry[], deleted: readonly string[] = []): Promise<TaskBatch> => {
    const tasks: DeliveredTask[] = [];
    const gone = [...deleted];
    for (const [id, fields] of entries) {
      if (fields === null) gone.push(id);
      else tasks.push(decode([id, fields]));
    }
    await ack(gone);
    return { tasks, lost: gone.length };
  };
  const read = async (id: string, count: number, blockMs?: number) => {
    const args: Array<string | number> = ['GROUP', group, options.consumer, 'COUNT', count];
    if (blockMs !== undefined && id === '>') args.push('BLOCK', blockMs);
    const reply = (await redis.call('XREADGROUP', ...args, 'STREAMS', stream, id)) as Array<
      [string, Entry[]]
    > | null;
    return settle(reply?.[0]?.[1] ?? []);
  };
  return {
    async next(count, blockMs) {
      const own = await read('0', count);
      if (own.tasks.length > 0) return own;
      // Redis 7 returns the ids it found deleted (and drops them from the pending list itself).
      const [cursor, claimed, deleted = []] = (await redis.xautoclaim(
        stream,
        group,
        options.consumer,
        options.claimIdleMs ?? 60_000,
        claimCursor,
        'COUNT',
        count,
      )) as [string, Entry[], string[]?];
      claimCursor = cursor;
      const taken = await settle(claimed, deleted);
      const lost = own.lost + taken.lost;
      if (taken.tasks.length > 0 || lost > 0) return { tasks: taken.tasks, lost };
      return read('>', count, blockMs);
    },
    ack,
  };
}

export { createTaskConsumer };
export type { TaskConsumer, DeliveredTask, TaskBatch };
