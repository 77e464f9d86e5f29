/** Route strategies: what each returns (properties), and that the bandits find the best child. */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { route } from '../../../shared/mlgraph/strategies.js';
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
});
