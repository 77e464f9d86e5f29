/** SeededRandom: the `seededRandom` / `normal` sequences, from a generator whose state can be copied. */
import { describe, expect, it } from 'vitest';
import { SeededRandom, normal, seededRandom } from '../../../shared/random/index.js';

const seeds = [0, 1, 42, 123_456_789, 0xffffffff, -7, 2 ** 40 + 3];
const draws = (f: () => number, n: number) => Array.from({ length: n }, () => f());

describe('SeededRandom', () => {
  it('draws exactly the uniforms of seededRandom(seed)', () => {
    for (const seed of seeds) {
      expect(draws(new SeededRandom(seed).next, 10_000)).toEqual(draws(seededRandom(seed), 10_000));
    }
  });

  it('draws exactly the normals of normal(seededRandom(seed)), and mixes with uniforms as they do', () => {
    for (const seed of seeds) {
      expect(draws(new SeededRandom(seed).normal, 5_000)).toEqual(
        draws(normal(seededRandom(seed)), 5_000),
      );
      // One stream shared by uniform and normal draws, in an irregular order.
      const ours = new SeededRandom(seed);
      const uniform = seededRandom(seed);
      const gauss = normal(uniform);
      for (let i = 0; i < 2_000; i += 1) {
        const useNormal = i % 3 !== 1;
        expect(useNormal ? ours.normal() : ours.next()).toBe(useNormal ? gauss() : uniform());
      }
    }
  });

  it('hands out bound functions', () => {
    const { next, normal: gauss } = new SeededRandom(9);
    const reference = seededRandom(9);
    expect(next()).toBe(reference());
    expect(gauss()).toBe(normal(reference)());
  });

  it('clones into an independent generator that continues identically', () => {
    const original = new SeededRandom(17);
    draws(original.next, 1_001);
    original.normal();
    const copy = original.clone();
    // Advancing the copy does not move the original: it still matches a never-cloned generator.
    const copyDraws = [...draws(copy.next, 500), ...draws(copy.normal, 500)];
    const untouched = new SeededRandom(17);
    draws(untouched.next, 1_001);
    untouched.normal();
    const originalDraws = [...draws(original.next, 500), ...draws(original.normal, 500)];
    expect(originalDraws).toEqual([...draws(untouched.next, 500), ...draws(untouched.normal, 500)]);
    expect(copyDraws).toEqual(originalDraws);
    // And a clone of a clone, taken before anything was drawn, starts at the seed.
    expect(draws(new SeededRandom(5).clone().clone().next, 100)).toEqual(
      draws(seededRandom(5), 100),
    );
  });
});
