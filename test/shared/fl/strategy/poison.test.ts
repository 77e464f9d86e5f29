/** The test attacks: what each sends, from a hand-computed update. */
import { describe, expect, it } from 'vitest';
import { poison } from '../../../../shared/fl/strategy/poison.js';
import { bytesOf, expectClose, model, update } from './support.js';

describe('poison', () => {
  const base = model({ w: [1, 2], b: [0] });
  const honest = update('x', 7, { w: [1.5, 1], b: [0.25] });

  it('scales or sign-flips the delta from the model', () => {
    const scaled = poison(honest, base, { kind: 'scale', factor: 10 }, 1);
    // base + 10 * ([0.5 -1], [0.25]).
    expectClose(scaled.weights, { w: [6, -8], b: [2.5] });
    expect(scaled.worker).toBe('x');
    expect(scaled.samples).toBe(7);
    // base - 3 * delta.
    expectClose(poison(honest, base, { kind: 'signflip', factor: 3 }, 1).weights, {
      w: [-0.5, 5],
      b: [-0.75],
    });
  });

  it('replaces it with seeded Gaussian noise around the model', () => {
    const big = model({ w: new Array<number>(50_000).fill(1) });
    const noisy = poison(
      update('x', 1, { w: new Array<number>(50_000).fill(3) }),
      big,
      { kind: 'random', std: 2 },
      9,
    );
    const values = noisy.weights.get('w')!.values;
    const mean = values.reduce((s, v) => s + v, 0) / values.length;
    const std = Math.sqrt(values.reduce((s, v) => s + (v - mean) ** 2, 0) / values.length);
    expect(Math.abs(mean - 1)).toBeLessThan(0.05);
    expect(Math.abs(std - 2)).toBeLessThan(0.05);
    const again = poison(
      update('x', 1, { w: new Array<number>(50_000).fill(3) }),
      big,
      { kind: 'random', std: 2 },
      9,
    );
    expect(bytesOf(again.weights).equals(bytesOf(noisy.weights))).toBe(true);
    expect(() => poison(honest, base, { kind: 'scale', factor: -1 }, 1)).toThrow(
      "scale attack's size -1 is not a finite number >= 0",
    );
  });
});
