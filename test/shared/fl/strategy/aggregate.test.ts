/**
 * The aggregation strategies against hand-computed cases (each also what Flower's aggregate.py,
 * fedadam.py, fedyogi.py and fedadagrad.py give for the same numbers), Krum against poisoned
 * updates, and the refusals.
 */
import { describe, expect, it } from 'vitest';
import { ValidationError } from '../../../../shared/errors/index.js';
import { fedAvg } from '../../../../shared/fl/fedavg.js';
import type { WeightUpdate } from '../../../../shared/fl/fedavg.js';
import { aggregate, checkStrategy } from '../../../../shared/fl/strategy/aggregate.js';
import { krumScores } from '../../../../shared/fl/strategy/krum.js';
import { poison } from '../../../../shared/fl/strategy/poison.js';
import { fedOptDefaults } from '../../../../shared/fl/strategy/server-opt.js';
import { decodeState, encodeState, initialState } from '../../../../shared/fl/strategy/state.js';
import { alignAll } from '../../../../shared/fl/strategy/tensors.js';
import { trimCount } from '../../../../shared/fl/strategy/trimmed-mean.js';
import type { Strategy, StrategyState } from '../../../../shared/fl/strategy/types.js';
import { seededRandom, shuffle } from '../../../../shared/random/index.js';
import { bytesOf, expectClose, model, update } from './support.js';

const limits = { maxBytes: 1 << 20, maxTensors: 16 };

describe('fedavg and fedprox', () => {
  it("are fedAvg on the server (FedProx mu is the trainers' proximal term)", () => {
    const base = model({ w: [0, 0] });
    const updates = [update('a', 1, { w: [1, 2] }), update('b', 3, { w: [5, 6] })];
    for (const strategy of [{ kind: 'fedavg' }, { kind: 'fedprox', mu: 0.01 }] as const) {
      const out = aggregate(strategy, base, updates, initialState, 1);
      // (1 * [1 2] + 3 * [5 6]) / 4 = [4 5]
      expectClose(out.weights, { w: [4, 5] });
      expect(out.state).toBe(initialState);
      expect(out.report).toEqual({ strategy: strategy.kind, rejected: [], clipped: [] });
    }
  });
});

describe('fedtrimmedavg', () => {
  // Five updates; at every coordinate the values sorted, int(beta * 5) cut from each end.
  const base = model({ w: [0, 0, 0], b: [0] });
  const updates = [
    update('a', 1, { w: [1, 10, -3], b: [0] }),
    update('b', 9, { w: [2, 20, -1], b: [4] }),
    update('c', 1, { w: [3, -5, 0], b: [100] }),
    update('d', 1, { w: [4, 0, 2], b: [-100] }),
    update('e', 1, { w: [100, 1, 5], b: [1] }),
  ];

  it('averages what is left after cutting int(beta n) at each end, unweighted', () => {
    const trimmed = (beta: number) =>
      aggregate({ kind: 'fedtrimmedavg', beta }, base, updates, initialState, 1).weights;
    // beta 0.2 cuts 1: w0 (2+3+4)/3 = 3, w1 (0+1+10)/3, w2 (-1+0+2)/3, b (0+1+4)/3.
    expectClose(trimmed(0.2), { w: [3, 11 / 3, 1 / 3], b: [5 / 3] });
    // beta 0.4 cuts 2: the median.
    expectClose(trimmed(0.4), { w: [3, 1, 0], b: [1] });
    // beta 0: the plain unweighted mean (b's 9 samples count for nothing).
    expectClose(trimmed(0), { w: [22, 5.2, 0.6], b: [1] });
    // beta 0.19: int(0.95) = 0 cut, as Python's int() truncates.
    expect(trimCount(0.19, 5)).toBe(0);
  });

  it('refuses a beta that leaves nothing, or is out of range', () => {
    const two = updates.slice(0, 2);
    const run = (beta: number, us: WeightUpdate[]) =>
      aggregate({ kind: 'fedtrimmedavg', beta }, base, us, initialState, 1);
    expect(() => run(0.49, two)).not.toThrow();
    expect(() => run(0.5, updates)).toThrow('fedtrimmedavg beta 0.5 is not in [0, 0.5)');
    expect(() => trimCount(0.5, 4)).toThrow(
      'fedtrimmedavg beta 0.5 cuts 2 of 4 updates from each end: none would be left',
    );
  });
});

