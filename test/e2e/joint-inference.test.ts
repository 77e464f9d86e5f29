/**
 * edge-infer and cloud-infer as two real HTTP servers with the committed models: easy samples
 * answered at the edge, hard ones by the cloud; with the cloud gone, answers are marked fallback
 * and the breaker opens; when the cloud returns, it answers again. Bad input gets a precise 4xx
 * and counts nothing.
 */
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import type { Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { buildServer } from '../../shared/http/index.js';
import {
  WorkerCounters,
  cloudInferDefinition,
  createCloudClient,
  createInferencePool,
  createMiner,
  createTaskAdapter,
  edgeInferDefinition,
  inferenceMetrics,
} from '../../shared/inference/index.js';
import type { CloudClient, InferencePool } from '../../shared/inference/index.js';
import { freePort } from '../../local/index.js';
import { loadMnist, pixels } from '../../shared/training/data.js';
import { capturedTelemetry, listen, postEvent } from '../support/http.js';
import type { Listening } from '../support/http.js';

const model = (file: string) =>
  new Uint8Array(readFileSync(new URL(`../../models/${file}`, import.meta.url)));
const poolOptions = { threads: 1, maxBatch: 256, maxQueueRows: 4096, maxWaitMs: 0 };

interface Outputs {
  outputs: Array<{ name: string; data: unknown[] }>;
}
const output = (body: Outputs, name: string) => body.outputs.find((o) => o.name === name)!.data;

describe('joint inference end to end', () => {
  const { test } = loadMnist();
  const samples = 200;
  let cloudPool: InferencePool;
  let edgePool: InferencePool;
  let cloudPort: number;
  let cloudServer: Server | undefined;
  let edge: Listening;
  let cloud: CloudClient;
  const counters = new WorkerCounters();

  const startCloud = async () => {
    cloudServer = buildServer(
      cloudInferDefinition({
        model: { name: 'cloud', version: '1' },
        pool: cloudPool,
        task: createTaskAdapter({}, cloudPool.signature),
        maxBatch: 1024,
        readiness: [],
      }),
      {
        telemetry: capturedTelemetry('cloud-infer'),
        bodyLimitBytes: 8 << 20,
        readinessTimeoutMs: 1000,
      },
    );
    cloudServer.listen(cloudPort, '127.0.0.1');
    await once(cloudServer, 'listening');
  };
  const stopCloud = async () => {
    cloudServer!.closeAllConnections();
    cloudServer!.close();
    await once(cloudServer!, 'close');
  };
  const infer = async (from: number, count: number) => {
    const answer = await fetch(`${edge.url}/v2/models/edge/infer`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        id: `req-${from}`,
        inputs: [
          {
            name: 'input',
            shape: [count, 784],
            datatype: 'FP32',
            data: Array.from(test.x.subarray(from * pixels, (from + count) * pixels)),
          },
        ],
      }),
    });
    expect(answer.status).toBe(200);
    return (await answer.json()) as Outputs;
  };

  beforeAll(async () => {
    cloudPool = await createInferencePool({ model: model('cloud.onnx'), ...poolOptions });
    edgePool = await createInferencePool({ model: model('edge.onnx'), ...poolOptions });
    cloudPort = await freePort();
    await startCloud();
    cloud = createCloudClient({
      url: `http://127.0.0.1:${cloudPort}`,
      model: 'cloud',
      deadlineMs: 1000,
      retries: 1,
      breakerFailures: 3,
      halfOpenMs: 300,
    });
    const telemetry = capturedTelemetry('edge-infer');
    const metrics = inferenceMetrics(telemetry, {
      counters,
      queuedRows: () => edgePool.queuedRows(),
    });
    edge = await listen(
      buildServer(
        edgeInferDefinition({
          onAnswered: metrics.answered,
          model: { name: 'edge', version: '1' },
          joint: {
            edge: edgePool,
            task: createTaskAdapter({}, edgePool.signature),
            cloud,
            miner: createMiner('Threshold', { threshold: 0.9 }),
            settings: {
              miningMode: 'inference-then-mining',
              offload: 'sync',
              fallback: 'edge-result',
            },
            counters,
            observe: metrics.observe,
          },
          maxBatch: 256,
          readiness: [],
        }),
        {
          telemetry,
          bodyLimitBytes: 4 << 20,
          readinessTimeoutMs: 1000,
        },
      ),
    );
  });
  afterAll(async () => {
    await edge.close();
    if (cloudServer?.listening === true) await stopCloud();
    await edgePool.close();
    await cloudPool.close();
  });

  it('answers easy samples at the edge and hard ones in the cloud', async () => {
    const body = await infer(0, samples);
    const tiers = output(body, 'tier');
    const hard = output(body, 'hard');
    const labels = output(body, 'label') as number[];
    const cloudLabels = output(body, 'cloud_label') as number[];
    expect(tiers.filter((t) => t === 'edge').length).toBeGreaterThan(samples / 2);
    expect(tiers.filter((t) => t === 'cloud').length).toBeGreaterThan(0);
    tiers.forEach((tier, i) => {
      expect(tier === 'cloud').toBe(hard[i]);
      if (tier === 'cloud') expect(labels[i]).toBe(cloudLabels[i]);
      else expect(cloudLabels[i]).toBe(-1);
    });
    // The cloud's answers are the cloud model's.
    const direct = await cloudPool.infer(
      {
        input: {
          datatype: 'FP32',
          shape: [samples, 784],
          data: test.x.slice(0, samples * pixels),
        },
      },
      samples,
    );
    const probabilities = direct['probabilities']!.data as Float32Array;
    tiers.forEach((tier, i) => {
      if (tier !== 'cloud') return;
      const row = Array.from(probabilities.subarray(i * 10, (i + 1) * 10));
      expect(cloudLabels[i]).toBe(row.indexOf(Math.max(...row)));
    });
    const correct = labels.filter((l, i) => l === test.y[i]).length;
    expect(correct / samples).toBeGreaterThan(0.95);
    expect(counters.inferenceNumber).toBe(samples);
    expect(counters.hardExampleNumber).toBe(hard.filter(Boolean).length);
    expect(counters.uploaded).toBe(counters.hardExampleNumber);
  });

  it('marks fallback answers while the cloud is down, opens the breaker, recovers when it returns', async () => {
    await stopCloud();
    for (let i = 0; i < 4; i += 1) {
      const body = await infer(i * 50, 50);
      const hard = output(body, 'hard');
      const fallback = output(body, 'fallback');
      expect(fallback).toEqual(hard);
      expect(output(body, 'tier').every((t) => t === 'edge')).toBe(true);
    }
    expect(cloud.breakerState()).toBe('open');
    expect(counters.fallbacks).toBeGreaterThan(0);

    await startCloud();
    // The breaker tries the cloud again once halfOpenMs (300) has passed since it opened, on
    // the clock it reads (Date.now): set an hour on, instead of waiting.
    vi.setSystemTime(Date.now() + 3_600_000);
    let body: Awaited<ReturnType<typeof infer>>;
    try {
      body = await infer(0, samples);
    } finally {
      vi.useRealTimers();
    }
    expect(output(body, 'tier')).toContain('cloud');
    expect(output(body, 'fallback').some(Boolean)).toBe(false);
    expect(cloud.breakerState()).toBe('closed');
  });

  const tensor = (shape: unknown, data: unknown, datatype = 'FP32') => ({
    inputs: [{ name: 'input', shape, datatype, data }],
  });
  /** An OIP request with `data` as raw FP32 after the JSON header (`declared` bytes said). */
  const postBinary = (
    data: Float32Array,
    extra: Record<string, unknown> = {},
    declared = data.byteLength,
    rows = data.length / pixels,
  ) => {
    const header = Buffer.from(
      JSON.stringify({
        ...extra,
        inputs: [
          {
            name: 'input',
            shape: [rows, 784],
            datatype: 'FP32',
            data: [],
            parameters: { binary_data_size: declared },
          },
        ],
      }),
    );
    return fetch(`${edge.url}/v2/models/edge/infer`, {
      method: 'POST',
      headers: {
        'content-type': 'application/octet-stream',
        'inference-header-content-length': String(header.length),
      },
      body: Buffer.concat([header, Buffer.from(data.buffer, data.byteOffset, data.byteLength)]),
    });
  };
  it.each<[string, string, unknown, number, RegExp]>([
    [
      'wrong shape',
      '/v2/models/edge/infer',
      tensor([1, 783], new Array(783).fill(0)),
      400,
      /body\.inputs\[0\]: input input takes shape \[-1,784\] \(-1: any size\), got \[1,783\]/,
    ],
    [
      'wrong datatype',
      '/v2/models/edge/infer',
      tensor([1, 784], new Array(784).fill(0), 'INT8'),
      400,
      /body\.inputs\[0\]: input input takes datatype FP32, got INT8/,
    ],
    [
      'a NaN sent as a string',
      '/v2/models/edge/infer',
      tensor([1, 784], ['NaN', ...Array<number>(783).fill(0)]),
      400,
      /data\[0\]: expected a finite number, got "NaN"/,
    ],
    [
      'non-numeric data',
      '/predict',
      { instances: [{ pixels: 1 }] },
      400,
      /body\.instances\[0\]: input input takes shape \[-1,784\] \(-1: any size\), got \[1\]/,
    ],
    ['an empty batch', '/predict', { instances: [] }, 400, /empty batch/],
    [
      'a batch over the limit',
      '/v2/models/edge/infer',
      tensor([257, 784], []),
      400,
      /batch of 257 is over the limit of 256/,
    ],
    [
      'too few values',
      '/v2/models/edge/infer',
      tensor([2, 784], new Array(784).fill(0)),
      400,
      /expected 1568 values for shape \[2,784\], got 784/,
    ],
    [
      'an unknown model',
      '/v2/models/resnet/infer',
      tensor([1, 784], new Array(784).fill(0)),
      404,
      /model resnet is not served here/,
    ],
    [
      'no inputs',
      '/v2/models/edge/infer',
      { inputs: [] },
      400,
      /at least one input tensor is required/,
    ],
  ])(
    'refuses %s (%s) with a precise 4xx and counts nothing',
    async (_case, path, body, status, message) => {
      const before = { ...counters };
      const answer = await fetch(`${edge.url}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      expect(answer.status).toBe(status);
      const { error } = (await answer.json()) as { error: string | { message: string } };
      // Every route of an inference worker answers the OIP spec's {"error": "<message>"}.
      expect(typeof error === 'string' ? error : error.message).toMatch(message);
      expect(typeof error).toBe('string');
      expect({ ...counters }).toEqual(before);
    },
  );

  it('answers a redelivered inference event once: same reply, counted once', async () => {
    const before = counters.inferenceNumber;
    const send = () =>
      postEvent(
        edge.url,
        'io.edgeai.inference.requested',
        { instances: [Array.from(test.x.subarray(0, pixels))] },
        {
          'ce-id': 'same-event',
          'ce-source': '/camera/7',
        },
      );
    const first = await send();
    const second = await send();
    expect(first.status).toBe(200);
    expect(first.headers.get('ce-type')).toBe('io.edgeai.inference.completed');
    expect(await second.json()).toEqual(await first.json());
    expect(counters.inferenceNumber).toBe(before + 1);
  });

  it('takes the binary tensor extension (raw FP32 after the JSON header)', async () => {
    const rows = 64;
    const data = test.x.slice(0, rows * pixels);
    const answer = await postBinary(data);
    expect(answer.status).toBe(200);
    const viaJson = await infer(0, rows);
    expect(output((await answer.json()) as Outputs, 'edge_label')).toEqual(
      output(viaJson, 'edge_label'),
    );
    const short = await postBinary(data.subarray(0, 100), {}, data.byteLength, rows);
    expect(short.status).toBe(400);
    expect(((await short.json()) as { error: string }).error).toMatch(
      /binary_data_size: 200704 bytes declared, 400 left in the body/,
    );
  });

  it('answers with binary outputs when asked (Triton layout), equal to the JSON answer', async () => {
    const rows = 5;
    const data = test.x.slice(0, rows * pixels);
    // Header lengths of every remainder mod 8, so the in-place (aligned) read is exercised at
    // each offset.
    for (let pad = 0; pad < 8; pad += 1) {
      const answer = await postBinary(data, {
        id: 'x'.repeat(pad),
        parameters: { binary_data_output: true },
        outputs: [{ name: 'probabilities' }, { name: 'label' }, { name: 'tier' }, { name: 'hard' }],
      });
      expect(answer.status).toBe(200);
      expect(answer.headers.get('content-type')).toBe('application/octet-stream');
      const bytes = Buffer.from(await answer.arrayBuffer());
      const length = Number(answer.headers.get('inference-header-content-length'));
      const head = JSON.parse(bytes.subarray(0, length).toString('utf8')) as {
        id: string;
        outputs: Array<{
          name: string;
          datatype: string;
          parameters: { binary_data_size: number };
        }>;
      };
      expect(head.id).toBe('x'.repeat(pad));
      expect(head.outputs.map((o) => [o.name, o.datatype])).toEqual([
        ['probabilities', 'FP32'],
        ['label', 'INT32'],
        ['tier', 'BYTES'],
        ['hard', 'BOOL'],
      ]);
      const parts: Buffer[] = [];
      let at = length;
      for (const o of head.outputs) {
        parts.push(bytes.subarray(at, at + o.parameters.binary_data_size));
        at += o.parameters.binary_data_size;
      }
      expect(at).toBe(bytes.length);
      const [probs, labels, tiers, hard] = parts as [Buffer, Buffer, Buffer, Buffer];
      const viaJson = await infer(0, rows);
      const jsonProbs = output(viaJson, 'probabilities') as number[];
      const binaryProbs = Array.from(
        new Float32Array(probs.buffer.slice(probs.byteOffset, probs.byteOffset + probs.length)),
      );
      binaryProbs.forEach((p, i) => expect(p).toBeCloseTo(jsonProbs[i]!, 5));
      expect(Array.from({ length: rows }, (_, i) => labels.readInt32LE(i * 4))).toEqual(
        output(viaJson, 'label'),
      );
      const tierNames: string[] = [];
      for (let i = 0; i < tiers.length;) {
        const n = tiers.readUInt32LE(i);
        tierNames.push(tiers.subarray(i + 4, i + 4 + n).toString('utf8'));
        i += 4 + n;
      }
      expect(tierNames).toEqual(output(viaJson, 'tier'));
      expect(Array.from(hard, (b) => b === 1)).toEqual(output(viaJson, 'hard'));
    }
  });

  it('sends one output as binary when only its own binary_data flag is set', async () => {
    const answer = await fetch(`${edge.url}/v2/models/edge/infer`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        ...tensor([2, 784], Array.from(test.x.subarray(0, 2 * pixels))),
        outputs: [{ name: 'label', parameters: { binary_data: true } }, { name: 'tier' }],
      }),
    });
    expect(answer.status).toBe(200);
    const bytes = Buffer.from(await answer.arrayBuffer());
    const length = Number(answer.headers.get('inference-header-content-length'));
    const head = JSON.parse(bytes.subarray(0, length).toString('utf8')) as Outputs;
    expect(head.outputs[0]).toMatchObject({ name: 'label', parameters: { binary_data_size: 8 } });
    expect(head.outputs[0]).not.toHaveProperty('data');
    expect(head.outputs[1]).toMatchObject({ name: 'tier', data: ['edge', 'edge'] });
    expect([bytes.readInt32LE(length), bytes.readInt32LE(length + 4)]).toEqual([
      test.y[0],
      test.y[1],
    ]);
  });

  it.each([
    [{ parameters: { binary_data_output: 'yes' } }, /binary_data_output/],
    [{ outputs: [{ name: 'label', parameters: { binary_data: 1 } }] }, /binary_data/],
  ])('refuses a binary flag that is not a boolean: %o', async (extra, message) => {
    const answer = await fetch(`${edge.url}/v2/models/edge/infer`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        ...tensor([1, 784], Array.from(test.x.subarray(0, pixels))),
        ...extra,
      }),
    });
    expect(answer.status).toBe(400);
    expect(((await answer.json()) as { error: string }).error).toMatch(message);
  });

  it('refuses binary outputs in an inference event, before counting it', async () => {
    const before = counters.inferenceNumber;
    const answer = await postEvent(
      edge.url,
      'io.edgeai.inference.requested',
      {
        ...tensor([1, 784], Array.from(test.x.subarray(0, pixels))),
        parameters: { binary_data_output: true },
      },
      { 'ce-id': 'binary-event', 'ce-source': '/camera/8' },
    );
    expect(answer.status).toBe(400);
    expect(((await answer.json()) as { error: string }).error).toMatch(
      /binary outputs .* are for HTTP requests/,
    );
    expect(counters.inferenceNumber).toBe(before);
  });

  it('names the first non-finite value of a binary input', async () => {
    const data = test.x.slice(0, 2 * pixels);
    data[900] = Number.POSITIVE_INFINITY;
    data[1000] = Number.NaN;
    const answer = await postBinary(data);
    expect(answer.status).toBe(400);
    expect(((await answer.json()) as { error: string }).error).toMatch(
      /body\.inputs\[0\]: element 900 is not a finite number/,
    );
  });

  it('returns only the outputs a request names, and refuses an unknown one', async () => {
    const ask = (outputs: unknown) =>
      fetch(`${edge.url}/v2/models/edge/infer`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          ...tensor([1, 784], Array.from(test.x.subarray(0, pixels))),
          outputs,
        }),
      });
    const labelOnly = (await (await ask([{ name: 'label' }])).json()) as Outputs;
    expect(labelOnly.outputs.map((o) => o.name)).toEqual(['label']);
    expect(labelOnly.outputs[0]!.data).toEqual([test.y[0]]);
    const unknown = await ask([{ name: 'logits' }]);
    expect(unknown.status).toBe(400);
    expect(((await unknown.json()) as { error: string }).error).toMatch(
      /body\.outputs: logits is not an output of this model/,
    );
  });

  it('refuses an oversize body with 413 and keeps serving', async () => {
    const answer = await fetch(`${edge.url}/predict`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ instances: new Array(5000).fill(new Array(784).fill(0.5)) }),
    });
    expect(answer.status).toBe(413);
    expect((await infer(0, 1)).outputs).toBeDefined();
  });

  it('serves the simple instances form, model metadata and readiness', async () => {
    const answer = await fetch(`${edge.url}/predict`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ instances: [Array.from(test.x.subarray(0, pixels))] }),
    });
    const body = (await answer.json()) as { predictions: Array<{ label: number; tier: string }> };
    expect(body.predictions[0]!.label).toBe(test.y[0]);
    const metrics = await (await fetch(`${edge.url}/metrics`)).text();
    const sample = (name: string, ...labels: string[]) =>
      new RegExp(
        `^${name}\\{${labels.map((l) => `(?=[^}]*${l})`).join('')}[^}]*\\} ([0-9.e-]+)$`,
        'm',
      );
    const value = (pattern: RegExp) => Number(pattern.exec(metrics)?.[1] ?? 0);
    expect(
      value(sample('edgeai_inference_decisions_total', 'tier="cloud"', 'fallback="false"')),
    ).toBeGreaterThan(0);
    expect(
      value(sample('edgeai_inference_decisions_total', 'tier="edge"', 'fallback="true"')),
    ).toBe(counters.fallbacks);
    expect(
      value(sample('edgeai_inference_call_seconds_count', 'tier="cloud"', 'outcome="failed"')),
    ).toBeGreaterThan(0);
    expect(value(sample('edgeai_offload_ratio', 'function="edge-infer"'))).toBeCloseTo(
      counters.hardExampleNumber / counters.inferenceNumber,
      6,
    );
    const meta = await (await fetch(`${edge.url}/v2/models/edge`)).json();
    expect(meta).toMatchObject({
      name: 'edge',
      versions: ['1'],
      platform: 'onnxruntime_onnx',
      inputs: [{ name: 'input', datatype: 'FP32', shape: [-1, 784] }],
    });
    expect((meta as { outputs: unknown[] }).outputs).toEqual([
      { name: 'probabilities', datatype: 'FP32', shape: [-1, 10] },
      { name: 'label', datatype: 'INT32', shape: [-1] },
      { name: 'tier', datatype: 'BYTES', shape: [-1] },
      { name: 'hard', datatype: 'BOOL', shape: [-1] },
      { name: 'fallback', datatype: 'BOOL', shape: [-1] },
      { name: 'edge_label', datatype: 'INT32', shape: [-1] },
      { name: 'cloud_label', datatype: 'INT32', shape: [-1] },
    ]);
    expect((await fetch(`${edge.url}/v2/models/edge/ready`)).status).toBe(200);
  });
});
