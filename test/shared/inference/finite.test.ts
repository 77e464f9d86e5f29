/**
 * Binary FP32 inputs checked for finiteness by the inference thread instead of the parser on the
 * HTTP thread (shared/inference/finite.ts): the answer is the parser's own 400, word for word; in
 * a joined run only the request holding the value fails and the others are answered as if alone;
 * the edge worker over real HTTP (real pool, the committed model) in both mining modes.
 */
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ValidationError } from '../../../shared/errors/index.js';
import { buildServer } from '../../../shared/http/index.js';
import {
  WorkerCounters,
  createInferencePool,
  createMiner,
  createTaskAdapter,
  edgeInferDefinition,
} from '../../../shared/inference/index.js';
import type { JointDeps } from '../../../shared/inference/index.js';
import { loadOnnxModel } from '../../../shared/inference/onnx-runtime.js';
import type { ServingPool } from '../../../shared/inference/pool.js';
import { parseInferRequest } from '../../../shared/inference/protocol.js';
import { loadMnist, pixels } from '../../../shared/training/data.js';
import { capturedTelemetry, listen } from '../../support/http.js';
import type { Listening } from '../../support/http.js';

const model = new Uint8Array(readFileSync(new URL('../../../models/edge.onnx', import.meta.url)));
const { test } = loadMnist();

/** Rows `from` to `from + rows` of the test digits, with `bad` values written over elements. */
function digits(from: number, rows: number, bad: ReadonlyArray<[number, number]> = []) {
  const data = test.x.slice(from * pixels, (from + rows) * pixels);
  for (const [element, value] of bad) data[element] = value;
  return data;
}

/** An OIP binary request: its JSON header and the body after it. */
function binaryRequest(data: Float32Array, rows: number) {
  const header = {
    inputs: [
      {
        name: 'input',
        shape: [rows, pixels],
        datatype: 'FP32',
        data: [],
        parameters: { binary_data_size: data.byteLength },
      },
    ],
  };
  return { header, binary: new Uint8Array(data.buffer, data.byteOffset, data.byteLength) };
}

/** What the parser says of the request when it checks the elements itself. */
function parserSays(pool: ServingPool, data: Float32Array, rows: number): string {
  const { header, binary } = binaryRequest(data, rows);
  const parsing = { signature: pool.signature, served: pool.signature.outputs, maxBatch: 256 };
  try {
    parseInferRequest(header, parsing, binary);
  } catch (err) {
    expect(err).toBeInstanceOf(ValidationError);
    return (err as Error).message;
  }
  throw new Error('the parser took a value that is not finite');
}

const probabilities = (out: Record<string, { data: unknown }>) =>
  Array.from(out['probabilities']!.data as Float32Array);

describe('finiteness checked in the inference thread', () => {
  let pool: ServingPool;
  const runs: number[] = [];

  beforeAll(async () => {
    pool = await createInferencePool({
      model,
      threads: 1,
      maxBatch: 256,
      maxQueueRows: 4096,
      // Long enough for the requests below to join in one run.
      maxWaitMs: 50,
      onRun: (rows) => runs.push(rows),
    });
  });
  afterAll(() => pool.close());

  it('is left to the thread when the caller asks, and checked by the parser otherwise', () => {
    const data = digits(0, 2, [[900, Number.NaN]]);
    const { header, binary } = binaryRequest(data, 2);
    const parsing = { signature: pool.signature, served: pool.signature.outputs, maxBatch: 256 };
    const deferred = parseInferRequest(header, parsing, binary, { deferFinite: true });
    expect(deferred.unchecked).toEqual([{ input: 'input', where: 'input input: body.inputs[0]' }]);
    expect(parserSays(pool, data, 2)).toBe(
      'input input: body.inputs[0]: element 900 is not a finite number (NaN)',
    );
    // JSON data is checked as it is read, whatever the caller asks.
    const json = {
      inputs: [{ name: 'input', shape: [1, pixels], datatype: 'FP32', data: [...digits(0, 1)] }],
    };
    expect(parseInferRequest(json, parsing, undefined, { deferFinite: true }).unchecked).toBe(
      undefined,
    );
  });

  it('fails only the requests of a joined run that hold such a value, with the parser’s 400', async () => {
    const bad = new Map<number, Array<[number, number]>>([
      [3, [[5, Number.NaN]]],
      [6, [[700, Number.POSITIVE_INFINITY]]],
    ]);
    const unchecked = [{ input: 'input', where: 'input input: body.inputs[0]' }];
    const requests = Array.from({ length: 8 }, (_, i) => digits(i, 1, bad.get(i)));
    const direct = await loadOnnxModel(model);
    const expected = await direct.run(test.x.slice(0, 8 * pixels), 8);
    await direct.close();
    runs.length = 0;
    const outcomes = await Promise.allSettled(
      requests.map((data) =>
        pool.infer({ input: { datatype: 'FP32', shape: [1, pixels], data } }, 1, unchecked),
      ),
    );
    // One run refused whole by the thread before running, then the six others joined again.
    expect(runs).toEqual([8, 6]);
    outcomes.forEach((outcome, i) => {
      if (bad.has(i)) {
        expect(outcome.status).toBe('rejected');
        const reason = (outcome as PromiseRejectedResult).reason as Error;
        expect(reason).toBeInstanceOf(ValidationError);
        expect(reason.message).toBe(parserSays(pool, requests[i]!, 1));
        return;
      }
      expect(outcome.status).toBe('fulfilled');
      const out = (outcome as PromiseFulfilledResult<Record<string, { data: unknown }>>).value;
      probabilities(out).forEach((p, k) => expect(p).toBeCloseTo(expected[i * 10 + k]!, 6));
    });
  });
});

