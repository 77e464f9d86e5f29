/** Client selection: Flower's sample size, reproducible from the seed, fresh every round. */
import { describe, expect, it } from 'vitest';
import { UnavailableError, ValidationError } from '../../../../shared/errors/index.js';
import { sampleSize } from '../../../../shared/messages/federated.js';
import { selectClients } from '../../../../shared/fl/strategy/selection.js';
import { seededRandom, shuffle } from '../../../../shared/random/index.js';

const trainers = (n: number) => Array.from({ length: n }, (_, i) => `trainer-${i}`);

describe('sampleSize', () => {
  it("is max(int(fraction * n), minimum), as Flower's num_fit_clients rounds", () => {
    expect(sampleSize(100, 0.1, 2)).toBe(10);
    expect(sampleSize(25, 0.3, 1)).toBe(7); // int(7.5)
    expect(sampleSize(100, 0.29, 1)).toBe(28); // int(28.999999999999996), as Python gives
    expect(sampleSize(7, 0.1, 2)).toBe(2); // int(0.7) = 0, the minimum
    expect(sampleSize(10, 1, 1)).toBe(10);
    expect(sampleSize(10, 0, 3)).toBe(3);
  });
});

describe('selectClients', () => {
  const base = { available: trainers(100), fraction: 0.1, minimum: 2, seed: 1234, round: 1 };

  it('is reproducible from the seed and independent of the listing order', () => {
    const first = selectClients(base);
    expect(first).toHaveLength(10);
    expect(new Set(first).size).toBe(10);
    expect([...first].sort()).toEqual(first);
    for (const name of first) expect(base.available).toContain(name);
    const uniform = seededRandom(5);
    for (let trial = 0; trial < 5; trial += 1) {
      const listed = shuffle([...base.available], uniform);
      expect(selectClients({ ...base, available: listed })).toEqual(first);
    }
    expect(selectClients({ ...base, seed: 1235 })).not.toEqual(first);
  });

  it('draws a different sample every round, each trainer about equally often', () => {
    const rounds = Array.from({ length: 2000 }, (_, r) => selectClients({ ...base, round: r + 1 }));
    const distinct = new Set(rounds.slice(0, 50).map((s) => s.join(',')));
    expect(distinct.size).toBe(50);
    const counts = new Map<string, number>();
    for (const s of rounds) for (const name of s) counts.set(name, (counts.get(name) ?? 0) + 1);
    // Each trainer is chosen with probability 0.1 per round: 200 times in 2,000 rounds, standard
    // deviation sqrt(2000 * 0.1 * 0.9) = 13.4; 140..260 is 4.5 of them (fixed seed: no flake).
    expect(counts.size).toBe(100);
    for (const count of counts.values()) {
      expect(count).toBeGreaterThan(140);
      expect(count).toBeLessThan(260);
    }
  });

  it('takes at least the minimum, and everyone at fraction 1', () => {
    expect(selectClients({ ...base, available: trainers(7) })).toHaveLength(2);
    expect(selectClients({ ...base, fraction: 1 })).toEqual([...base.available].sort());
  });

  it('fails retryably when fewer are available than the round needs', () => {
    const run = () => selectClients({ ...base, available: trainers(3), minimum: 5 });
    expect(run).toThrow(UnavailableError);
    expect(run).toThrow('3 trainers are available, the round needs 5 (fraction 0.1, minimum 5)');
  });

  it('refuses bad parameters and a repeated trainer, naming them', () => {
    const cases: Array<[Partial<typeof base>, string]> = [
      [{ fraction: 1.5 }, 'fraction 1.5 is not in [0, 1]'],
      [{ fraction: Number.NaN }, 'fraction NaN is not in [0, 1]'],
      [{ minimum: 0 }, 'minimum 0 is not an integer >= 1'],
      [{ seed: 0.5 }, 'seed 0.5 is not an integer'],
      [{ round: 0 }, 'round 0 is not an integer >= 1'],
      [{ available: ['a', 'b', 'a'] }, 'trainer a is listed twice'],
    ];
    for (const [over, message] of cases) {
      expect(() => selectClients({ ...base, ...over })).toThrow(ValidationError);
      expect(() => selectClients({ ...base, ...over })).toThrow(message);
    }
  });
});
