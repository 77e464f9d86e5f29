/**
 * Which trainers train in a round (Flower's FedAvg.num_fit_clients and ClientManager.sample): a
 * uniform sample without replacement of max(int(fraction * n), minimum) of the n available,
 * seeded by the job's seed and the round, so a round's selection is the same on every replica
 * and after every restart, whatever order the trainers were listed in.
 */
import { UnavailableError, ValidationError } from '../../errors/index.js';
import { sampleSize } from '../../messages/federated.js';
import { SeededRandom } from '../../random/index.js';
import { streamSeed } from './seeds.js';

interface Selection {
  /** The trainers to choose from (unique names, any order). */
  readonly available: readonly string[];
  /** Fraction of them to train, in [0, 1] (Flower's fraction_fit). */
  readonly fraction: number;
  /** At least this many, >= 1 (Flower's min_fit_clients). */
  readonly minimum: number;
  readonly seed: number;
  /** The server round (an integer >= 1, as round-store.ts counts): every round draws anew. */
  readonly round: number;
}

/**
 * The trainers selected for the round, in name order. Refuses (ValidationError) a fraction
 * outside [0, 1], a minimum that is not an integer >= 1, a repeated name, a bad seed or round;
 * fails with UnavailableError (retryable: more trainers may come up) when fewer are available
 * than the round needs, where Flower's sample() waits or returns none.
 */
function selectClients(selection: Selection): string[] {
  const { available, fraction, minimum, seed, round } = selection;
  if (!(fraction >= 0 && fraction <= 1)) {
    throw new ValidationError(`fraction ${fraction} is not in [0, 1]`);
  }
  if (!Number.isSafeInteger(minimum) || minimum < 1) {
    throw new ValidationError(`minimum ${minimum} is not an integer >= 1`);
  }
  if (!Number.isSafeInteger(seed)) throw new ValidationError(`seed ${seed} is not an integer`);
  if (!Number.isSafeInteger(round) || round < 1) {
    throw new ValidationError(`round ${round} is not an integer >= 1`);
  }
  const sorted = [...available].sort();
  sorted.forEach((name, i) => {
    if (i > 0 && sorted[i - 1] === name)
      throw new ValidationError(`trainer ${name} is listed twice`);
  });
  const n = sorted.length;
  const size = sampleSize(n, fraction, minimum);
  if (size > n) {
    throw new UnavailableError(
      `${n} trainers are available, the round needs ${size} (fraction ${fraction}, minimum ${minimum})`,
    );
  }
  const { next } = new SeededRandom(streamSeed(seed, round, 'selection'));
  for (let i = 0; i < size; i += 1) {
    const j = i + Math.floor(next() * (n - i));
    [sorted[i], sorted[j]] = [sorted[j]!, sorted[i]!];
  }
  return sorted.slice(0, size).sort();
}

export { selectClients };
export type { Selection };
