/**
 * edge-infer and cloud-infer over real HTTP (real pools, the committed models) against JSON made
 * to exhaust the stack: data nested 20,000 deep, in every form the workers read (OIP `data`, the
 * instances form, the CloudEvent form, a deep value where an element belongs), is a 400 naming
 * the nesting limit, and the worker still serves after. And readiness follows the threads: the
 * worker's /health/readiness and OIP's /v2/health/ready answer 503 while no thread is alive.
 */
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildServer } from '../../../shared/http/index.js';
import { threadsReadiness } from '../../../shared/inference/definition.js';
import {
  WorkerCounters,
  cloudInferDefinition,
  createInferencePool,
  createMiner,
  createTaskAdapter,
  edgeInferDefinition,
} from '../../../shared/inference/index.js';
import { startOnnxWorker } from '../../../shared/inference/onnx-runtime.js';
import type { OnnxThread } from '../../../shared/inference/onnx-runtime.js';
import type { ServingPool } from '../../../shared/inference/pool.js';
import { capturedTelemetry, listen, postEvent } from '../../support/http.js';
import type { Listening } from '../../support/http.js';

const model = (file: string) =>
  new Uint8Array(readFileSync(new URL(`../../../models/${file}`, import.meta.url)));
const serverOptions = { bodyLimitBytes: 4 << 20, readinessTimeoutMs: 1000 };
const depth = 20_000;
/** `[[[...[inner]...]]]`, `levels` arrays deep, as JSON text (JSON.stringify would overflow). */
const nested = (levels: number, inner = '0') =>
  `${'['.repeat(levels)}${inner}${']'.repeat(levels)}`;
const limit = /nested deeper than 32 levels \(a tensor has at most 32 dimensions\)/;