describe('krum', () => {
  // Squared distances: ab 1, ac 4, ad 200, bc 5, bd 181, cd 164.
  const base = model({ w: [0, 0] });
  const updates = [
    update('a', 1, { w: [0, 0] }),
    update('b', 3, { w: [1, 0] }),
    update('c', 1, { w: [0, 2] }),
    update('d', 1, { w: [10, 10] }),
  ];

  it('scores by the n - f - 2 nearest and keeps the lowest (Krum), ties to the earlier name', () => {
    // f = 1: max(1, 4 - 1 - 2) = 1 nearest: a 1, b 1, c 4, d 164.
    expect(krumScores(alignAll(base, updates), 1)).toEqual([1, 1, 4, 164]);
    // f = 0: 2 nearest: a 1+4, b 1+5, c 4+5, d 164+181.
    expect(krumScores(alignAll(base, updates), 0)).toEqual([5, 6, 9, 345]);
    const out = aggregate({ kind: 'krum', f: 1, m: 1 }, base, updates, initialState, 1);
    expectClose(out.weights, { w: [0, 0] });
    expect(out.report.rejected.map((r) => r.worker)).toEqual(['b', 'c', 'd']);
    expect(out.report.rejected[0]!.reason).toBe('not among the 1 lowest Krum scores (f = 1)');
  });

  it('averages the m lowest by samples (MultiKrum)', () => {
    const two = aggregate({ kind: 'krum', f: 1, m: 2 }, base, updates, initialState, 1);
    // a and b: (1 * [0 0] + 3 * [1 0]) / 4.
    expectClose(two.weights, { w: [0.75, 0] });
    expect(two.report.rejected.map((r) => r.worker)).toEqual(['c', 'd']);
    const three = aggregate({ kind: 'krum', f: 0, m: 3 }, base, updates, initialState, 1);
    // a, b, c: (0 + 3 * [1 0] + [0 2]) / 5.
    expectClose(three.weights, { w: [0.6, 0.4] });
  });

  it('picks an honest update with f = 2 of n = 7 sign-flipped and scaled up', () => {
    const uniform = seededRandom(11);
    const size = 50;
    const base7 = new Map([['w', { dims: [size], values: new Float32Array(size) }]]);
    // Honest: the true step (0.1 everywhere) plus noise of 0.01; poisoned: -10x an honest one.
    const honest = Array.from({ length: 5 }, (_, k) =>
      update(`honest-${k}`, 100, {
        w: Array.from({ length: size }, () => 0.1 + (uniform() - 0.5) * 0.02),
      }),
    );
    const attack = { kind: 'signflip', factor: 10 } as const;
    const poisoned = [0, 1].map((k) => ({
      ...poison(honest[k]!, base7, attack, 5),
      worker: `poisoned-${k}`,
    }));
    const all = [...honest, ...poisoned];
    // Plain FedAvg is dragged to (5 * 0.1 - 2 * 1) / 7 < 0: the wrong direction.
    expect(fedAvg(base7, all).get('w')!.values[0]!).toBeLessThan(0);
    const one = aggregate({ kind: 'krum', f: 2, m: 1 }, base7, all, initialState, 1);
    const chosen = honest.filter((h) => !one.report.rejected.some((r) => r.worker === h.worker));
    expect(chosen).toHaveLength(1);
    expect(bytesOf(one.weights).equals(bytesOf(chosen[0]!.weights))).toBe(true);
    const multi = aggregate({ kind: 'krum', f: 2, m: 3 }, base7, all, initialState, 1);
    const rejected = multi.report.rejected.map((r) => r.worker);
    expect(rejected).toContain('poisoned-0');
    expect(rejected).toContain('poisoned-1');
    for (const v of multi.weights.get('w')!.values) expect(Math.abs(v - 0.1)).toBeLessThan(0.01);
  });

  it('refuses m outside [1, n] and f below 0', () => {
    expect(() => aggregate({ kind: 'krum', f: 1, m: 5 }, base, updates, initialState, 1)).toThrow(
      "krum m 5 is not an integer in [1, 4] (the round's updates)",
    );
    expect(() => checkStrategy({ kind: 'krum', f: -1, m: 1 })).toThrow(
      'krum f -1 is not an integer >= 0',
    );
    expect(() => checkStrategy({ kind: 'krum', f: 0, m: 0 })).toThrow(
      'krum m 0 is not an integer >= 1',
    );
  });
});

