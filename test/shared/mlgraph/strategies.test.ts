/** Route strategies: what each returns (properties), and that the bandits find the best child. */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { route } from '../../../shared/mlgraph/strategies.js';
import { armCostsOf } from '../../../shared/mlgraph/arm-costs.js';
import { strategy } from '../../../shared/crds/route-strategy.js';
import type { ArmStats } from '../../../shared/mlgraph/strategies.js';
import type { Strategy } from '../../../shared/crds/route-strategy.js';
import { normal, seededRandom } from '../../../shared/random/index.js';

const children = ['small', 'medium', 'large'];

const anyStrategy: fc.Arbitrary<Strategy> = fc.oneof(
  fc.constant<Strategy>({ kind: 'static' }),
  fc.subarray(children, { minLength: 1 }).map<Strategy>((c) => ({ kind: 'static', children: c })),
  fc.tuple(fc.nat(5), fc.nat(5), fc.nat(5)).map<Strategy>(([a, b, c]) => ({
    kind: 'weighted',
    weights: { small: a, medium: b, large: c },
  })),
  fc.double({ min: 0, max: 1, noNaN: true }).map<Strategy>((epsilon) => ({
    kind: 'epsilon-greedy',
    epsilon,
  })),
  fc.constant<Strategy>({ kind: 'thompson' }),
  fc.constant<Strategy>({ kind: 'ucb1' }),
);

const stats = fc
  .array(
    fc
      .tuple(fc.nat(1000), fc.double({ min: 0, max: 1, noNaN: true }))
      .map(([n, m]) => ({ rewarded: n, reward: n * m })),
    { minLength: 3, maxLength: 3 },
  )
  .map((arms) => new Map<string, ArmStats>(arms.map((a, i) => [children[i]!, a])));

