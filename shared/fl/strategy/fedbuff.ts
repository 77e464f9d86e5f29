/**
 * FedBuff's server side (Nguyen et al. 2022, "Federated Learning with Buffered Asynchronous
 * Aggregation", Algorithm 1), the pure half: trainers train from whatever model version they
 * fetched and send their delta; the server buffers K of them and then steps
 *   model + serverLr * sum_k s(staleness_k) * samples_k * delta_k / sum_k samples_k
 * where staleness_k is how many versions the model moved on since delta_k's start. With equal
 * sample counts this is the paper's serverLr * sum_k s(staleness_k) delta_k / K; the staleness
 * weight s is not renormalised, so stale deltas really count for less. An update more than
 * maxStaleness versions behind is refused with the reason.
 */
import { ValidationError } from '../../errors/index.js';
import { alignedValues } from '../fedavg.js';
import type { WeightUpdate } from '../fedavg.js';
import type { NamedTensors, Tensor } from '../weights.js';
import { addDelta, deltaOf, modelValues, toTensors } from './tensors.js';

/**
 * How much a delta `staleness` versions old counts: `constant` 1, or `polynomial` (1 + s)^-a
 * (a = 0.5 by default: FedBuff's 1 / sqrt(1 + s)).
 */
type StalenessPolicy =
  { readonly kind: 'constant' } | { readonly kind: 'polynomial'; readonly a?: number };

function stalenessWeight(staleness: number, policy: StalenessPolicy): number {
  if (!Number.isSafeInteger(staleness) || staleness < 0) {
    throw new ValidationError(`staleness ${staleness} is not an integer >= 0`);
  }
  if (policy.kind === 'constant') return 1;
  const a = policy.a ?? 0.5;
  if (!Number.isFinite(a) || a < 0) {
    throw new ValidationError(`staleness exponent a ${a} is not a finite number >= 0`);
  }
  return (1 + staleness) ** -a;
}

/**
 * The staleness of an update trained from `updateVersion` when the model is at `currentVersion`;
 * throws (ValidationError, with the reason) when it is over `maxStaleness` or from the future.
 */
function checkStaleness(
  updateVersion: number,
  currentVersion: number,
  maxStaleness: number,
): number {
  for (const [name, value] of Object.entries({ updateVersion, currentVersion, maxStaleness })) {
    if (!Number.isSafeInteger(value) || value < 0) {
      throw new ValidationError(`${name} ${value} is not an integer >= 0`);
    }
  }
  if (updateVersion > currentVersion) {
    throw new ValidationError(
      `update on version ${updateVersion} is ahead of the model's version ${currentVersion}`,
    );
  }
  const staleness = currentVersion - updateVersion;
  if (staleness > maxStaleness) {
    throw new ValidationError(
      `update on version ${updateVersion} is ${staleness} versions stale; max ${maxStaleness}`,
    );
  }
  return staleness;
}

/**
 * A trainer's delta from the model version it started from (float32, `start`'s names and dims).
 * Refuses (ValidationError) what fedavg.ts refuses of an update.
 */
function modelDelta(start: NamedTensors, update: WeightUpdate): Map<string, Tensor> {
  return toTensors(start, deltaOf(alignedValues(start, update), modelValues(start)));
}

/** One buffered contribution: whose, trained from which version, on how many samples. */
interface BufferedUpdate {
  readonly worker: string;
  /** The model version the trainer started from. */
  readonly version: number;
  readonly samples: number;
  /** Its weights minus that version's (modelDelta). */
  readonly delta: NamedTensors;
}

interface BufferedStep {
  /** The model the buffered deltas are applied to (the current version). */
  readonly base: NamedTensors;
  readonly version: number;
  readonly buffered: readonly BufferedUpdate[];
  readonly serverLr: number;
  readonly policy: StalenessPolicy;
  readonly maxStaleness: number;
}

/**
 * The next model from the buffer (sums in float64, in (worker, version) order, so arrival order
 * does not matter), and each contribution's staleness and weight. Refuses (ValidationError) an
 * empty buffer, a repeated (worker, version), a stale or misfit delta, zero samples in all, and a
 * serverLr that is not a finite number > 0. A worker may appear with several versions: a fast
 * trainer can contribute twice to one buffer.
 */
function bufferedStep(step: BufferedStep): {
  weights: Map<string, Tensor>;
  applied: ReadonlyArray<{ worker: string; version: number; staleness: number; weight: number }>;
} {
  const { base, version, buffered, serverLr, policy, maxStaleness } = step;
  if (!Number.isFinite(serverLr) || serverLr <= 0) {
    throw new ValidationError(`serverLr ${serverLr} is not a finite number > 0`);
  }
  if (buffered.length === 0) throw new ValidationError('no buffered updates to apply');
  const entries = buffered
    .map((update) => ({ update, name: `${update.worker} (version ${update.version})` }))
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  entries.forEach(({ name }, i) => {
    if (i > 0 && entries[i - 1]!.name === name)
      throw new ValidationError(`${name} is buffered twice`);
  });
  const total = buffered.reduce((sum, u) => sum + u.samples, 0);
  const sum = modelValues(base).map((v) => new Float64Array(v.length));
  const applied = entries.map(({ update, name }) => {
    const values = alignedValues(base, {
      worker: name,
      samples: update.samples,
      weights: update.delta,
    });
    const staleness = checkStaleness(update.version, version, maxStaleness);
    const weight = stalenessWeight(staleness, policy);
    const scale = (serverLr * weight * update.samples) / total;
    values.forEach((part, t) => {
      const s = sum[t]!;
      for (let i = 0; i < part.length; i += 1) s[i]! += scale * part[i]!;
    });
    return { worker: update.worker, version: update.version, staleness, weight };
  });
  if (!(total > 0)) throw new ValidationError('the buffered updates hold zero samples in total');
  return { weights: addDelta(base, sum), applied };
}

export { stalenessWeight, checkStaleness, modelDelta, bufferedStep };
export type { StalenessPolicy, BufferedUpdate, BufferedStep };