describe('fedadam, fedyogi, fedadagrad', () => {
  // Round 1: model [1 2], the updates average to [1.5 1] (samples 1 and 3), delta [0.5 -1].
  // Round 2: from round 1's model, one update at model + [-0.2 0.3].
  const base1 = model({ w: [1, 2] });
  const round1 = [update('a', 1, { w: [1.5, 1] }), update('b', 3, { w: [1.5, 1] })];
  const round2 = (base: Map<string, { values: Float32Array }>) => [
    update('a', 5, { w: [...base.get('w')!.values].map((v, i) => v + [-0.2, 0.3][i]!) }),
  ];

  /** Both rounds, the state passed through its text encoding as the round store will. */
  function twoRounds(strategy: Strategy) {
    const first = aggregate(strategy, base1, round1, initialState, 1);
    const stored = decodeState(encodeState(first.state), limits);
    const second = aggregate(strategy, first.weights, round2(first.weights), stored, 2);
    const direct = aggregate(strategy, first.weights, round2(first.weights), first.state, 2);
    expect(bytesOf(second.weights).equals(bytesOf(direct.weights))).toBe(true);
    return { first, second };
  }

  const moments = (state: StrategyState) => {
    if (state.kind !== 'moments') throw new Error('no moments');
    return { m: [...state.m.get('w')!.values], v: [...state.v.get('w')!.values] };
  };

  it("FedAdam: bias-corrected eta with Flower's round + 1, m and v from zero", () => {
    const { first, second } = twoRounds(fedOptDefaults.fedadam);
    // m = 0.1 delta = [0.05 -0.1]; v = 0.01 delta^2 = [0.0025 0.01];
    // eta_1 = 0.1 sqrt(1 - 0.99^2) / (1 - 0.9^2) = 0.07424597884;
    // w = [1 + eta_1 0.05 / (0.05 + 1e-9), 2 - eta_1 0.1 / (0.1 + 1e-9)].
    expectClose(first.weights, { w: [1.0742459788, 1.9257540212] });
    const m1 = moments(first.state);
    [0.05, -0.1].forEach((x, i) => expect(Math.abs(m1.m[i]! - x)).toBeLessThan(1e-8));
    [0.0025, 0.01].forEach((x, i) => expect(Math.abs(m1.v[i]! - x)).toBeLessThan(1e-8));
    // delta 2 = [-0.2 0.3]: m = [0.025 -0.06], v = [0.002875 0.0108],
    // eta_2 = 0.1 sqrt(1 - 0.99^3) / (1 - 0.9^3).
    expectClose(second.weights, { w: [1.103896838, 1.889038003] });
    const m2 = moments(second.state);
    [0.025, -0.06].forEach((x, i) => expect(Math.abs(m2.m[i]! - x)).toBeLessThan(1e-7));
    [0.002875, 0.0108].forEach((x, i) => expect(Math.abs(m2.v[i]! - x)).toBeLessThan(1e-8));
  });

  it('FedYogi: v moves by (1 - beta2) delta^2 toward delta^2', () => {
    const { first, second } = twoRounds(fedOptDefaults.fedyogi);
    // v = 0 + 0.01 delta^2 (sign(0 - delta^2) = -1): [0.0025 0.01]; m as FedAdam's;
    // w = [1 + 0.01 0.05 / (0.05 + 0.001), 2 - 0.01 0.1 / (0.1 + 0.001)].
    expectClose(first.weights, { w: [1.0098039216, 1.9900990099] });
    // v = [0.0025 + 0.01 0.04, 0.01 + 0.01 0.09] = [0.0029 0.0109], m = [0.025 -0.06].
    expectClose(second.weights, { w: [1.0143616199, 1.9844064712] });
    const m2 = moments(second.state);
    [0.0029, 0.0109].forEach((x, i) => expect(Math.abs(m2.v[i]! - x)).toBeLessThan(1e-8));
  });

  it('FedAdagrad: no momentum, v sums delta^2', () => {
    const { first, second } = twoRounds(fedOptDefaults.fedadagrad);
    // m = delta, v = delta^2: w = [1 + 0.1 0.5 / 0.5, 2 - 0.1 1 / 1] = [1.1 1.9].
    expectClose(first.weights, { w: [1.1, 1.9] });
    // v = [0.25 + 0.04, 1 + 0.09]: w = [1.1 - 0.1 0.2 / sqrt(0.29), 1.9 + 0.1 0.3 / sqrt(1.09)].
    expectClose(second.weights, { w: [1.0628609657, 1.9287347793] });
  });

  it("has Flower's defaults", () => {
    expect(fedOptDefaults.fedadam).toEqual({
      kind: 'fedadam',
      eta: 0.1,
      etaL: 0.1,
      beta1: 0.9,
      beta2: 0.99,
      tau: 1e-9,
    });
    expect(fedOptDefaults.fedyogi).toEqual({
      kind: 'fedyogi',
      eta: 0.01,
      etaL: 0.0316,
      beta1: 0.9,
      beta2: 0.99,
      tau: 1e-3,
    });
    expect(fedOptDefaults.fedadagrad).toEqual({
      kind: 'fedadagrad',
      eta: 0.1,
      etaL: 0.1,
      tau: 1e-9,
    });
  });

  it("refuses another optimizer's or another model's state, and parameters out of range", () => {
    const first = aggregate(fedOptDefaults.fedadam, base1, round1, initialState, 1);
    expect(() => aggregate(fedOptDefaults.fedyogi, base1, round1, first.state, 2)).toThrow(
      'the state holds fedadam moments, the strategy is fedyogi',
    );
    const other = model({ w: [1, 2, 3] });
    expect(() =>
      aggregate(fedOptDefaults.fedadam, other, [update('a', 1, { w: [0, 0, 0] })], first.state, 2),
    ).toThrow('state m: tensor w is missing or of another size');
    const bad: Array<[Strategy, string]> = [
      [{ ...fedOptDefaults.fedadam, beta1: 1 }, 'fedadam beta1 1 is not in [0, 1)'],
      [{ ...fedOptDefaults.fedyogi, beta2: -0.1 }, 'fedyogi beta2 -0.1 is not in [0, 1)'],
      [{ ...fedOptDefaults.fedadagrad, tau: 0 }, 'fedadagrad tau 0 is not a finite number > 0'],
      [
        { ...fedOptDefaults.fedadam, eta: Number.NaN },
        'fedadam eta NaN is not a finite number > 0',
      ],
      [{ kind: 'fedprox', mu: -1 }, 'fedprox mu -1 is not a finite number >= 0'],
    ];
    for (const [strategy, message] of bad) {
      expect(() => checkStrategy(strategy)).toThrow(ValidationError);
      expect(() => checkStrategy(strategy)).toThrow(message);
    }
    expect(() => aggregate({ kind: 'fedavg' }, base1, round1, initialState, 0)).toThrow(
      'round 0 is not an integer >= 1',
    );
  });
});

