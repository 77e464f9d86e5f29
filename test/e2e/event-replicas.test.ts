/**
 * Two edge-infer replicas behind one Broker: a redelivered inference event may reach either.
 * With the answers shared through Redis (real server), the event is answered and counted once
 * across both; a redelivery during the first answer gets 503 (retry) however long that answer
 * takes, a dead replica's claim lapses after its lease, and a refused event gives its claim back.
 */
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildServer } from '../../shared/http/index.js';
import {
  WorkerCounters,
  createInferencePool,
  createMiner,
  createTaskAdapter,
  edgeInferDefinition,
  sharedAnswers,
} from '../../shared/inference/index.js';
import type { InferencePool } from '../../shared/inference/index.js';
import { loadMnist, pixels } from '../../shared/training/data.js';
import { capturedTelemetry, listen, postEvent } from '../support/http.js';
import type { Listening } from '../support/http.js';
import { testRedis } from '../support/redis.js';
import type { TestRedis } from '../support/redis.js';

const model = new Uint8Array(readFileSync(new URL('../../models/edge.onnx', import.meta.url)));

describe('inference events across two replicas', () => {
  const { test } = loadMnist();
  let redis: TestRedis;
  let pool: InferencePool;
  const replicas: Array<{ server: Listening; counters: WorkerCounters }> = [];
  /** Lets a test hold replica A's answers until it has tried the redelivery on B. */
  let gate: Promise<void> | undefined;
  /** Called when replica A starts an answer (it holds the event's claim then). */
  let answering: (() => void) | undefined;

  beforeAll(async () => {
    redis = await testRedis();
    pool = await createInferencePool({
      model,
      threads: 1,
      maxBatch: 64,
      maxQueueRows: 1024,
      maxWaitMs: 0,
    });
    for (const name of ['a', 'b']) {
      const counters = new WorkerCounters();
      const shared = sharedAnswers(redis.client, {
        scope: 'ns/svc',
        // Two seconds, so the tests can outlast a lease: a live owner must keep its claim anyway
        // (renewed every 667 ms, so a loaded machine's late timers do not drop it).
        leaseSeconds: 2,
        keepSeconds: 60,
        warn: () => {},
      });
      const server = await listen(
        buildServer(
          edgeInferDefinition({
            model: { name: 'edge', version: '1' },
            joint: {
              edge: pool,
              task: createTaskAdapter({}, pool.signature),
              cloud: undefined,
              miner: createMiner('Threshold', { threshold: 0.9 }),
              settings: {
                miningMode: 'inference-then-mining',
                offload: 'sync',
                fallback: 'edge-result',
              },
              counters,
            },
            maxBatch: 64,
            readiness: [],
            sharedAnswers:
              name === 'a'
                ? async (key, answer) =>
                    shared(key, async () => {
                      answering?.();
                      await gate;
                      return answer();
                    })
                : shared,
          }),
          {
            telemetry: capturedTelemetry(`edge-${name}`),
            bodyLimitBytes: 1 << 20,
            readinessTimeoutMs: 1000,
          },
        ),
      );
      replicas.push({ server, counters });
    }
  });
  afterAll(async () => {
    for (const r of replicas) await r.server.close();
    await pool.close();
    await redis.close();
  });

  const send = (replica: number, id: string, data: unknown) =>
    postEvent(replicas[replica]!.server.url, 'io.edgeai.inference.requested', data, {
      'ce-id': id,
      'ce-source': '/camera/3',
    });
  const image = (i: number) => ({
    instances: [Array.from(test.x.subarray(i * pixels, (i + 1) * pixels))],
  });
  const counted = () => replicas.reduce((sum, r) => sum + r.counters.inferenceNumber, 0);

  it('answers a redelivery on the other replica with the first answer, counted once', async () => {
    const before = counted();
    const first = await send(0, 'ev-1', image(0));
    const again = await send(1, 'ev-1', image(0));
    expect(first.status).toBe(200);
    expect(again.status).toBe(200);
    expect(await again.json()).toEqual(await first.json());
    expect(counted()).toBe(before + 1);
    // A different event id is a different event.
    expect((await send(1, 'ev-2', image(0))).status).toBe(200);
    expect(counted()).toBe(before + 2);
  });

  it('answers 503 to a redelivery while the first is still answering, then the first answer', async () => {
    const before = counted();
    let open!: () => void;
    gate = new Promise((resolve) => (open = resolve));
    const claimed = new Promise<void>((resolve) => (answering = resolve));
    const first = send(0, 'ev-3', image(1));
    // Once A holds the claim, B must not infer: it answers 503 (retry later).
    await claimed;
    const claimKey = 'answer:{ns/svc}:9:/camera/3:ev-3';
    expect(await redis.client.get(claimKey)).toMatch(/^claimed:/);
    const busy = await send(1, 'ev-3', image(1));
    expect(busy.status).toBe(503);
    expect(busy.headers.get('retry-after')).toBe('1');
    // Past the claim's expiry as it stands now (on Redis's own clock) A still answers, so it
    // has renewed its claim: B must still not infer.
    const redisNow = async () => {
      const [seconds, micros] = await redis.client.time();
      return Number(seconds) * 1000 + Number(micros) / 1000;
    };
    const leaseEnds = (await redisNow()) + (await redis.client.pttl(claimKey));
    while ((await redisNow()) <= leaseEnds) await new Promise((r) => setTimeout(r, 100));
    expect(await redis.client.get(claimKey)).toMatch(/^claimed:/);
    expect((await send(1, 'ev-3', image(1))).status).toBe(503);
    open();
    gate = undefined;
    answering = undefined;
    const answered = await first;
    expect(answered.status).toBe(200);
    const retried = await send(1, 'ev-3', image(1));
    expect(retried.status).toBe(200);
    expect(await retried.json()).toEqual(await answered.json());
    expect(counted()).toBe(before + 1);
  });

  it('answers an event whose claimant died once its lease runs out, counted once', async () => {
    // What a replica killed mid-answer leaves: a claim that nobody renews.
    const claimKey = 'answer:{ns/svc}:9:/camera/3:ev-5';
    await redis.client.set(claimKey, 'claimed:dead-replica', 'EX', 1);
    expect((await send(1, 'ev-5', image(3))).status).toBe(503);
    while ((await redis.client.exists(claimKey)) === 1) await new Promise((r) => setTimeout(r, 50));
    const before = counted();
    const answered = await send(1, 'ev-5', image(3));
    expect(answered.status).toBe(200);
    expect((await send(0, 'ev-5', image(3))).status).toBe(200);
    expect(counted()).toBe(before + 1);
  });

  it('takes a claim left by a replica of the previous version (no token) as in progress', async () => {
    const claimKey = 'answer:{ns/svc}:9:/camera/3:ev-6';
    await redis.client.set(claimKey, '', 'EX', 30);
    const busy = await send(1, 'ev-6', image(4));
    expect(busy.status).toBe(503);
    await redis.client.del(claimKey);
  });

  it('gives the claim back when the event is refused, so a corrected redelivery is answered', async () => {
    const refused = await send(0, 'ev-4', { instances: [[1, 2, 3]] });
    expect(refused.status).toBe(400);
    const before = counted();
    const answered = await send(1, 'ev-4', image(2));
    expect(answered.status).toBe(200);
    expect(counted()).toBe(before + 1);
  });
});
