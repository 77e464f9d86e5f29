/** jointInfer's decisions with plain fakes for the edge pool and the cloud. */
import { describe, expect, it } from 'vitest';
import { ConfigError, UnavailableError } from '../../../shared/errors/index.js';
import {
  WorkerCounters,
  checkJointSettings,
  createMiner,
  createTaskAdapter,
  jointInfer,
} from '../../../shared/inference/index.js';
import type { CloudClient, InferencePool, JointDeps } from '../../../shared/inference/index.js';

/** A 1-feature "model": probability of class 1 is the input itself. */
function fakePool(calls: number[]): InferencePool {
  return {
    signature: {
      inputs: [{ name: 'x', datatype: 'FP32', shape: [-1, 1] }],
      outputs: [{ name: 'p', datatype: 'FP32', shape: [-1, 2] }],
      batched: true,
    },
    infer: async (inputs, rows) => {
      calls.push(rows);
      const input = inputs['x']!.data as Float32Array;
      const out = new Float32Array(rows * 2);
      for (let i = 0; i < rows; i += 1) {
        out[i * 2] = 1 - input[i]!;
        out[i * 2 + 1] = input[i]!;
      }
      return { p: { datatype: 'FP32', shape: [rows, 2], data: out } };
    },
    queuedRows: () => 0,
    close: async () => {},
  };
}

const cloudSaying = (answer: number[] | Error): CloudClient => ({
  infer: async (inputs) => {
    if (answer instanceof Error) throw answer;
    const rows = inputs['x']!.shape[0]!;
    const data = Float32Array.from(Array.from({ length: rows }, () => answer).flat());
    return { probabilities: { datatype: 'FP32', shape: [rows, 2], data } };
  },
  breakerState: () => 'closed',
});

const pool = fakePool([]);
const task = createTaskAdapter({}, pool.signature);

const deps = (overrides: Partial<JointDeps>, calls: number[] = []): JointDeps => ({
  edge: fakePool(calls),
  task,
  cloud: cloudSaying([0, 1]),
  miner: createMiner('Threshold', { threshold: 0.8 }),
  settings: { miningMode: 'inference-then-mining', offload: 'sync', fallback: 'edge-result' },
  counters: new WorkerCounters(),
  ...overrides,
});

/** One-feature samples as the model's input. */
const x = (...values: number[]) => ({
  x: { datatype: 'FP32' as const, shape: [values.length, 1], data: Float32Array.from(values) },
});

describe('jointInfer', () => {
  it('sends only the unconfident samples to the cloud and counts each once', async () => {
    const d = deps({});
    const results = await jointInfer(d, x(0.95, 0.5, 0.05, 0.6), 4);
    expect(results.map((r) => r.tier)).toEqual(['edge', 'cloud', 'edge', 'cloud']);
    expect(d.counters).toMatchObject({
      inferenceNumber: 4,
      hardExampleNumber: 2,
      uploaded: 2,
      fallbacks: 0,
    });
  });

  it('falls back to the edge result, marked, or fails with 503, as configured', async () => {
    const down = new UnavailableError('cloud worker unavailable');
    const marked = deps({ cloud: cloudSaying(down) });
    const results = await jointInfer(marked, x(0.5, 0.99), 2);
    expect(results.map((r) => [r.tier, r.fallback])).toEqual([
      ['edge', true],
      ['edge', false],
    ]);
    expect(marked.counters).toMatchObject({ hardExampleNumber: 1, uploaded: 0, fallbacks: 1 });
    const strict = deps({
      cloud: cloudSaying(down),
      settings: { miningMode: 'inference-then-mining', offload: 'sync', fallback: 'error' },
    });
    await expect(jointInfer(strict, x(0.5), 1)).rejects.toThrow(UnavailableError);
  });

  it('mining-then-inference skips the edge model for samples sent to the cloud', async () => {
    const calls: number[] = [];
    const d = deps(
      {
        miner: createMiner('CloudOnly'),
        settings: { miningMode: 'mining-then-inference', offload: 'sync', fallback: 'edge-result' },
      },
      calls,
    );
    const results = await jointInfer(d, x(0.9, 0.1), 2);
    expect(calls).toEqual([]);
    expect(results.every((r) => r.tier === 'cloud' && r.edge === undefined)).toBe(true);
  });

  it('async offload hands hard samples to the sink and answers from the edge', async () => {
    const sent: number[] = [];
    const d = deps({
      settings: { miningMode: 'inference-then-mining', offload: 'async', fallback: 'edge-result' },
      emitHardExamples: async (_input, rows) => {
        sent.push(rows);
      },
    });
    const results = await jointInfer(d, x(0.5, 0.99, 0.4), 3);
    expect(sent).toEqual([2]);
    expect(results.every((r) => r.tier === 'edge')).toBe(true);
    expect(d.counters.uploaded).toBe(2);
  });

  it('refuses settings that cannot work, naming the variable', () => {
    expect(() =>
      checkJointSettings(
        { miningMode: 'mining-then-inference', offload: 'sync', fallback: 'error' },
        'Threshold',
        task,
        false,
      ),
    ).toThrow(/MINING_MODE: mining-then-inference .* not Threshold/);
    expect(() =>
      checkJointSettings(
        { miningMode: 'inference-then-mining', offload: 'async', fallback: 'error' },
        'IBT',
        task,
        false,
      ),
    ).toThrow(ConfigError);
    expect(() =>
      checkJointSettings(
        { miningMode: 'mining-then-inference', offload: 'async', fallback: 'error' },
        'CloudOnly',
        task,
        true,
      ),
    ).toThrow(/OFFLOAD_MODE: async offload answers every sample with the edge result/);
    const raw = createTaskAdapter({ kind: 'raw' }, pool.signature);
    expect(() =>
      checkJointSettings(
        { miningMode: 'inference-then-mining', offload: 'sync', fallback: 'error' },
        'Threshold',
        raw,
        false,
      ),
    ).toThrow(/HEM_NAME: Threshold reads class scores or boxes, but the task is raw/);
  });
});