describe('every strategy', () => {
  const strategies: Strategy[] = [
    { kind: 'fedavg' },
    { kind: 'fedtrimmedavg', beta: 0.2 },
    { kind: 'krum', f: 1, m: 2 },
    fedOptDefaults.fedadam,
    {
      kind: 'dp-fixed-clipping',
      noiseMultiplier: 1,
      clippingNorm: 0.5,
      sampledClients: 6,
      seed: 3,
      inner: fedOptDefaults.fedyogi,
    },
  ];

  it('gives bit-identical results whatever order the updates arrive in', () => {
    const uniform = seededRandom(21);
    const base = model({ w: Array.from({ length: 40 }, () => uniform() - 0.5), b: [0.5] });
    const updates = Array.from({ length: 6 }, (_, k) =>
      update(`node-${k}`, 1 + Math.floor(uniform() * 50), {
        w: Array.from({ length: 40 }, () => uniform() - 0.5),
        b: [uniform()],
      }),
    );
    for (const strategy of strategies) {
      const first = aggregate(strategy, base, updates, initialState, 3);
      for (let trial = 0; trial < 3; trial += 1) {
        const again = aggregate(strategy, base, shuffle([...updates], uniform), initialState, 3);
        expect(bytesOf(again.weights).equals(bytesOf(first.weights))).toBe(true);
        expect(again.report).toEqual(first.report);
      }
    }
  });

  it('refuses no updates, a repeated worker and a misfit tensor, naming them', () => {
    const base = model({ w: [0, 0] });
    for (const strategy of strategies) {
      const run = (updates: WeightUpdate[]) => aggregate(strategy, base, updates, initialState, 1);
      expect(() => run([])).toThrow(ValidationError);
      expect(() => run([update('a', 1, { w: [1, 1] }), update('a', 1, { w: [1, 1] })])).toThrow(
        'worker a sent two updates',
      );
      expect(() => run([update('a', 1, { w: [1, 1, 1] })])).toThrow(
        /worker a: tensor w has dims \[3\]/,
      );
      expect(() => run([update('a', 1, { v: [1, 1] })])).toThrow('worker a: tensor w is missing');
    }
  });
});
