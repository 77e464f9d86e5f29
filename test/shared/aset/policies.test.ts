/**
 * The seven static policies of the ASET paper's section III-C: each deterministic one on a
 * hand-computed topology and on ties, cheaper read as the text's argmax (so it differs from least
 * impedance), the two random-proportional ones against their target distributions by chi-square
 * with a seeded generator, and properties: every policy returns one of the candidates it was given,
 * the deterministic ones never draw, the random ones draw exactly once.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { candidateFor } from '../../../shared/aset/constraints.js';
import { choose, policies, policyAt } from '../../../shared/aset/policies.js';
import { policyNames } from '../../../shared/aset/types.js';
import type {
  Candidate,
  Cluster,
  PolicyName,
  Scheduler,
  Stream,
  Worker,
} from '../../../shared/aset/types.js';
import { cluster, worker as fixture } from '../../support/aset.js';
import { seededRandom } from '../../../shared/random/index.js';

/** A worker of its own model on `on`, with D_v from `fixedDelayMs` to `maxDelayMs`. */
function worker(
  index: number,
  on: Cluster,
  fixedDelayMs: number,
  maxDelayMs: number,
  capacity: number,
): Worker {
  return fixture(index, { cluster: on, fixedDelayMs, maxDelayMs, capacity });
}

const stream: Stream = {
  id: 1,
  app: 'ar',
  task: 'detect',
  maxDelayMs: 1000,
  minAccuracy: 0.5,
  rate: 1,
  size: 0.5,
  transmissionMsPerSize: 0,
  accessDelayMs: 0,
  durationS: 60,
  scheduler: 's0',
};

const edge = cluster('edge', 'access');
const office = cluster('office', 'central-office');
const cloud = cluster('cloud', 'cloud');
// networkMs: edge 1 + 2 * 0.5 = 2, office 5 + 2 * 1 = 7, cloud 20 + 2 * 5 = 30.
const scheduler: Scheduler = {
  id: 's0',
  cluster: 'edge',
  links: {
    edge: { delayMs: 1, deviationMs: 0.5 },
    office: { delayMs: 5, deviationMs: 1 },
    cloud: { delayMs: 20, deviationMs: 5 },
  },
};

/** A candidate for `stream` on `w` with reserved load `load`, figures from the real formulas. */
const at = (w: Worker, load: number): Candidate => candidateFor(stream, scheduler, w, load);

// D_v(0.5) = fixed + (max - fixed) * 0.5; expectedMs = 2 * networkMs + D_v(0.5).
const w0 = at(worker(0, edge, 20, 60, 10), 8); // D_v = 40, expected 2 * 2 + 40 = 44, C/L = 1.25
const w1 = at(worker(1, edge, 10, 30, 5), 3); // D_v = 20, expected 2 * 2 + 20 = 24, C/L = 5/3
const w2 = at(worker(2, office, 4, 12, 20), 6); // D_v = 8, expected 2 * 7 + 8 = 22, C/L = 10/3
const w3 = at(worker(3, office, 30, 90, 4), 1); // D_v = 60, expected 2 * 7 + 60 = 74, C/L = 4
const w4 = at(worker(4, cloud, 2, 6, 100), 2); // D_v = 4, expected 2 * 30 + 4 = 64, C/L = 50
const all = [w0, w1, w2, w3, w4];

/** A `uniform` that fails the test if a deterministic policy draws from it. */
const noDraw = (): number => {
  throw new Error('a deterministic policy drew a random number');
};

const deterministic: readonly PolicyName[] = [
  'closest',
  'load-balancing',
  'farthest',
  'cheaper',
  'least-impedance',
];
const randomized: readonly PolicyName[] = [
  'random-proportional-latency',
  'random-proportional-load',
];

describe('hand-computed figures', () => {
  it('match the formulas the candidates were built with', () => {
    expect(all.map((c) => [c.networkMs, c.expectedMs])).toEqual([
      [2, 44],
      [2, 24],
      [7, 22],
      [7, 74],
      [30, 64],
    ]);
  });
});

