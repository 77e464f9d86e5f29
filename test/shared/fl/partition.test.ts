/** Client partitions: complete, seeded, and as skewed as each scheme promises. */
import { describe, expect, it } from 'vitest';
import { ValidationError } from '../../../shared/errors/index.js';
import {
  labelHistogram,
  partition,
  sampleDirichlet,
  sampleGamma,
} from '../../../shared/fl/partition.js';
import type { PartitionOptions } from '../../../shared/fl/partition.js';
import { seededRandom } from '../../../shared/random/index.js';
import { loadMnist } from '../../../shared/training/data.js';

const labels = loadMnist().train.y;

/** Every index 0 to n - 1 exactly once across the parts, each part ascending. */
function expectComplete(parts: number[][], n: number): void {
  const all = parts.flat();
  expect(all.length).toBe(n);
  expect(new Set(all).size).toBe(n);
  expect(Math.min(...all)).toBe(0);
  expect(Math.max(...all)).toBe(n - 1);
  for (const part of parts) expect(part).toEqual([...part].sort((a, b) => a - b));
}

/** Mean over clients of the largest label's share of the client's samples. */
function meanTopShare(parts: number[][]): number {
  const shares = parts
    .filter((p) => p.length > 0)
    .map((p) => Math.max(...labelHistogram(labels, p, 10)) / p.length);
  return shares.reduce((a, b) => a + b, 0) / shares.length;
}

describe('partition', () => {
  it.each<PartitionOptions>([
    { kind: 'iid', clients: 10, seed: 1 },
    { kind: 'iid', clients: 7, seed: 2 },
    { kind: 'shards', clients: 10, seed: 1 },
    { kind: 'shards', clients: 13, seed: 3, shardsPerClient: 3 },
    { kind: 'dirichlet', clients: 10, seed: 1, alpha: 0.1 },
    { kind: 'dirichlet', clients: 10, seed: 1, alpha: 100 },
  ])('%o holds every index exactly once', (options) => {
    expectComplete(partition(labels, options), labels.length);
  });

  it('iid: equal shares (within one) and label histograms close to the whole set', () => {
    const parts = partition(labels, { kind: 'iid', clients: 10, seed: 1 });
    const whole = labelHistogram(labels, [...labels.keys()], 10).map((c) => c / labels.length);
    for (const part of parts) {
      expect(part.length).toBeGreaterThanOrEqual(702);
      expect(part.length).toBeLessThanOrEqual(703);
      labelHistogram(labels, part, 10).forEach((count, k) => {
        expect(Math.abs(count / part.length - whole[k]!)).toBeLessThan(0.04);
      });
    }
  });

  it('shards: two one-label shards per client when every label fills whole shards', () => {
    // 10 labels x 60 samples, 10 clients: 20 shards of 30, each within one label.
    const even = Uint8Array.from({ length: 600 }, (_, i) => (i * 7) % 10);
    for (const seed of [1, 2, 3]) {
      const parts = partition(even, { kind: 'shards', clients: 10, seed });
      expectComplete(parts, 600);
      for (const part of parts) {
        expect(part.length).toBe(60);
        expect(labelHistogram(even, part, 10).filter((c) => c > 0).length).toBeLessThanOrEqual(2);
      }
    }
  });

  it('shards on the digits: few labels per client, far from IID', () => {
    const parts = partition(labels, { kind: 'shards', clients: 10, seed: 1 });
    for (const part of parts) {
      expect(part.length).toBe(702);
      expect(labelHistogram(labels, part, 10).filter((c) => c > 0).length).toBeLessThanOrEqual(4);
    }
    expect(meanTopShare(parts)).toBeGreaterThan(0.45);
  });

  it('dirichlet: a small alpha is more skewed than a large one', () => {
    const skew = (alpha: number) =>
      meanTopShare(partition(labels, { kind: 'dirichlet', clients: 10, seed: 5, alpha }));
    const small = skew(0.1);
    const medium = skew(1);
    const large = skew(100);
    expect(small).toBeGreaterThan(medium);
    expect(medium).toBeGreaterThan(large);
    expect(small).toBeGreaterThan(0.5);
    expect(large).toBeLessThan(0.2);
  });

  it('dirichlet: redraws until every client has minSamples', () => {
    const parts = partition(labels, {
      kind: 'dirichlet',
      clients: 20,
      seed: 2,
      alpha: 0.3,
      minSamples: 50,
    });
    expectComplete(parts, labels.length);
    for (const part of parts) expect(part.length).toBeGreaterThanOrEqual(50);
  });

  it('is a function of the seed', () => {
    for (const kind of ['iid', 'shards', 'dirichlet'] as const) {
      const a = partition(labels, { kind, clients: 10, seed: 9 });
      expect(partition(labels, { kind, clients: 10, seed: 9 })).toEqual(a);
      expect(partition(labels, { kind, clients: 10, seed: 10 })).not.toEqual(a);
    }
  });

  it('refuses options that do not fit', () => {
    const refuse = (options: PartitionOptions, message: RegExp) => {
      expect(() => partition(labels, options)).toThrow(ValidationError);
      expect(() => partition(labels, options)).toThrow(message);
    };
    refuse({ kind: 'iid', clients: 0, seed: 1 }, /clients 0 is not an integer from 1 to 7020/);
    refuse({ kind: 'iid', clients: 8000, seed: 1 }, /clients 8000/);
    refuse({ kind: 'dirichlet', clients: 3, seed: 1, alpha: 0 }, /alpha 0 is not/);
    refuse({ kind: 'shards', clients: 3, seed: 1, shardsPerClient: 0 }, /shardsPerClient 0/);
    refuse(
      { kind: 'shards', clients: 5000, seed: 1 },
      /shardsPerClient 2 is not an integer from 1 to 1/,
    );
    refuse({ kind: 'nope' as 'iid', clients: 3, seed: 1 }, /split nope is not one of/);
    // 1000 draws, each short of 140 samples for some client: refused once, not retried forever.
    expect(() =>
      partition(labels, { kind: 'dirichlet', clients: 50, seed: 1, alpha: 0.01, minSamples: 140 }),
    ).toThrow(/no Dirichlet\(0.01\) partition over 50 clients gave each 140 samples in 1000 draws/);
  });
});

describe('Gamma and Dirichlet draws', () => {
  it.each([0.1, 0.5, 1, 2.5, 10])('Gamma(%f) has mean and variance near its shape', (shape) => {
    const uniform = seededRandom(42);
    const n = 40_000;
    const draws = Array.from({ length: n }, () => sampleGamma(shape, uniform));
    const mean = draws.reduce((a, b) => a + b, 0) / n;
    const variance = draws.reduce((a, b) => a + (b - mean) ** 2, 0) / n;
    expect(draws.every((d) => d >= 0 && Number.isFinite(d))).toBe(true);
    expect(Math.abs(mean - shape)).toBeLessThan(0.03 * Math.max(1, shape));
    expect(Math.abs(variance - shape) / shape).toBeLessThan(0.1);
  });

  it('Dirichlet shares sum to one, even for a tiny alpha', () => {
    const uniform = seededRandom(3);
    for (const alpha of [0.001, 0.5, 50]) {
      const shares = sampleDirichlet(alpha, 10, uniform);
      expect(Math.abs(shares.reduce((a, b) => a + b, 0) - 1)).toBeLessThan(1e-12);
      expect(shares.every((s) => s >= 0)).toBe(true);
    }
  });
});
