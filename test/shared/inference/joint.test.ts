/** jointInfer's decisions with plain fakes for the edge pool and the cloud. */
import { describe, expect, it } from 'vitest';
import { UnavailableError, ValidationError } from '../../../shared/errors/index.js';
import {
  WorkerCounters,
  checkJointSettings,
  createMiner,
  jointInfer,
} from '../../../shared/inference/index.js';
import type { CloudClient, InferencePool, JointDeps } from '../../../shared/inference/index.js';

/** A 1-feature "model": probability of class 1 is the input itself. */
function fakePool(calls: number[]): InferencePool {
  return {
    inputWidth: 1,
    outputWidth: 2,
    infer: async (input, rows) => {
      calls.push(rows);
      const out = new Float32Array(rows * 2);
      for (let i = 0; i < rows; i += 1) {
        out[i * 2] = 1 - input[i]!;
        out[i * 2 + 1] = input[i]!;
      }
      return out;
    },
    queuedRows: () => 0,
    close: async () => {},
  };
}

const cloudSaying = (answer: number[] | Error): CloudClient => ({
  infer: async (_input, rows) => {
    if (answer instanceof Error) throw answer;
    return Float32Array.from(Array.from({ length: rows }, () => answer).flat());
  },
  breakerState: () => 'closed',
});

const deps = (overrides: Partial<JointDeps>, calls: number[] = []): JointDeps => ({
  edge: fakePool(calls),
  cloud: cloudSaying([0, 1]),
  miner: createMiner('Threshold', { threshold: 0.8 }),
  settings: { miningMode: 'inference-then-mining', offload: 'sync', fallback: 'edge-result' },
  counters: new WorkerCounters(),
  ...overrides,
});

describe('jointInfer', () => {
  it('sends only the unconfident samples to the cloud and counts each once', async () => {
    const d = deps({});
    const results = await jointInfer(d, Float32Array.from([0.95, 0.5, 0.05, 0.6]), 4);
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
    const results = await jointInfer(marked, Float32Array.from([0.5, 0.99]), 2);
    expect(results.map((r) => [r.tier, r.fallback])).toEqual([
      ['edge', true],
      ['edge', false],
    ]);
    expect(marked.counters).toMatchObject({ hardExampleNumber: 1, uploaded: 0, fallbacks: 1 });
    const strict = deps({
      cloud: cloudSaying(down),
      settings: { miningMode: 'inference-then-mining', offload: 'sync', fallback: 'error' },
    });
    await expect(jointInfer(strict, Float32Array.from([0.5]), 1)).rejects.toThrow(UnavailableError);
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
    const results = await jointInfer(d, Float32Array.from([0.9, 0.1]), 2);
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
    const results = await jointInfer(d, Float32Array.from([0.5, 0.99, 0.4]), 3);
    expect(sent).toEqual([2]);
    expect(results.every((r) => r.tier === 'edge')).toBe(true);
    expect(d.counters.uploaded).toBe(2);
  });

  it('refuses settings that cannot work, naming the variable', () => {
    expect(() =>
      checkJointSettings(
        { miningMode: 'mining-then-inference', offload: 'sync', fallback: 'error' },
        'Threshold',
        false,
      ),
    ).toThrow(/MINING_MODE: mining-then-inference .* not Threshold/);
    expect(() =>
      checkJointSettings(
        { miningMode: 'inference-then-mining', offload: 'async', fallback: 'error' },
        'IBT',
        false,
      ),
    ).toThrow(ValidationError);
  });
});
