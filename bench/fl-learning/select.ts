/**
 * Which clients train in a round: McMahan et al.'s C, a fraction of the K clients with a floor
 * (max(C K, minimum), capped at K), drawn without replacement from a generator seeded by the job's
 * seed and the round alone. The same seed and round give the same clients whatever ran before, so
 * a rerun, a resumed run or a run over HTTP trains the same clients each round.
 *
 * A local stand-in: the lead swaps in the shared selector (issue 32, Build 2) when it lands; the
 * simulation takes any function of this shape.
 */
import { seededRandom } from '../../shared/random/index.js';

/** Picks the round's clients from `clients` (names); returns them in ascending name order. */
type SelectClients = (clients: readonly string[], round: number) => string[];

interface SelectionOptions {
  /** C: the share of the clients selected each round, in (0, 1]. */
  readonly fraction: number;
  /** At least this many (Flower's min_fit_clients); default 1. */
  readonly minimum?: number;
  readonly seed: number;
}

/** How many of `k` clients a round selects: max(round(C k), minimum), at most k. */
function selectedCount(k: number, fraction: number, minimum = 1): number {
  return Math.min(k, Math.max(minimum, Math.round(fraction * k)));
}

/**
 * A selector drawing `selectedCount` clients per round with a partial Fisher-Yates shuffle of the
 * names in the order given. The generator of round r is seeded by (seed, r) through an integer
 * hash, so rounds are independent draws. Throws a RangeError on a fraction outside (0, 1] or a
 * minimum that is not a positive integer.
 */
function seededSelector(options: SelectionOptions): SelectClients {
  const { fraction, minimum = 1, seed } = options;
  if (!(fraction > 0 && fraction <= 1)) {
    throw new RangeError(`fraction ${fraction} is not in (0, 1]`);
  }
  if (!Number.isSafeInteger(minimum) || minimum < 1) {
    throw new RangeError(`minimum ${minimum} is not an integer >= 1`);
  }
  return (clients, round) => {
    const pool = [...clients];
    const count = selectedCount(pool.length, fraction, minimum);
    const uniform = seededRandom(roundSeed(seed, round));
    for (let i = 0; i < count; i += 1) {
      const j = i + Math.floor(uniform() * (pool.length - i));
      [pool[i], pool[j]] = [pool[j]!, pool[i]!];
    }
    return pool.slice(0, count).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  };
}

/** A 32-bit seed for round `round` of a job seeded `seed` (murmur3's finalizer over both). */
function roundSeed(seed: number, round: number): number {
  let h = Math.imul(seed ^ 0x9e3779b9, 0x85ebca6b) ^ round;
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b);
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35);
  return (h ^ (h >>> 16)) >>> 0;
}

export { seededSelector, selectedCount, roundSeed };
export type { SelectClients, SelectionOptions };
