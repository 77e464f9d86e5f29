/** The edge worker picks up new mining settings from the task downstream-sync delivered. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMiner, watchTask } from '../../../shared/inference/index.js';
import { createTaskStreams } from '../../../shared/sync/index.js';
import { capturedTelemetry } from '../../support/http.js';
import { testRedis } from '../../support/redis.js';
import type { TestRedis } from '../../support/redis.js';
import { helmetDetectionTask } from '../../support/samples.js';

describe('task reload', () => {
  let redis: TestRedis;
  beforeAll(async () => {
    redis = await testRedis();
  });
  afterAll(() => redis.close());

  it('swaps the miner when the generation moves, and keeps it on a bad task', async () => {
    const telemetry = capturedTelemetry('edge-infer');
    const streams = createTaskStreams(redis.client, { maxLength: 100 });
    const target = { miner: createMiner('Threshold') };
    const budgets: Array<number | undefined> = [];
    const watcher = watchTask({
      redis: redis.client,
      node: 'edge0',
      service: 'default/helmet-detection-demo',
      target,
      onBudget: (t) => budgets.push(t),
      pollMs: 60_000,
      log: telemetry.log,
    });
    const offer = (generation: number, hem: unknown) =>
      streams.offer('edge0', helmetDetectionTask(generation, hem));

    await offer(1, { name: 'Margin', parameters: { margin: 0.4, targetOffloadRatio: 0.2 } });
    await watcher.poll();
    expect(target.miner.name).toBe('Margin');
    expect(target.miner.isHard({ kind: 'classification', probabilities: [0.65, 0.35] })).toBe(true);
    expect(budgets).toEqual([0.2]);

    // Same generation again: nothing to do.
    await watcher.poll();
    expect(budgets).toEqual([0.2]);

    await offer(2, { name: 'Threshold', parameters: { threshold: 7 } });
    await expect(watcher.poll()).rejects.toThrow(/threshold/);
    expect(target.miner.name).toBe('Margin');

    // Deleted and created again under the same name: generation 1 again, but another object.
    await streams.offer('edge0', { ...helmetDetectionTask(2, {}), placement: 'deleted' });
    await streams.offer('edge0', {
      ...helmetDetectionTask(1, { name: 'Threshold', parameters: { threshold: 0.7 } }),
      uid: 'u2',
      created: '9999-12-31T00:00:00Z',
    });
    await watcher.poll();
    expect(target.miner.name).toBe('Threshold');
    watcher.stop();
  });
});
