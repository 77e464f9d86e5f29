/**
 * The ML graph's router rewards and joins while Redis fails over: router replicas reward every
 * prediction (each reward sent twice, to two replicas, as a redelivery would), and joiner
 * replicas collect three inputs per transaction; the master holding the node's slot is SIGKILLed
 * in the middle. Every reward must be counted once, and every join completed once or handed out
 * as a partial.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createJoinStore, createRouteStore, createRouter } from '../../shared/mlgraph/index.js';
import { normal, seededRandom } from '../../shared/random/index.js';
import { hashTag } from '../../shared/redis/index.js';
import type { RedisClient } from '../../shared/redis/index.js';
import { pool, report, retrying, startFailoverRedis } from './redis-failover.js';
import type { FailoverRedis, Topology } from './redis-failover.js';

const children = ['small', 'large'];
const predictions = 400;
const transactions = 200;
const sources = ['a', 'b', 'c'];
const replicaCount = 4;

describe.each<Topology>(['sentinel', 'cluster'])('router and joiner, %s failover', (topology) => {
  let redis: FailoverRedis;
  const clients: RedisClient[] = [];
  beforeAll(async () => {
    redis = await startFailoverRedis(topology);
    for (let i = 0; i < replicaCount; i += 1) clients.push(await redis.client(1));
  }, 120_000);
  afterAll(() => redis?.stop());

  it('counts every reward once across the failover', async () => {
    const node = 'rewarded-router';
    const routers = clients.map((client, i) => {
      const uniform = seededRandom(i + 1);
      const store = createRouteStore(client, { node, puidTtlMs: 600_000 });
      const strategy = { kind: 'epsilon-greedy', epsilon: 1 } as const;
      return createRouter({ strategy, children, store, uniform, normal: normal(uniform) });
    });
    const counter = { unavailable: 0 };
    const failoversBefore = redis.failovers;
    const routes = new Map<string, string>();
    await pool(
      predictions,
      16,
      async (i) => {
        const puid = `p-${i}`;
        const { route } = await retrying(
          () => routers[i % replicaCount]!.predict({ puid, body: {} }),
          counter,
        );
        routes.set(puid, route[0]!);
      },
      () => {},
    );
    let failover: Promise<void> | undefined;
    const outcomes: string[] = [];
    // Rewards of 1 or 2 (exact in HINCRBYFLOAT), each sent to two replicas.
    const rewardOf = (i: number) => 1 + (i % 2);
    await pool(
      predictions,
      16,
      async (i) => {
        const sends = [i, i + 1].map((r) =>
          retrying(() => routers[r % replicaCount]!.reward(`p-${i}`, rewardOf(i)), counter),
        );
        outcomes.push(...(await Promise.all(sends)));
      },
      (done) => {
        if (done === predictions / 4) failover = redis.failover(hashTag(`mlgraph:${node}`));
      },
    );
    await failover;

    const arms = (await retrying(() => routers[0]!.arms(), counter)).children;
    const expected = new Map(children.map((c) => [c, { rewarded: 0, sum: 0 }]));
    for (const [puid, child] of routes) {
      const e = expected.get(child)!;
      e.rewarded += 1;
      e.sum += rewardOf(Number(puid.slice(2)));
    }
    const counted = arms.reduce((n, a) => n + a.rewarded, 0);
    report({
      scenario: 'router: rewards, each sent twice',
      topology,
      operations: predictions * 3,
      failovers: redis.failovers - failoversBefore,
      lost: Math.max(0, predictions - counted),
      doubled: Math.max(0, counted - predictions),
      unavailable: counter.unavailable,
    });
    expect(redis.failovers - failoversBefore).toBe(1);
    // A reward whose answer was lost (503 after it applied) is 'duplicate' on its retry.
    expect(outcomes.filter((o) => o === 'applied').length).toBeLessThanOrEqual(predictions);
    for (const arm of arms) {
      const e = expected.get(arm.name)!;
      expect(arm).toMatchObject({ rewarded: e.rewarded, routed: e.rewarded });
      expect(arm.meanReward! * arm.rewarded).toBeCloseTo(e.sum, 6);
    }
  }, 180_000);

  it('completes every join once, or hands it out as a partial, across the failover', async () => {
    const node = 'joined-node';
    const stores = clients.map((client) =>
      createJoinStore(client, { node, deadlineMs: 600_000, keepMs: 600_000, leaseMs: 5_000 }),
    );
    const counter = { unavailable: 0 };
    const failoversBefore = redis.failovers;
    const completions = new Map<string, number>();
    let failover: Promise<void> | undefined;
    // Every input is sent by two replicas (a redelivery racing the original).
    const inputs = transactions * sources.length;
    await pool(
      inputs,
      16,
      async (i) => {
        const puid = `t-${i % transactions}`;
        const source = sources[Math.floor(i / transactions)]!;
        const sends = [i, i + 1].map((r) =>
          retrying(
            () => stores[r % replicaCount]!.add({ puid, source, pending: 2, payload: i, nowMs: 0 }),
            counter,
          ),
        );
        for (const outcome of await Promise.all(sends)) {
          if (outcome.kind === 'complete') {
            completions.set(puid, (completions.get(puid) ?? 0) + 1);
          }
        }
      },
      (done) => {
        if (done === inputs / 4) failover = redis.failover(hashTag(`mlgraph:${node}`));
      },
    );
    await failover;
    // Whatever is still open past its deadline is handed out as a partial by the sweep.
    const { claimed } = await retrying(
      () => stores[0]!.due(Number.MAX_SAFE_INTEGER, 1000),
      counter,
    );
    for (const join of claimed)
      await retrying(() => stores[0]!.finish(join.puid, join.claim), counter);

    let complete = 0;
    let partial = 0;
    let lost = 0;
    for (let t = 0; t < transactions; t += 1) {
      const joined = await retrying(() => stores[0]!.get(`t-${t}`), counter);
      if (joined?.state === 'complete' && Object.keys(joined.inputs).length === 3) complete += 1;
      else if (joined?.state === 'partial') partial += 1;
      else lost += 1;
    }
    const doubled = [...completions.values()].filter((n) => n > 1).length;
    report({
      scenario: 'joiner: 3 inputs per join, each sent twice',
      topology,
      operations: inputs * 2,
      failovers: redis.failovers - failoversBefore,
      lost,
      doubled,
      unavailable: counter.unavailable,
    });
    expect(redis.failovers - failoversBefore).toBe(1);
    expect({ lost, doubled, handedOut: complete + partial }).toEqual({
      lost: 0,
      doubled: 0,
      handedOut: transactions,
    });
    // Each completing input was answered 'complete' once (or its retry was, as 'again').
    expect(completions.size).toBeLessThanOrEqual(complete);
  }, 180_000);
});