describe('edge-infer over HTTP with binary inputs that are not finite', () => {
  const modes = ['inference-then-mining', 'mining-then-inference'] as const;
  let pool: ServingPool;
  const servers = new Map<string, Listening>();

  beforeAll(async () => {
    pool = await createInferencePool({
      model,
      threads: 1,
      maxBatch: 256,
      maxQueueRows: 4096,
      maxWaitMs: 0,
    });
    for (const miningMode of modes) {
      const joint: JointDeps = {
        edge: pool,
        task: createTaskAdapter({}, pool.signature),
        cloud: undefined,
        miner: createMiner('EdgeOnly', {}),
        settings: { miningMode, offload: 'sync', fallback: 'edge-result' },
        counters: new WorkerCounters(),
      };
      const definition = edgeInferDefinition({
        model: { name: 'edge', version: '1' },
        joint,
        maxBatch: 256,
        readiness: [],
      });
      const options = {
        telemetry: capturedTelemetry('edge-infer'),
        bodyLimitBytes: 4 << 20,
        readinessTimeoutMs: 1000,
      };
      servers.set(miningMode, await listen(buildServer(definition, options)));
    }
  });
  afterAll(async () => {
    for (const server of servers.values()) await server.close();
    await pool.close();
  });

  /** POSTs the request in OIP's binary form; the status and the body's `error` or outputs. */
  async function post(url: string, data: Float32Array, rows: number) {
    const { header, binary } = binaryRequest(data, rows);
    const head = Buffer.from(JSON.stringify(header));
    const answer = await fetch(`${url}/v2/models/edge/infer`, {
      method: 'POST',
      headers: {
        'content-type': 'application/octet-stream',
        'inference-header-content-length': String(head.length),
      },
      body: Buffer.concat([head, binary]),
    });
    return { status: answer.status, body: (await answer.json()) as Record<string, unknown> };
  }

  it.each(modes)(
    '%s: 400 with the parser’s message, the clean requests beside it 200',
    async (mode) => {
      const url = servers.get(mode)!.url;
      const dirty = digits(0, 64, [[10 * pixels + 3, Number.NEGATIVE_INFINITY]]);
      const [bad, ...good] = await Promise.all([
        post(url, dirty, 64),
        post(url, digits(64, 64), 64),
        post(url, digits(128, 1), 1),
      ]);
      expect(bad.status).toBe(400);
      expect(bad.body).toEqual({ error: parserSays(pool, dirty, 64) });
      expect(bad.body['error']).toContain('element 7843 is not a finite number (-Infinity)');
      for (const answer of good) {
        expect(answer.status).toBe(200);
        expect(answer.body['outputs']).toBeInstanceOf(Array);
      }
    },
  );
});
