/**
 * bench/fl-learning's conditionDigests, what a run over HTTP is compared with: the sha256 of the
 * global weights after each round of a table condition, the same on every call for a seed.
 */
import { describe, expect, it } from 'vitest';
import { conditionDigests, readyCondition } from '../../../bench/fl-learning/setup.js';

describe('conditionDigests', () => {
  it('gives one sha256 per round, the same on every call, another for another seed', async () => {
    const options = { learningRate: 0.6, seed: 1 };
    const a = await conditionDigests('fedsgd-iid', 2, options);
    expect(a).toHaveLength(2);
    expect(a.every((d) => /^[0-9a-f]{64}$/.test(d))).toBe(true);
    expect(a[0]).not.toBe(a[1]);
    expect(await conditionDigests('fedsgd-iid', 2, options)).toEqual(a);
    expect(await conditionDigests('fedsgd-iid', 1, { ...options, seed: 2 })).not.toEqual([a[0]]);
  });

  it('refuses an id that is not a ready condition, naming the ready ones', () => {
    expect(() => readyCondition('krum-poisoned')).toThrow(/not a ready condition.*fedsgd-iid/);
    expect(() => readyCondition('nope')).toThrow(/nope/);
  });
});
