/**
 * Fitting drift references: the PCA recovers a known covariance, the pooling plan follows the
 * input's shape, and on MNIST the committed reference (models/edge.drift.json, which a refit
 * reproduces) flags about 5% of clean held-out digits and most strongly noised ones.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { createOutlierScorer, parseDriftReference } from '../../../shared/inference/outlier.js';
import type { DriftReference } from '../../../shared/inference/outlier.js';
import { loadMnist, pixels } from '../../../shared/training/data.js';
import { fitDriftReference, planPooling } from '../../../shared/training/drift-reference.js';
import { perturbImages } from '../../../shared/training/perturb.js';
import { normal, seededRandom } from '../../../shared/random/index.js';

const models = new URL('../../../models/', import.meta.url);
const committed = (file: string): DriftReference =>
  parseDriftReference(JSON.parse(readFileSync(new URL(file, models), 'utf8')));

/** The 16 x 16 Sylvester-Hadamard matrix over sqrt(16): orthonormal, every entry +-1/4. */
function hadamard(n: number): number[][] {
  let h = [[1]];
  while (h.length < n) {
    h = [...h.map((row) => [...row, ...row]), ...h.map((row) => [...row, ...row.map((v) => -v)])];
  }
  return h.map((row) => row.map((v) => v / Math.sqrt(n)));
}

/**
 * `rows` samples of x = Q diag(sqrt(lambda)) g + 0.5, g standard normal, Q the Hadamard basis:
 * covariance Q diag(lambda) Q^T, whose diagonal is mean(lambda) everywhere, so standardizing
 * the features scales every eigenvalue by the same factor.
 */
function gaussian(lambda: readonly number[], rows: number, seed: number) {
  const n = lambda.length;
  const q = hadamard(n);
  const draw = normal(seededRandom(seed));
  const data = new Float32Array(rows * n);
  for (let r = 0; r < rows; r += 1) {
    const g = lambda.map((l) => Math.sqrt(l) * draw());
    for (let i = 0; i < n; i += 1) {
      let v = 0.5;
      for (let j = 0; j < n; j += 1) v += q[i]![j]! * g[j]!;
      data[r * n + i] = v;
    }
  }
  return { data, rows, q };
}

/** Every number of a reference, in a fixed order. */
function numbersOf(reference: DriftReference): number[] {
  const { quantiles: q } = reference;
  return [
    ...reference.mean,
    ...reference.scale,
    ...reference.components.flat(),
    ...reference.eigenvalues,
    reference.residualScale,
    reference.residualWeight,
    q.mean,
    q.std,
    q.p50,
    q.p90,
    q.p95,
    q.p99,
  ];
}

/** A reference less its fitted numbers: the fields that must match exactly. */
function withoutFigures(reference: DriftReference) {
  const { mean, scale, components, eigenvalues, quantiles, residualScale, ...rest } = reference;
  return { ...rest, validationSamples: quantiles.samples };
}

describe('planPooling', () => {
  it('pools images so each side is at most 16 and keeps or groups flat vectors', () => {
    expect(planPooling([784])).toEqual({
      kind: 'grid',
      channels: 1,
      height: 28,
      width: 28,
      strideY: 2,
      strideX: 2,
    });
    expect(planPooling([1, 64, 64])).toMatchObject({ kind: 'grid', strideY: 4, strideX: 4 });
    expect(planPooling([3, 33, 10])).toMatchObject({ channels: 3, strideY: 3, strideX: 1 });
    expect(planPooling([20, 30])).toMatchObject({ channels: 1, height: 20, width: 30 });
    expect(planPooling([200])).toEqual({ kind: 'groups', length: 200, size: 1 });
    expect(planPooling([1000])).toEqual({ kind: 'groups', length: 1000, size: 4 });
    expect(planPooling([2, 3, 4, 50])).toEqual({ kind: 'groups', length: 1200, size: 5 });
    expect(() => planPooling([-1, 784])).toThrow(RangeError);
  });
});

