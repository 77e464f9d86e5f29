/**
 * bench/fl-learning's poisoned trainers: exactly `count` of a round's trainers, drawn from the
 * seed and the round alone (not the order updates arrive in), replaced by shared/fl/strategy's
 * poison(); the others untouched.
 */
import { describe, expect, it } from 'vitest';
import { poisonedWorkers, poisoner } from '../../../bench/fl-learning/poisoned.js';
import type { WeightUpdate } from '../../../shared/fl/fedavg.js';
import type { Tensor } from '../../../shared/fl/weights.js';

const names = Array.from({ length: 10 }, (_, i) => `client-${i}`);
const tensor = (values: number[]): Tensor => ({
  dims: [values.length],
  values: Float32Array.from(values),
});
const base = new Map([['w', tensor([0, 0, 0])]]);
const update = (worker: string): WeightUpdate => ({
  worker,
  samples: 7,
  weights: new Map([['w', tensor([1, 2, 3])]]),
});

describe('poisonedWorkers', () => {
  it('draws count distinct workers, in name order, from the seed and round alone', () => {
    const a = poisonedWorkers(names, 2, 1, 5);
    expect(a).toHaveLength(2);
    expect(new Set(a).size).toBe(2);
    expect(a).toEqual([...a].sort());
    expect(poisonedWorkers([...names].reverse(), 2, 1, 5)).toEqual(a);
    const rounds = Array.from({ length: 20 }, (_, r) => poisonedWorkers(names, 2, 1, r + 1).join());
    expect(new Set(rounds).size).toBeGreaterThan(10);
    expect(() => poisonedWorkers(names, 11, 1, 1)).toThrow(/11 poisoned of 10/);
  });
});

describe('poisoner', () => {
  it('sign-flips the drawn workers deltas and leaves the others as sent', () => {
    const corrupt = poisoner({ kind: 'signflip', factor: 4 }, 2, 1);
    const sent = names.map(update);
    const got = corrupt(sent, base, 3);
    const bad = poisonedWorkers(names, 2, 1, 3);
    got.forEach((u, i) => {
      expect(u.worker).toBe(names[i]);
      expect(u.samples).toBe(7);
      const values = [...(u.weights.get('w')?.values ?? [])];
      expect(values).toEqual(bad.includes(u.worker) ? [-4, -8, -12] : [1, 2, 3]);
      if (!bad.includes(u.worker)) expect(u).toBe(sent[i]);
    });
  });
});
