/** Random bodies at edge-infer and cloud-infer: never a 5xx, never a crash, still serving after. */
import { readFileSync } from 'node:fs';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildServer } from '../../shared/http/index.js';
import {
  WorkerCounters,
  cloudInferDefinition,
  createInferencePool,
  createMiner,
  createTaskAdapter,
  edgeInferDefinition,
} from '../../shared/inference/index.js';
import type { InferencePool } from '../../shared/inference/index.js';
import { capturedTelemetry, listen } from '../support/http.js';
import type { Listening } from '../support/http.js';

const model = (file: string) =>
  new Uint8Array(readFileSync(new URL(`../../models/${file}`, import.meta.url)));
const pool = (file: string) =>
  createInferencePool({
    model: model(file),
    threads: 1,
    maxBatch: 64,
    maxQueueRows: 4096,
    maxWaitMs: 0,
  });
const server = { bodyLimitBytes: 1 << 20, readinessTimeoutMs: 1000 };

const number = fc.oneof(fc.double(), fc.integer(), fc.constantFrom(0, 1, -1, 1e308, -0));
const value = fc.oneof(number, fc.string(), fc.boolean(), fc.constant(null));
const rows = fc.oneof(
  fc.array(number, { maxLength: 800 }),
  fc.array(fc.array(number, { maxLength: 30 }), { maxLength: 30 }),
  fc.array(value, { maxLength: 5 }),
);
const bodies = fc.oneof(
  fc.json().map((text) => JSON.parse(text) as unknown),
  fc.record({ instances: fc.oneof(fc.array(rows, { maxLength: 3 }), value) }),
  fc.record({
    id: fc.oneof(fc.string(), number),
    inputs: fc.array(
      fc.record({
        name: fc.oneof(fc.constant('input'), fc.string()),
        shape: fc.oneof(fc.array(fc.integer({ min: -2, max: 900 }), { maxLength: 4 }), value),
        datatype: fc.constantFrom('FP32', 'FP64', 'INT8', 'BYTES', ''),
        data: fc.oneof(rows, value),
      }),
      { maxLength: 2 },
    ),
  }),
);

describe('inference functions under random input', () => {
  let edgePool: InferencePool;
  let cloudPool: InferencePool;
  let edge: Listening;
  let cloud: Listening;

  beforeAll(async () => {
    edgePool = await pool('edge.onnx');
    cloudPool = await pool('cloud.onnx');
    edge = await listen(
      buildServer(
        edgeInferDefinition({
          model: { name: 'edge', version: '1' },
          joint: {
            edge: edgePool,
            task: createTaskAdapter({}, edgePool.signature),
            cloud: undefined,
            miner: createMiner('Margin', { margin: 0.3 }),
            settings: {
              miningMode: 'inference-then-mining',
              offload: 'sync',
              fallback: 'edge-result',
            },
            counters: new WorkerCounters(),
          },
          maxBatch: 64,
          readiness: [],
        }),
        { telemetry: capturedTelemetry('edge-infer'), ...server },
      ),
    );
    cloud = await listen(
      buildServer(
        cloudInferDefinition({
          model: { name: 'cloud', version: '1' },
          pool: cloudPool,
          task: createTaskAdapter({}, cloudPool.signature),
          maxBatch: 64,
          readiness: [],
        }),
        { telemetry: capturedTelemetry('cloud-infer'), ...server },
      ),
    );
  });
  afterAll(async () => {
    await Promise.all([edge.close(), cloud.close()]);
    await Promise.all([edgePool.close(), cloudPool.close()]);
  });

  it('answers every body below 500, over every route and the event form', async () => {
    const targets = [
      (b: string) =>
        fetch(`${edge.url}/predict`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: b,
        }),
      (b: string) =>
        fetch(`${edge.url}/v2/models/edge/infer`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: b,
        }),
      (b: string) =>
        fetch(`${cloud.url}/v2/models/cloud/infer`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: b,
        }),
      (b: string) =>
        fetch(cloud.url, {
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            'ce-specversion': '1.0',
            'ce-id': 'fuzz',
            'ce-source': '/fuzz',
            'ce-type': 'io.edgeai.inference.hard-example',
          },
          body: b,
        }),
    ];
    await fc.assert(
      fc.asyncProperty(bodies, fc.nat({ max: targets.length - 1 }), async (body, target) => {
        const answer = await targets[target]!(JSON.stringify(body) ?? 'null');
        await answer.arrayBuffer();
        expect(answer.status).toBeLessThan(500);
      }),
      { numRuns: 300 },
    );
    const alive = await fetch(`${edge.url}/predict`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ instances: [new Array(784).fill(0.5)] }),
    });
    expect(alive.status).toBe(200);
  });
});
