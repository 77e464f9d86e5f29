/**
 * The edge's consumer on a real Redis, when the capped stream trimmed entries a consumer had read
 * but not acknowledged: they leave the pending list and the loss is reported, not hidden.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTaskConsumer, createTaskStreams } from '../../../shared/sync/index.js';
import { testRedis } from '../../support/redis.js';
import type { TestRedis } from '../../support/redis.js';

describe('task consumer', () => {
  let redis: TestRedis;
  beforeAll(async () => {
    redis = await testRedis();
  });
  afterAll(() => redis.close());

  const stream = (node: string) => `tasks:{${node}}:stream`;
  /** Inserts services s0..s<count-1> on `node`; returns their stream entry ids. */
  const insert = async (node: string, count: number, from = 0) => {
    const streams = createTaskStreams(redis.client, { maxLength: 1000 });
    for (let i = from; i < from + count; i += 1) {
      const name = `s${i}`;
      await streams.offer(node, {
        namespace: 'default',
        name,
        uid: `u${i}`,
        generation: 1,
        resource: { metadata: { name } },
        created: 't1',
        placement: 'present',
      });
    }
    const entries = await redis.client.xrange(stream(node), '-', '+');
    return entries.map(([id]) => id);
  };
  const pendingCount = async (node: string) => {
    const [count] = (await redis.client.xpending(stream(node), 'edge')) as [number];
    return count;
  };
  const names = (tasks: ReadonlyArray<{ name: string }>) => tasks.map((t) => t.name);

  it('acknowledges and counts its own pending entries that were trimmed before it applied them', async () => {
    const ids = await insert('trim-own', 3);
    const consumer = await createTaskConsumer(redis.client, { node: 'trim-own', consumer: 'c' });
    expect(names((await consumer.next(10)).tasks)).toEqual(['s0', 's1', 's2']);
    // The consumer crashes; meanwhile the cap drops an entry it had not acknowledged.
    await redis.client.xdel(stream('trim-own'), ids[1]!);
    const restarted = await createTaskConsumer(redis.client, { node: 'trim-own', consumer: 'c' });
    const batch = await restarted.next(10);
    expect(names(batch.tasks)).toEqual(['s0', 's2']);
    expect(batch.lost).toBe(1);
    expect(await pendingCount('trim-own')).toBe(2);
    await restarted.ack(batch.tasks.map((t) => t.entryId));
    expect(await restarted.next(10, 10)).toEqual({ tasks: [], lost: 0 });
  });

  it('reports a loss at once, without blocking for new entries', async () => {
    await insert('trim-all', 2);
    const consumer = await createTaskConsumer(redis.client, { node: 'trim-all', consumer: 'c' });
    await consumer.next(10);
    await redis.client.xtrim(stream('trim-all'), 'MAXLEN', 0);
    // A new entry arrives while next() runs: a next() that went on to the blocking read of new
    // entries would return it (at once, or when it arrives within the block); one that reports
    // the loss first returns without it. (The block stays under the client's command timeout.)
    const [batch] = await Promise.all([consumer.next(10, 900), insert('trim-all', 1, 2)]);
    expect(batch).toEqual({ tasks: [], lost: 2 });
    expect(await pendingCount('trim-all')).toBe(0);
    expect(names((await consumer.next(10)).tasks)).toEqual(['s2']);
  });

  it('counts the trimmed entries a dead consumer left pending when claiming them', async () => {
    await insert('trim-claim', 2);
    const dead = await createTaskConsumer(redis.client, { node: 'trim-claim', consumer: 'dead' });
    await dead.next(10);
    await redis.client.xtrim(stream('trim-claim'), 'MAXLEN', 0);
    // claimIdleMs 0: every entry another consumer left pending counts as idle (no wait).
    const live = await createTaskConsumer(redis.client, {
      node: 'trim-claim',
      consumer: 'live',
      claimIdleMs: 0,
    });
    expect(await live.next(10)).toEqual({ tasks: [], lost: 2 });
    expect(await pendingCount('trim-claim')).toBe(0);
  });

  it('claims idle entries further down the pending list than one XAUTOCLAIM looks', async () => {
    // XAUTOCLAIM inspects 10 pending entries per COUNT: with COUNT 1, entries 11 and on are
    // reached only by continuing from its cursor.
    const ids = await insert('claim-cursor', 21);
    const busy = await createTaskConsumer(redis.client, { node: 'claim-cursor', consumer: 'busy' });
    expect((await busy.next(21)).tasks).toHaveLength(21);
    // The busy consumer is still working on the first 20 (just delivered: not idle); the last
    // has been idle for an hour, as XCLAIM's IDLE says (Redis's own clock, no waiting).
    await redis.client.xclaim(
      stream('claim-cursor'),
      'edge',
      'busy',
      0,
      ids[20]!,
      'IDLE',
      3_600_000,
    );
    const other = await createTaskConsumer(redis.client, {
      node: 'claim-cursor',
      consumer: 'other',
      claimIdleMs: 60_000,
    });
    const claimed = [];
    for (let call = 0; call < 3; call += 1) claimed.push(...(await other.next(1)).tasks);
    expect(names(claimed)).toEqual(['s20']);
  });
});