describe('fitDriftReference', () => {
  it('recovers the leading eigenvalues and directions of a known covariance', () => {
    const lambda = [16, 8, 4, 2, ...Array<number>(12).fill(0.5)];
    const train = gaussian(lambda, 6000, 1);
    const validation = gaussian(lambda, 1000, 2);
    const { reference, report } = fitDriftReference(train, validation, {
      input: 'x',
      shape: [16],
      components: 4,
    });
    // Every feature's spread is sqrt(mean(lambda)), floored by 0.05 of itself.
    const spread = lambda.reduce((a, b) => a + b, 0) / lambda.length;
    const factor = spread * (1 + 0.05 ** 2);
    reference.scale.forEach((s) => expect(s * s).toBeCloseTo(factor, 0));
    reference.eigenvalues.forEach((value, j) => {
      expect(value * factor).toBeGreaterThan(lambda[j]! * 0.9);
      expect(value * factor).toBeLessThan(lambda[j]! * 1.1);
      // The j-th component is (up to sign) the j-th Hadamard column.
      const dot = reference.components[j]!.reduce((a, v, i) => a + v * train.q[i]![j]!, 0);
      expect(Math.abs(dot)).toBeGreaterThan(0.97);
    });
    reference.mean.forEach((m) => expect(m).toBeCloseTo(0.5, 1));
    expect(report.explainedVariance).toBeCloseTo(30 / 36, 1);
    // On the training inputs T^2 averages k, the weighted residual D - k.
    expect(report.trainMahalanobis).toBeCloseTo(4, 0);
    expect(report.trainResidual).toBeCloseTo(12, 4);
    expect(reference.residualWeight).toBe(12);
    // Gaussian data: the score is about chi-square with 16 degrees of freedom.
    expect(reference.quantiles.mean).toBeGreaterThan(14);
    expect(reference.quantiles.mean).toBeLessThan(18);
    expect(reference.quantiles.samples).toBe(1000);
    expect(reference.samples).toBe(6000);
  });

  it('keeps only directions that vary', () => {
    // Two features that vary and two that never do.
    const rows = 200;
    const uniform = seededRandom(3);
    const make = () => {
      const data = new Float32Array(rows * 4);
      for (let r = 0; r < rows; r += 1) data.set([uniform(), uniform(), 0, 0.5], r * 4);
      return { data, rows };
    };
    const { reference } = fitDriftReference(make(), make(), {
      input: 'x',
      shape: [2, 2],
      components: 4,
    });
    expect(reference.components.length).toBe(2);
  });

  it('refuses rows that do not match the shape', () => {
    const data = { data: new Float32Array(10), rows: 2 };
    expect(() => fitDriftReference(data, data, { input: 'x', shape: [4] })).toThrow(/rows of 4/);
  });
});

describe('models/edge.drift.json on MNIST', () => {
  const data = loadMnist();
  const reference = committed('edge.drift.json');
  const scorer = createOutlierScorer(reference, {
    name: 'input',
    datatype: 'FP32',
    shape: [-1, pixels],
  });
  const shareAboveP95 = (x: Float32Array, n: number) => {
    const scores = scorer.score({ datatype: 'FP32', shape: [n, pixels], data: x }, n);
    return scores.filter((s) => s > reference.quantiles.p95).length / n;
  };

  it('is what a refit on the training split gives', () => {
    const { reference: refit } = fitDriftReference(
      { data: data.train.x, rows: data.train.n },
      { data: data.validation.x, rows: data.validation.n },
      { input: 'input', shape: [pixels], description: reference.description ?? '' },
    );
    // The file holds float32 values in their shortest form; the fit, float32 values. Up to
    // the last float32 digit they are the same numbers.
    expect(numbersOf(refit).length).toBe(numbersOf(reference).length);
    const stored = numbersOf(reference);
    numbersOf(refit).forEach((v, i) => {
      expect(Math.abs(v - stored[i]!), `number ${i}`).toBeLessThanOrEqual(
        1e-6 * Math.abs(v) + 1e-12,
      );
    });
    expect(withoutFigures(refit)).toEqual(withoutFigures(reference));
  });

  it('flags about 5% of clean held-out digits above p95', () => {
    expect(shareAboveP95(data.validation.x, data.validation.n)).toBeCloseTo(0.05, 2);
    const test = shareAboveP95(data.test.x, data.test.n);
    expect(test).toBeGreaterThan(0.025);
    expect(test).toBeLessThan(0.08);
  });

  it('flags most digits under strong noise, and more as the noise grows', () => {
    const noisy = (sigma: number) =>
      shareAboveP95(
        perturbImages(
          data.test.x,
          data.test.n,
          28,
          28,
          { kind: 'noise', strength: sigma, label: '' },
          7,
        ),
        data.test.n,
      );
    const [weak, strong] = [noisy(0.02), noisy(0.3)];
    expect(weak).toBeLessThan(0.1);
    expect(strong).toBeGreaterThan(0.95);
  });
});
