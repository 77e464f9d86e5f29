/**
 * Central DP: clipping bounds every update's delta (a property over arbitrary updates), the
 * clipped mean is hand-computed, the noise's spread is Flower's z C / n, and the report names
 * the clipped updates and nothing of their values.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { aggregate } from '../../../../shared/fl/strategy/aggregate.js';
import {
  clipInPlace,
  noiseStdv,
  privateMeanDelta,
} from '../../../../shared/fl/strategy/privacy.js';
import { fedOptDefaults } from '../../../../shared/fl/strategy/server-opt.js';
import { initialState } from '../../../../shared/fl/strategy/state.js';
import { deltaOf, squaredNorm } from '../../../../shared/fl/strategy/tensors.js';
import type { CentralDp } from '../../../../shared/fl/strategy/types.js';
import { bytesOf, expectClose, model, update } from './support.js';

const dp = (over: Partial<CentralDp> = {}): CentralDp => ({
  kind: 'dp-fixed-clipping',
  noiseMultiplier: 0,
  clippingNorm: 1,
  sampledClients: 2,
  seed: 7,
  inner: { kind: 'fedavg' },
  ...over,
});

describe('noiseStdv', () => {
  it("is Flower's compute_stdv: noise_multiplier * clipping_norm / num_sampled_clients", () => {
    expect(noiseStdv(1.1, 2, 10)).toBeCloseTo(0.22, 15);
    expect(noiseStdv(0, 5, 3)).toBe(0);
  });
});

describe('clipping', () => {
  const floats = fc.float({ min: -1e4, max: 1e4, noNaN: true });

  it("bounds every clipped delta's L2 norm by C (and leaves one within C alone)", () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(floats, floats), { minLength: 1, maxLength: 64 }),
        fc.double({ min: 1e-3, max: 1e3, noNaN: true }),
        (pairs, clippingNorm) => {
          const values = [Float32Array.from(pairs.map(([u]) => u))];
          const from = [Float32Array.from(pairs.map(([, b]) => b))];
          const delta = deltaOf(values, from);
          const before = Math.sqrt(squaredNorm(delta));
          const original = Float64Array.from(delta[0]!);
          const clipped = clipInPlace(delta, clippingNorm);
          const after = Math.sqrt(squaredNorm(delta));
          expect(after).toBeLessThanOrEqual(clippingNorm + 1e-9);
          expect(clipped).toBe(before > clippingNorm);
          if (!clipped) expect(delta[0]).toEqual(original);
        },
      ),
      { seed: 42, numRuns: 500 },
    );
  });

  it("bounds the whole pipeline: one update's noiseless mean delta is within C", () => {
    fc.assert(
      fc.property(
        fc.array(floats, { minLength: 2, maxLength: 2 }),
        fc.array(floats, { minLength: 2, maxLength: 2 }),
        fc.array(floats, { minLength: 1, maxLength: 1 }),
        fc.double({ min: 1e-3, max: 1e3, noNaN: true }),
        (w, base, b, clippingNorm) => {
          const model0 = model({ w: base, b: [0] });
          const u = update('a', 1, { w, b });
          const { delta } = privateMeanDelta(
            model0,
            [u],
            dp({ clippingNorm, sampledClients: 1 }),
            1,
          );
          expect(Math.sqrt(squaredNorm(delta))).toBeLessThanOrEqual(clippingNorm + 1e-9);
        },
      ),
      { seed: 43, numRuns: 300 },
    );
  });

  it('averages the clipped deltas over n and names the clipped workers (hand-computed)', () => {
    const base = model({ w: [1, 1] });
    // a's delta [3 4] (norm 5) is clipped to [0.6 0.8]; b's [0.3 0] (norm 0.3) is kept;
    // mean over n = 2: [0.45 0.4]; no noise.
    const updates = [update('b', 10, { w: [1.3, 1] }), update('a', 1, { w: [4, 5] })];
    const out = aggregate(dp(), base, updates, initialState, 1);
    expectClose(out.weights, { w: [1.45, 1.4] });
    expect(out.report).toEqual({
      strategy: 'dp-fixed-clipping',
      rejected: [],
      clipped: [{ worker: 'a', reason: 'delta over the clipping norm 1' }],
      noiseStdv: 0,
    });
    // Fixed denominator: with n = 4 sampled and these 2 arriving, the mean is halved.
    expectClose(aggregate(dp({ sampledClients: 4 }), base, updates, initialState, 1).weights, {
      w: [1.225, 1.2],
    });
  });

  it('hands the private mean to the server optimizer (FedAdagrad: w + eta d / (|d| + tau))', () => {
    const base = model({ w: [1, 1] });
    const updates = [update('a', 1, { w: [4, 5] }), update('b', 1, { w: [1.3, 1] })];
    const inner = fedOptDefaults.fedadagrad;
    const out = aggregate(dp({ inner }), base, updates, initialState, 1);
    // d = [0.45 0.4]: m = d, v = d^2, w = 1 + 0.1 d / (|d| + 1e-9) = [1.1 1.1].
    expectClose(out.weights, { w: [1.1, 1.1] });
    expect(out.state.kind).toBe('moments');
  });
});

describe('noise', () => {
  const size = 200_000;
  const base = model({ w: new Array<number>(size).fill(0) });
  const same = [update('a', 1, { w: new Array<number>(size).fill(0) })];

  it('has the documented standard deviation z C / n, mean zero, on every coordinate', () => {
    const strategy = dp({ noiseMultiplier: 1.2, clippingNorm: 2.5, sampledClients: 4 });
    const out = aggregate(strategy, base, same, initialState, 1);
    const expected = (1.2 * 2.5) / 4; // 0.75
    expect(out.report.noiseStdv).toBeCloseTo(expected, 15);
    const values = out.weights.get('w')!.values;
    let sum = 0;
    let squares = 0;
    for (const v of values) {
      sum += v;
      squares += v * v;
    }
    const mean = sum / size;
    const std = Math.sqrt(squares / size - mean * mean);
    // The sample std of 200,000 normals is within sigma (1 +- 1/sqrt(2 * 200,000)) at one
    // standard error; 1% is 6 standard errors (and the seed is fixed: the figure never moves).
    expect(Math.abs(std / expected - 1)).toBeLessThan(0.01);
    expect(Math.abs(mean)).toBeLessThan((6 * expected) / Math.sqrt(size));
  });

  it('is reproducible from the seed and round, and differs between rounds and seeds', () => {
    const strategy = dp({ noiseMultiplier: 1, sampledClients: 1 });
    const small = model({ w: [0, 0, 0] });
    const zero = [update('a', 1, { w: [0, 0, 0] })];
    const run = (s: CentralDp, round: number) =>
      bytesOf(aggregate(s, small, zero, initialState, round).weights);
    expect(run(strategy, 1).equals(run(strategy, 1))).toBe(true);
    expect(run(strategy, 1).equals(run(strategy, 2))).toBe(false);
    expect(run(strategy, 1).equals(run({ ...strategy, seed: 8 }, 1))).toBe(false);
  });

  it('refuses parameters out of range', () => {
    const base1 = model({ w: [0] });
    const one = [update('a', 1, { w: [0] })];
    const cases: Array<[Partial<CentralDp>, string]> = [
      [{ noiseMultiplier: -1 }, 'dp noiseMultiplier -1 is not a finite number >= 0'],
      [{ clippingNorm: 0 }, 'dp clippingNorm 0 is not a finite number > 0'],
      [{ sampledClients: 0 }, 'dp sampledClients 0 is not an integer >= 1'],
      [{ seed: 0.5 }, 'dp seed 0.5 is not an integer'],
      [{ inner: { kind: 'fedprox', mu: -2 } }, 'fedprox mu -2 is not a finite number >= 0'],
    ];
    for (const [over, message] of cases) {
      expect(() => aggregate(dp(over), base1, one, initialState, 1)).toThrow(message);
    }
  });
});