describe('inference workers against deeply nested JSON', () => {
  let threads: OnnxThread[];
  let edgePool: ServingPool;
  let cloudPool: ServingPool;
  let edge: Listening;
  let cloud: Listening;

  /** Replacements of edge-infer's thread start once this resolves. */
  let hold: Promise<void> = Promise.resolve();

  beforeAll(async () => {
    threads = [];
    const watched = async (bytes: Uint8Array) => {
      await hold;
      const thread = await startOnnxWorker(bytes);
      threads.push(thread);
      return thread;
    };
    const options = { threads: 1, maxBatch: 64, maxQueueRows: 4096, maxWaitMs: 0 };
    edgePool = await createInferencePool({
      model: model('edge.onnx'),
      ...options,
      startThread: watched,
    });
    cloudPool = await createInferencePool({ model: model('cloud.onnx'), ...options });
    edge = await listen(
      buildServer(
        edgeInferDefinition({
          model: { name: 'edge', version: '1' },
          joint: {
            edge: edgePool,
            task: createTaskAdapter({}, edgePool.signature),
            cloud: undefined,
            miner: createMiner('EdgeOnly', {}),
            settings: {
              miningMode: 'inference-then-mining',
              offload: 'sync',
              fallback: 'edge-result',
            },
            counters: new WorkerCounters(),
          },
          maxBatch: 64,
          readiness: [threadsReadiness(edgePool)],
        }),
        { telemetry: capturedTelemetry('edge-infer'), ...serverOptions },
      ),
    );
    cloud = await listen(
      buildServer(
        cloudInferDefinition({
          model: { name: 'cloud', version: '1' },
          pool: cloudPool,
          task: createTaskAdapter({}, cloudPool.signature),
          maxBatch: 64,
          readiness: [threadsReadiness(cloudPool)],
        }),
        { telemetry: capturedTelemetry('cloud-infer'), ...serverOptions },
      ),
    );
  });
  afterAll(async () => {
    await Promise.all([edge.close(), cloud.close()]);
    await Promise.all([edgePool.close(), cloudPool.close()]);
  });

  const post = (url: string, body: string) =>
    fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
  const oip = (data: string) =>
    `{"inputs":[{"name":"input","shape":[1,784],"datatype":"FP32","data":${data}}]}`;
  const digit = `[${new Array<string>(784).fill('0.5').join(',')}]`;

  it('answers OIP data nested 20,000 deep with a 400 naming the limit, on both workers', async () => {
    for (const base of [
      `${edge.url}/v2/models/edge/infer`,
      `${cloud.url}/v2/models/cloud/infer`,
      `${cloud.url}/v2/models/cloud/versions/1/infer`,
    ]) {
      const answer = await post(base, oip(nested(depth)));
      expect(answer.status).toBe(400);
      const body = (await answer.json()) as { error: string };
      expect(body.error).toMatch(/^input input: body\.inputs\[0\]\.data(\[0\]){32}: /);
      expect(body.error).toMatch(limit);
    }
  });

  it('refuses the same depth where one element belongs, and in a deep object, without walking it', async () => {
    // A flat row whose last element is the deep array: the walker meets it 2 levels down.
    const row = `[${new Array<string>(783).fill('0').join(',')},${nested(depth)}]`;
    const deepRow = await post(`${edge.url}/v2/models/edge/infer`, oip(row));
    expect(deepRow.status).toBe(400);
    expect(((await deepRow.json()) as { error: string }).error).toMatch(limit);
    // An object is no element: named by kind, not stringified (which would overflow too).
    const deepObject = `[${'{"a":'.repeat(depth)}0${'}'.repeat(depth)}]`;
    const object = await post(`${edge.url}/v2/models/edge/infer`, oip(deepObject));
    expect(object.status).toBe(400);
    expect(((await object.json()) as { error: string }).error).toMatch(
      /data\[0\]: expected a finite number within FP32 range .*, got an object|data\[0\]: expected a finite number, got an object/,
    );
  });

  it('answers the instances form and the CloudEvent form nested 20,000 deep with a 400', async () => {
    const predict = await post(`${edge.url}/predict`, `{"instances":${nested(depth)}}`);
    expect(predict.status).toBe(400);
    const predicted = (await predict.json()) as { error: string };
    expect(predicted.error).toMatch(/^body\.instances\[0\]: /);
    expect(predicted.error).toMatch(limit);
    // The sample's shape is right, but one element of it is the deep array.
    const element = `[${new Array<string>(783).fill('0').join(',')},${nested(depth)}]`;
    const inElement = await post(`${edge.url}/predict`, `{"instances":[${element}]}`);
    expect(inElement.status).toBe(400);
    expect(((await inElement.json()) as { error: string }).error).toMatch(
      /body\.instances\[0\]\[783\]: expected a finite number, got an array of 1 values/,
    );
    const event = await fetch(cloud.url, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'ce-specversion': '1.0',
        'ce-id': 'deep-1',
        'ce-source': '/tests/deep',
        'ce-type': 'io.edgeai.inference.hard-example',
      },
      body: oip(nested(depth)),
    });
    expect(event.status).toBe(400);
    expect(JSON.stringify(await event.json())).toMatch(limit);
  });

  it('still serves after: a digit at 32 levels or less is answered', async () => {
    const answer = await post(`${edge.url}/v2/models/edge/infer`, oip(`[${digit}]`));
    expect(answer.status).toBe(200);
    const events = await postEvent(cloud.url, 'io.edgeai.inference.hard-example', {
      inputs: [{ name: 'input', shape: [1, 784], datatype: 'FP32', data: [JSON.parse(digit)] }],
    });
    expect(events.status).toBe(200);
  });

  it('is not ready while no inference thread is alive, and ready again once it is replaced', async () => {
    const ready = async () => {
      const [health, oipReady] = await Promise.all([
        fetch(`${edge.url}/health/readiness`),
        fetch(`${edge.url}/v2/health/ready`),
      ]);
      return { health: health.status, oip: oipReady.status, body: await oipReady.text() };
    };
    expect(await ready()).toMatchObject({ health: 200, oip: 200 });
    let release!: () => void;
    hold = new Promise<void>((resolve) => (release = resolve));
    await threads[0]!.stop();
    const during = await ready();
    expect(during.health).toBe(503);
    expect(during.oip).toBe(503);
    expect(during.body).toMatch(/not ready: inference-threads: no inference thread is alive/);
    // A request sent meanwhile waits for the replacement, which then makes the worker ready.
    const answer = post(`${edge.url}/v2/models/edge/infer`, oip(`[${digit}]`));
    release();
    expect((await answer).status).toBe(200);
    expect(await ready()).toMatchObject({ health: 200, oip: 200 });
  });
});
