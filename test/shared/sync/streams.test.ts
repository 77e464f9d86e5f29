/**
 * The per-(node, service) decision of streams.ts on a real Redis: whatever order and however
 * often the events of a service's life arrive, each node ends where the newest event puts it.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTaskStreams } from '../../../shared/sync/index.js';
import type { Placement } from '../../../shared/sync/index.js';
import { testRedis } from '../../support/redis.js';
import type { TestRedis } from '../../support/redis.js';

const nodes = ['n0', 'n1'] as const;

interface Event {
  readonly generation: number;
  /** Where this generation places the service; ignored by the final delete. */
  readonly on: Readonly<Record<(typeof nodes)[number], boolean>>;
  readonly deleted: boolean;
}

describe('task streams: reordered and redelivered events', () => {
  let redis: TestRedis;
  beforeAll(async () => {
    redis = await testRedis();
  });
  afterAll(() => redis.close());

  /** A service's life: generations 1..n with their placements, then maybe its deletion. */
  const life = fc
    .tuple(
      fc.array(fc.record({ n0: fc.boolean(), n1: fc.boolean() }), { minLength: 1, maxLength: 5 }),
      fc.boolean(),
    )
    .map(([placements, deletedAtEnd]): Event[] => [
      ...placements.map((on, i) => ({ generation: i + 1, on, deleted: false })),
      ...(deletedAtEnd
        ? [{ generation: placements.length, on: placements.at(-1)!, deleted: true }]
        : []),
    ]);

  /** Offers each event to every node, in the order given. */
  const offerAll = async (
    name: string,
    arrivals: ReadonlyArray<{ uid: string; created: string; event: Event }>,
  ) => {
    const streams = createTaskStreams(redis.client, { maxLength: 1000 });
    for (const { uid, created, event } of arrivals) {
      for (const node of nodes) {
        const placement: Placement = event.deleted
          ? 'deleted'
          : event.on[node]
            ? 'present'
            : 'absent';
        await streams.offer(node, {
          namespace: 'p',
          name,
          uid,
          created,
          generation: event.generation,
          resource: { metadata: { name } },
          placement,
        });
      }
    }
  };

  /** Each node holds the service exactly where `last` puts it, at its generation and uid. */
  const expectWhere = async (name: string, uid: string, last: Event, order: string) => {
    for (const node of nodes) {
      const current = await redis.client.hget(`tasks:{${node}}:current`, `p/${name}`);
      const expected = !last.deleted && last.on[node];
      expect(current !== null, `${node} after ${order}`).toBe(expected);
      if (expected) {
        expect(JSON.parse(current!)).toMatchObject({ uid, generation: last.generation });
      }
    }
  };

  it('ends every node where the last event of the life puts it', async () => {
    let run = 0;
    await fc.assert(
      fc.asyncProperty(
        life.chain((events) =>
          fc.tuple(
            fc.constant(events),
            // Every event at least once (a redelivery may repeat it), in any order.
            fc.array(fc.nat(events.length - 1), { maxLength: 4 }).chain((extra) =>
              fc.shuffledSubarray([...events.keys(), ...extra], {
                minLength: events.length + extra.length,
              }),
            ),
          ),
        ),
        async ([events, order]) => {
          run += 1;
          const name = `s${run}`;
          const object = { uid: `u${run}`, created: 't1' };
          await offerAll(
            name,
            order.map((i) => ({ ...object, event: events[i]! })),
          );
          await expectWhere(name, object.uid, events.at(-1)!, JSON.stringify(order));
        },
      ),
      { numRuns: 150 },
    );
  });

  const offerOne = (
    name: string,
    uid: string,
    created: string,
    generation: number,
    placement: Placement,
  ) =>
    createTaskStreams(redis.client, { maxLength: 1000 }).offer('n0', {
      namespace: 'p',
      name,
      uid,
      created,
      generation,
      resource: { metadata: { name } },
      placement,
    });
  const currentUid = async (name: string) => {
    const body = await redis.client.hget('tasks:{n0}:current', `p/${name}`);
    return body === null ? undefined : (JSON.parse(body) as { uid: string }).uid;
  };

  it('lets a service come back to a node it left before states carried a creation time', async () => {
    // What the previous version stored when a service left a node: op|uid|generation.
    await redis.client.hset('tasks:{n0}:versions', 'p/legacy', 'delete|u1|3');
    expect(await offerOne('legacy', 'u1', 't1', 4, 'present')).toMatchObject({
      appended: true,
      operation: 'insert',
    });
    expect(await currentUid('legacy')).toBe('u1');
  });

  it('keeps the live object when another object created in the same second is deleted late', async () => {
    await offerOne('same-second', 'b', 't1', 1, 'present');
    // The earlier object's delete arrives after its successor's add; both have one timestamp.
    expect(await offerOne('same-second', 'a', 't1', 1, 'deleted')).toMatchObject({
      appended: false,
    });
    expect(await offerOne('same-second', 'b', 't1', 2, 'present')).toMatchObject({
      operation: 'update',
    });
    expect(await currentUid('same-second')).toBe('b');
  });

  it('ends with the newer of two objects of one name, however their events interleave', async () => {
    let run = 0;
    const ended = life.map((events) =>
      events.at(-1)!.deleted ? events : [...events, { ...events.at(-1)!, deleted: true }],
    );
    await fc.assert(
      fc.asyncProperty(
        fc.tuple(ended, life).chain(([older, newer]) => {
          const arrivals = [
            ...older.map((event) => ({ uid: 'old', created: 't1', event })),
            ...newer.map((event) => ({ uid: 'new', created: 't2', event })),
          ];
          return fc.tuple(
            fc.constant(newer),
            fc.shuffledSubarray(arrivals, { minLength: arrivals.length }),
          );
        }),
        async ([newer, arrivals]) => {
          run += 1;
          const name = `r${run}`;
          await offerAll(name, arrivals);
          const order = JSON.stringify(
            arrivals.map((a) => [a.uid, a.event.generation, a.event.deleted]),
          );
          await expectWhere(name, 'new', newer.at(-1)!, order);
        },
      ),
      { numRuns: 150 },
    );
  });
});