describe('route strategies', () => {
  it('always answer a non-empty list of distinct children (property)', () => {
    fc.assert(
      fc.property(anyStrategy, stats, fc.integer(), (s, arms, seed) => {
        const uniform = seededRandom(seed);
        const chosen = route(s, children, {
          body: {},
          stats: arms,
          uniform,
          normal: normal(uniform),
        });
        expect(chosen.length).toBeGreaterThan(0);
        expect(new Set(chosen).size).toBe(chosen.length);
        for (const c of chosen) expect(children).toContain(c);
      }),
      { numRuns: 500 },
    );
  });

  it('weighted: shares follow the weights, and a zero weight is never drawn', () => {
    const uniform = seededRandom(7);
    const counts = new Map<string, number>();
    for (let i = 0; i < 20_000; i += 1) {
      const [c] = route(
        { kind: 'weighted', weights: { small: 1, medium: 3, large: 0 } },
        children,
        {
          body: {},
          stats: new Map(),
          uniform,
          normal: normal(uniform),
        },
      );
      counts.set(c!, (counts.get(c!) ?? 0) + 1);
    }
    expect(counts.get('large')).toBeUndefined();
    expect(counts.get('medium')! / 20_000).toBeCloseTo(0.75, 1);
  });

  it('condition: the first rule that holds decides, else otherwise', () => {
    const s = strategy.parse({
      kind: 'condition',
      rules: [
        { when: { path: 'parameters.tier', op: 'eq', value: 'gold' }, route: ['large'] },
        { when: { path: 'parameters.size', op: 'gt', value: 100 }, route: ['medium', 'large'] },
        { when: { path: 'region', op: 'in', value: ['eu', 'us'] }, route: ['medium'] },
      ],
      otherwise: ['small'],
    });
    const go = (body: unknown) =>
      route(s, children, { body, stats: new Map(), uniform: Math.random, normal: Math.random });
    expect(go({ parameters: { tier: 'gold', size: 500 } })).toEqual(['large']);
    expect(go({ parameters: { size: 500 } })).toEqual(['medium', 'large']);
    expect(go({ parameters: { size: '500' } })).toEqual(['small']);
    expect(go({ region: 'eu' })).toEqual(['medium']);
    expect(go('not an object')).toEqual(['small']);
  });

  it('ucb1 tries every child before it compares them, the least routed first', () => {
    const arms = new Map<string, ArmStats>([
      ['small', { rewarded: 10, reward: 9, routed: 12 }],
      ['medium', { rewarded: 0, reward: 0, routed: 5 }],
    ]);
    const go = () =>
      route({ kind: 'ucb1' }, children, {
        body: {},
        stats: arms,
        uniform: Math.random,
        normal: Math.random,
      });
    // large has neither rewards nor routes: rewards come late, so routes decide among the fresh.
    expect(go()).toEqual(['large']);
    arms.set('large', { rewarded: 0, reward: 0, routed: 9 });
    expect(go()).toEqual(['medium']);
  });

  it('epsilon-greedy spreads ties instead of sending everything to the first child', () => {
    const uniform = seededRandom(3);
    const counts = new Map<string, number>();
    for (let i = 0; i < 3_000; i += 1) {
      const [c] = route({ kind: 'epsilon-greedy', epsilon: 0 }, children, {
        body: {},
        stats: new Map(),
        uniform,
        normal: normal(uniform),
      });
      counts.set(c!, (counts.get(c!) ?? 0) + 1);
    }
    for (const c of children) expect(counts.get(c)! / 3_000).toBeGreaterThan(0.25);
  });

  it.each<[Strategy, number]>([
    [{ kind: 'thompson' }, 0.85],
    [{ kind: 'ucb1' }, 0.75],
    [{ kind: 'epsilon-greedy', epsilon: 0.1 }, 0.8],
  ])('%o finds the best child on Bernoulli rewards (share >= %d over 3,000 rounds)', (s, share) => {
    const p: Record<string, number> = { small: 0.2, medium: 0.5, large: 0.8 };
    const uniform = seededRandom(11);
    const draw = normal(uniform);
    const arms = new Map<string, ArmStats>(children.map((c) => [c, { rewarded: 0, reward: 0 }]));
    let best = 0;
    for (let round = 0; round < 3_000; round += 1) {
      const [c] = route(s, children, { body: {}, stats: arms, uniform, normal: draw });
      const arm = arms.get(c!)!;
      const reward = uniform() < p[c!]! ? 1 : 0;
      arms.set(c!, { rewarded: arm.rewarded + 1, reward: arm.reward + reward });
      if (c === 'large') best += 1;
    }
    expect(best / 3_000).toBeGreaterThanOrEqual(share);
  });

  /**
   * The demo's problem, synthetic: an edge model right 85% of the time, a cloud model 97%, a
   * reward of 1 for a right answer. Offloading costs lambda per request (the cloud arm's cost):
   * the bandit should maximise accuracy minus lambda times offload, not accuracy.
   */
  function offload(s: Strategy, costs: Record<string, number> | undefined, rounds: number) {
    const arms2 = ['edge', 'cloud'];
    const p: Record<string, number> = { edge: 0.85, cloud: 0.97 };
    const uniform = seededRandom(29);
    const draw = normal(uniform);
    const arms = new Map<string, ArmStats>(arms2.map((c) => [c, { rewarded: 0, reward: 0 }]));
    const cost =
      costs === undefined ? undefined : new Map(Object.entries(costs).map(([c, v]) => [c, v]));
    let cloud = 0;
    for (let round = 0; round < rounds; round += 1) {
      const [c] = route(s, arms2, { body: {}, stats: arms, costs: cost, uniform, normal: draw });
      const arm = arms.get(c!)!;
      arms.set(c!, {
        rewarded: arm.rewarded + 1,
        reward: arm.reward + (uniform() < p[c!]! ? 1 : 0),
      });
      // The share is read over the second half: where the bandit has settled.
      if (c === 'cloud' && round >= rounds / 2) cloud += 1;
    }
    return cloud / (rounds / 2);
  }

  it.each<[Strategy, number]>([
    [{ kind: 'thompson' }, 0.1],
    [{ kind: 'ucb1' }, 0.25],
    [{ kind: 'epsilon-greedy', epsilon: 0.1 }, 0.1],
  ])(
    '%o with arm costs settles on the best reward minus cost, not the best reward (cloud share <= %d)',
    (s, most) => {
      // Cost-blind, the cloud wins: 0.97 > 0.85.
      expect(offload(s, undefined, 6_000)).toBeGreaterThan(0.75);
      // lambda = 0.3: the cloud nets 0.67 < 0.85, so the edge should take nearly everything.
      expect(offload(s, { cloud: 0.3 }, 6_000)).toBeLessThanOrEqual(most);
      // lambda = 0.03: the cloud still nets more (0.94 > 0.85): the cost does not justify less.
      expect(offload(s, { cloud: 0.03 }, 6_000)).toBeGreaterThan(0.6);
    },
  );

  it('charges measured latency at its weight: the slow arm loses what its latency costs', () => {
    const latency: Record<string, number> = { edge: 0.005, cloud: 0.08 };
    const costs = armCostsOf(
      ['edge', 'cloud'],
      { edge: { perLatencySecond: 5 }, cloud: { perRequest: 0.01, perLatencySecond: 5 } },
      (c) => latency[c],
    )();
    expect(costs?.get('edge')).toBeCloseTo(0.025, 9);
    expect(costs?.get('cloud')).toBeCloseTo(0.41, 9);
    // Not measured yet: the fixed part only (the arm is tried, then measured).
    const unmeasured = armCostsOf(
      ['edge'],
      { edge: { perRequest: 0.1, perLatencySecond: 5 } },
      () => undefined,
    )();
    expect(unmeasured?.get('edge')).toBe(0.1);
    expect(armCostsOf(['edge'], undefined, undefined)()).toBeUndefined();
    expect(
      offload({ kind: 'thompson' }, Object.fromEntries<number>(costs ?? new Map()), 6_000),
    ).toBeLessThanOrEqual(0.1);
  });
});