describe('deterministic policies', () => {
  it('closest: the edge cluster (2 ms) and, on it, the lowest index w0', () => {
    expect(policies.closest(stream, all, noDraw)).toBe(w0);
    expect(policies.closest(stream, [w4, w3, w1, w0], noDraw)).toBe(w0);
    // Without the edge: the office (7 ms) against the cloud (30 ms); w2 has the lower index.
    expect(policies.closest(stream, [w4, w3, w2], noDraw)).toBe(w2);
  });

  it('load-balancing: raw load, w3 at 1 query/s (not w4, whose load/capacity 0.02 is lower)', () => {
    expect(policies['load-balancing'](stream, all, noDraw)).toBe(w3);
    // Without w3: loads 8, 3, 6, 2 -> w4.
    expect(policies['load-balancing'](stream, [w0, w1, w2, w4], noDraw)).toBe(w4);
  });

  it('farthest: the cloud (30 ms) w4; without it the office (7 ms), lowest index w2', () => {
    expect(policies.farthest(stream, all, noDraw)).toBe(w4);
    expect(policies.farthest(stream, [w3, w0, w2, w1], noDraw)).toBe(w2);
  });

  it('cheaper: the largest expected delay that is still feasible, w3 at 74 ms', () => {
    expect(policies.cheaper(stream, all, noDraw)).toBe(w3);
    // Without w3: 44, 24, 22, 64 -> w4.
    expect(policies.cheaper(stream, [w0, w1, w2, w4], noDraw)).toBe(w4);
  });

  it('least-impedance: the smallest expected delay, w2 at 22 ms', () => {
    expect(policies['least-impedance'](stream, all, noDraw)).toBe(w2);
    // Without w2: 44, 24, 74, 64 -> w1.
    expect(policies['least-impedance'](stream, [w0, w1, w3, w4], noDraw)).toBe(w1);
  });

  it('cheaper and least-impedance pick opposite ends (the paper prints one formula for both)', () => {
    expect(policies.cheaper(stream, all, noDraw)).not.toBe(
      policies['least-impedance'](stream, all, noDraw),
    );
  });

  it('break ties towards the lowest worker index, whatever the list order', () => {
    // w5 duplicates w4's figures in the cloud: 2 * 30 + 4 = 64, load 2.
    const w5 = at(worker(5, cloud, 2, 6, 100), 2);
    // w6 ties w2 on expected delay and load: office 2 * 7 + 8 = 22, load 6.
    const w6 = at(worker(6, office, 4, 12, 20), 6);
    for (const list of [
      [w5, w4, w6, w2],
      [w2, w6, w4, w5],
    ]) {
      expect(policies.farthest(stream, list, noDraw)).toBe(w4);
      expect(policies.closest(stream, list, noDraw)).toBe(w2);
      expect(policies['least-impedance'](stream, list, noDraw)).toBe(w2);
      // 64 beats 22; w4 and w5 tie at 64.
      expect(policies.cheaper(stream, list, noDraw)).toBe(w4);
      // Loads 2, 2, 6, 6: w4 and w5 tie at 2.
      expect(policies['load-balancing'](stream, list, noDraw)).toBe(w4);
    }
  });

  it('return the only candidate when there is one', () => {
    for (const name of policyNames) expect(choose(name, stream, [w3], () => 0.5)).toBe(w3);
  });

  it('refuse an empty list (the caller rejects the stream before asking)', () => {
    for (const name of policyNames) expect(() => choose(name, stream, [], () => 0.5)).toThrow();
  });
});

/** Pearson's statistic of `counts` against probabilities proportional to `weights`. */
function chiSquare(counts: readonly number[], weights: readonly number[]): number {
  const n = counts.reduce((a, b) => a + b, 0);
  const total = weights.reduce((a, b) => a + b, 0);
  let statistic = 0;
  counts.forEach((count, k) => {
    const expected = (n * (weights[k] ?? 0)) / total;
    statistic += (count - expected) ** 2 / expected;
  });
  return statistic;
}

/** How often each of `list` is chosen by `name` in `draws` decisions from a seeded generator. */
function tally(
  name: PolicyName,
  list: readonly Candidate[],
  draws: number,
  seed: number,
): number[] {
  const uniform = seededRandom(seed);
  const counts = list.map(() => 0);
  for (let k = 0; k < draws; k++) {
    const chosen = choose(name, stream, list, uniform);
    const position = list.indexOf(chosen);
    counts[position] = (counts[position] ?? 0) + 1;
  }
  return counts;
}

// 0.999 quantiles of the chi-square distribution (NIST/SEMATECH e-Handbook, table 1.3.6.7.4):
// df = 2 -> 13.816, df = 4 -> 18.467. A correct sampler fails a seeded run with probability 0.001,
// and the seeds below are fixed, so a pass is stable and a wrong distribution is caught.
const CHI2_999_DF2 = 13.816;
const CHI2_999_DF4 = 18.467;
const DRAWS = 20_000;

