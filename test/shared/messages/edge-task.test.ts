/** The edge task record: what downstream-sync stores is what the edge worker parses. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError } from '../../../shared/errors/index.js';
import { createMiner, watchTask } from '../../../shared/inference/index.js';
import { edgeMiningSpec, edgeTask, nodeKeys } from '../../../shared/messages/edge-task.js';
import { createTaskStreams } from '../../../shared/sync/index.js';
import { capturedTelemetry } from '../../support/http.js';
import { testRedis } from '../../support/redis.js';
import type { TestRedis } from '../../support/redis.js';
import { helmetDetectionTask } from '../../support/samples.js';

describe('edge task record', () => {
  let redis: TestRedis;
  beforeAll(async () => {
    redis = await testRedis();
  });
  afterAll(() => redis.close());

  const service = 'default/helmet-detection-demo';

  it('is stored by sync in the form the edge parses', async () => {
    const streams = createTaskStreams(redis.client, { maxLength: 100 });
    const hem = { name: 'Margin', parameters: { margin: 0.4 } };
    await streams.offer('edge1', helmetDetectionTask(3, hem));
    const text = await redis.client.hget(nodeKeys('edge1').current, service);
    const task = edgeTask.parse(JSON.parse(text ?? 'null'));
    expect(task).toMatchObject({
      namespace: 'default',
      name: 'helmet-detection-demo',
      uid: 'u1',
      generation: 3,
    });
    expect(edgeMiningSpec.parse(task.resource['spec']).edgeWorker?.hardExampleAlgorithm).toEqual(
      hem,
    );
  });

  it('that fails the schema is refused, and the running miner stays', async () => {
    const target = { miner: createMiner('Threshold') };
    const budgets: Array<number | undefined> = [];
    const watcher = watchTask({
      redis: redis.client,
      node: 'edge2',
      service,
      target,
      onBudget: (t) => budgets.push(t),
      pollMs: 60_000,
      log: capturedTelemetry('edge-infer').log,
    });
    const current = nodeKeys('edge2').current;
    await redis.client.hset(current, service, JSON.stringify({ uid: 'u1', generation: 'one' }));
    await expect(watcher.poll()).rejects.toThrow(ConfigError);
    await expect(watcher.poll()).rejects.toThrow(/generation/);
    const { resource } = helmetDetectionTask(1, { name: 'Nearest' });
    const record = { namespace: 'default', name: 'x', uid: 'u1', generation: 1, resource };
    await redis.client.hset(current, service, JSON.stringify(record));
    await expect(watcher.poll()).rejects.toThrow(/spec\.edgeWorker\.hardExampleAlgorithm\.name/);
    expect(target.miner.name).toBe('Threshold');
    expect(budgets).toEqual([]);
    watcher.stop();
  });
});
