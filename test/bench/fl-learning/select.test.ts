/**
 * bench/fl-learning's client selection: C K clients per round (with a floor), distinct, reproducible
 * from the seed and the round alone, different across rounds and seeds, and fair over many rounds.
 */
import { describe, expect, it } from 'vitest';
import { seededSelector, selectedCount } from '../../../bench/fl-learning/select.js';

const names = Array.from({ length: 100 }, (_, i) => `client-${i}`);

describe('seededSelector', () => {
  it('selects C K distinct clients, in name order', () => {
    const picked = seededSelector({ fraction: 0.1, seed: 1 })(names, 1);
    expect(picked).toHaveLength(10);
    expect(new Set(picked).size).toBe(10);
    expect(picked.every((n) => names.includes(n))).toBe(true);
    expect(picked).toEqual([...picked].sort());
  });

  it('gives the same clients for the same seed and round, whatever was selected before', () => {
    const a = seededSelector({ fraction: 0.1, seed: 7 });
    const b = seededSelector({ fraction: 0.1, seed: 7 });
    a(names, 1);
    a(names, 2);
    expect(a(names, 3)).toEqual(b(names, 3));
  });

  it('draws other clients in another round and under another seed', () => {
    const select = seededSelector({ fraction: 0.1, seed: 1 });
    expect(select(names, 2)).not.toEqual(select(names, 1));
    expect(seededSelector({ fraction: 0.1, seed: 2 })(names, 1)).not.toEqual(select(names, 1));
  });

  it('selects every client about C of the rounds', () => {
    const select = seededSelector({ fraction: 0.1, seed: 3 });
    const counts = new Map(names.map((n) => [n, 0]));
    for (let round = 1; round <= 2000; round += 1) {
      for (const n of select(names, round)) counts.set(n, (counts.get(n) ?? 0) + 1);
    }
    // 200 expected per client; binomial sd ~13.4, so 150-250 is beyond 3.7 sd either side.
    for (const count of counts.values()) {
      expect(count).toBeGreaterThan(150);
      expect(count).toBeLessThan(250);
    }
  });

  it('honours the minimum and never selects more clients than there are', () => {
    expect(selectedCount(100, 0.1)).toBe(10);
    expect(selectedCount(5, 0.1, 2)).toBe(2);
    expect(selectedCount(3, 0.5, 10)).toBe(3);
    expect(seededSelector({ fraction: 0.01, minimum: 4, seed: 1 })(names, 1)).toHaveLength(4);
    expect(seededSelector({ fraction: 1, seed: 1 })(names.slice(0, 3), 9)).toEqual(
      names.slice(0, 3).sort(),
    );
  });

  it('refuses a fraction outside (0, 1] and a minimum below 1', () => {
    expect(() => seededSelector({ fraction: 0, seed: 1 })).toThrow(/fraction 0 is not in/);
    expect(() => seededSelector({ fraction: 1.5, seed: 1 })).toThrow(/fraction 1.5/);
    expect(() => seededSelector({ fraction: 0.1, minimum: 0, seed: 1 })).toThrow(/minimum 0/);
  });
});