describe('random-proportional-latency', () => {
  it('chooses in proportion to 1 / expectedMs (chi-square, df = 4)', () => {
    const counts = tally('random-proportional-latency', all, DRAWS, 0xa5e7);
    const weights = [1 / 44, 1 / 24, 1 / 22, 1 / 74, 1 / 64];
    expect(chiSquare(counts, weights)).toBeLessThan(CHI2_999_DF4);
    // The test has the power to tell: the same counts are far from a uniform choice.
    expect(chiSquare(counts, [1, 1, 1, 1, 1])).toBeGreaterThan(CHI2_999_DF4);
  });
});

describe('random-proportional-load', () => {
  it('chooses in proportion to capacity / load (chi-square, df = 4)', () => {
    const counts = tally('random-proportional-load', all, DRAWS, 0x10ad);
    // Weights 10/8, 5/3, 20/6, 4/1, 100/2 (w4 takes about 83% of the draws).
    const weights = [10 / 8, 5 / 3, 20 / 6, 4, 50];
    expect(chiSquare(counts, weights)).toBeLessThan(CHI2_999_DF4);
    // and from weights 1 / L that leave the capacity out.
    expect(chiSquare(counts, [1 / 8, 1 / 3, 1 / 6, 1, 1 / 2])).toBeGreaterThan(CHI2_999_DF4);
  });

  it('with idle candidates, chooses uniformly among them only (C / L -> infinity)', () => {
    const idle = [at(w1.worker, 0), at(w3.worker, 0), at(w4.worker, 0)];
    const list = [w0, idle[0]!, w2, idle[1]!, idle[2]!];
    const counts = tally('random-proportional-load', list, DRAWS, 0x1d1e);
    expect([counts[0], counts[2]]).toEqual([0, 0]);
    const idleCounts = [counts[1] ?? 0, counts[3] ?? 0, counts[4] ?? 0];
    expect(chiSquare(idleCounts, [1, 1, 1])).toBeLessThan(CHI2_999_DF2);
  });
});

describe('inverse CDF edges', () => {
  it('maps u = 0 to the first candidate and u just below 1 to the last', () => {
    const justBelowOne = 1 - 2 ** -53;
    for (const name of randomized) {
      expect(choose(name, stream, all, () => 0)).toBe(w0);
      expect(choose(name, stream, all, () => justBelowOne)).toBe(w4);
    }
  });
});

describe('policyAt', () => {
  it('maps each DQN action index to the policy of that name', () => {
    policyNames.forEach((name, index) => expect(policyAt(index)).toBe(policies[name]));
  });

  it('rejects indices outside the action set', () => {
    for (const index of [-1, policyNames.length, 1.5, Number.NaN]) {
      expect(() => policyAt(index)).toThrow(RangeError);
    }
  });
});

describe('properties', () => {
  const candidateList = fc
    .uniqueArray(
      fc.record({
        index: fc.integer({ min: 0, max: 63 }),
        // Small grids make ties and zero figures common.
        load: fc.oneof(
          fc.constant(0),
          fc.integer({ min: 0, max: 4 }),
          fc.double({ min: 0, max: 1e3, noNaN: true }),
        ),
        network: fc.integer({ min: 0, max: 4 }),
        delay: fc.oneof(
          fc.integer({ min: 0, max: 4 }),
          fc.double({ min: 0, max: 1e3, noNaN: true }),
        ),
        capacity: fc.double({ min: 1e-3, max: 1e4, noNaN: true }),
      }),
      { minLength: 1, maxLength: 8, selector: (spec) => spec.index },
    )
    .map((specs) =>
      specs.map((spec): Candidate => ({
        worker: worker(spec.index, edge, 0, 0, spec.capacity),
        load: spec.load,
        networkMs: spec.network,
        expectedMs: 2 * spec.network + spec.delay,
      })),
    );
  const unit = fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true });

  it('every policy returns an element of the list it was given', () => {
    fc.assert(
      fc.property(candidateList, unit, (list, u) => {
        for (const name of policyNames) {
          expect(list).toContain(choose(name, stream, list, () => u));
        }
      }),
    );
  });

  it('deterministic policies never draw; random ones draw exactly once', () => {
    fc.assert(
      fc.property(candidateList, unit, (list, u) => {
        for (const name of deterministic) {
          expect(choose(name, stream, list, noDraw)).toBe(
            choose(name, stream, [...list].reverse(), noDraw),
          );
        }
        for (const name of randomized) {
          let draws = 0;
          choose(name, stream, list, () => {
            draws++;
            return u;
          });
          expect(draws).toBe(1);
        }
      }),
    );
  });

  it('random-proportional-load never picks a loaded candidate while an idle one exists', () => {
    fc.assert(
      fc.property(candidateList, unit, (list, u) => {
        const chosen = choose('random-proportional-load', stream, list, () => u);
        if (list.some((c) => c.load === 0)) expect(chosen.load).toBe(0);
      }),
    );
  });
});
