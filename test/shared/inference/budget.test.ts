/** Offload-budget mode with a real Redis: replicas share one cut that holds the target under drift. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createBudget } from '../../../shared/inference/index.js';
import { seededRandom } from '../../../shared/random/index.js';
import { capturedTelemetry } from '../../support/http.js';
import { testRedis } from '../../support/redis.js';
import type { TestRedis } from '../../support/redis.js';

describe('offload budget', () => {
  let redis: TestRedis;
  const log = capturedTelemetry('edge-infer').log;
  beforeAll(async () => {
    redis = await testRedis();
  });
  afterAll(() => redis.close());

  const budgets = (service: string) =>
    [0, 1].map(() =>
      createBudget({ redis: redis.client, service, target: 0.2, window: 2000, refreshMs: 0, log }),
    );
  const offloaded = (isHard: (h: number) => boolean | undefined, scores: number[]) =>
    scores.filter((h) => isHard(h) === true).length / scores.length;

  it('lets the miner decide until there is a window, then holds the target across replicas and drift', async () => {
    const uniform = seededRandom(7);
    const [a, b] = budgets('default/demo');
    expect(a!.isHard(0.99)).toBeUndefined();

    const calm = () => uniform() * 0.9;
    for (let i = 0; i < 1000; i += 1) {
      a!.observe(calm());
      b!.observe(calm());
    }
    await a!.refresh();
    await b!.refresh();
    await a!.refresh();
    expect(a!.cut()).toBe(b!.cut());
    const fresh = Array.from({ length: 5000 }, calm);
    expect(offloaded((h) => a!.isHard(h), fresh)).toBeCloseTo(0.2, 1);

    // The input drifts to harder samples: a fixed cut would now offload most of them.
    const drifted = () => Math.sqrt(uniform());
    const before = offloaded((h) => a!.isHard(h), Array.from({ length: 5000 }, drifted));
    expect(before).toBeGreaterThan(0.4);
    for (let i = 0; i < 1000; i += 1) {
      a!.observe(drifted());
      b!.observe(drifted());
    }
    await a!.refresh();
    await b!.refresh();
    await a!.refresh();
    expect(a!.cut()).toBe(b!.cut());
    const after = offloaded((h) => b!.isHard(h), Array.from({ length: 5000 }, drifted));
    expect(Math.abs(after - 0.2)).toBeLessThan(0.03);
  });

  it('keeps a local window when there is no Redis', async () => {
    const local = createBudget({
      redis: undefined,
      service: 'x/y',
      target: 0.5,
      window: 200,
      refreshMs: 0,
      log,
    });
    for (let i = 0; i < 200; i += 1) local.observe(i / 200);
    await local.refresh();
    expect(local.cut()).toBeCloseTo(0.5, 1);
  });
});
