/**
 * Poisoned trainers for the robust-aggregation conditions: in every round, `count` of the selected
 * trainers send shared/fl/strategy/poison.ts's attack instead of their honest update. Which ones
 * is a seeded draw per round (a partial Fisher-Yates over the round's workers in name order, from
 * the `poison` stream of shared/fl/strategy/seeds.ts), so it depends on the seed and the round
 * alone, never on the order the updates came back in. A `random` attack's noise is seeded per
 * round and worker.
 */
import type { WeightUpdate } from '../../shared/fl/fedavg.js';
import { poison } from '../../shared/fl/strategy/poison.js';
import type { Attack } from '../../shared/fl/strategy/poison.js';
import { streamSeed } from '../../shared/fl/strategy/seeds.js';
import { SeededRandom } from '../../shared/random/index.js';
import type { Algorithm } from './simulate.js';

/** The poisoned trainers of a round: `count` of `workers` (any order), in name order. */
function poisonedWorkers(
  workers: readonly string[],
  count: number,
  seed: number,
  round: number,
): string[] {
  if (!Number.isSafeInteger(count) || count < 0 || count > workers.length) {
    throw new RangeError(`${count} poisoned of ${workers.length} trainers is not possible`);
  }
  const sorted = [...workers].sort();
  const { next } = new SeededRandom(streamSeed(seed, round, 'poison'));
  for (let i = 0; i < count; i += 1) {
    const j = i + Math.floor(next() * (sorted.length - i));
    [sorted[i], sorted[j]] = [sorted[j]!, sorted[i]!];
  }
  return sorted.slice(0, count).sort();
}

/** The corrupt hook: `count` of each round's trainers send `attack` (seeded by `seed`). */
function poisoner(attack: Attack, count: number, seed: number): NonNullable<Algorithm['corrupt']> {
  return (updates: readonly WeightUpdate[], base, round) => {
    const names = updates.map((u) => u.worker);
    const bad = poisonedWorkers(names, count, seed, round);
    return updates.map((u) => {
      const k = bad.indexOf(u.worker);
      return k < 0 ? u : poison(u, base, attack, streamSeed(seed, round * 1024 + k, 'poison'));
    });
  };
}

/** An attack as text: `signflip x4`, `scale x10`, `random std 1`. */
function describeAttack(attack: Attack): string {
  return attack.kind === 'random' ? `random std ${attack.std}` : `${attack.kind} x${attack.factor}`;
}

export { poisonedWorkers, poisoner, describeAttack };
